"""Which block device a stream's file lands on, named as node_exporter names it.

The writer reports the `major:minor` of the filesystem its file is on (`st_dev`); the
kernel names that device in /sys/dev/block/<major>:<minor>. node_exporter's diskstats
collector reports whole disks by kernel name (`device="nvme0n1"`, `"dm-0"`) and by default
leaves partitions out, so both the device itself and the whole disk it belongs to are
published: a panel joins `node_disk_*{device=<disk>}` for a partition's filesystem.

Filesystems without a block device (tmpfs, FUSE, overlay on them, NFS) have major 0: then
both names are empty and only `major_minor` is published.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SYS_DEV_BLOCK = Path("/sys/dev/block")


@dataclass(frozen=True, slots=True)
class BlockDevice:
    major_minor: str
    #: Kernel name of the device (nvme0n1p1, dm-0, loop3), "" without one.
    device: str = ""
    #: The whole disk it is part of (nvme0n1 for nvme0n1p1; itself for a whole disk).
    disk: str = ""


def block_device(major: int, minor: int, sys_dev_block: Path = SYS_DEV_BLOCK) -> BlockDevice:
    """The names of device major:minor; never raises (unknown parts stay empty)."""
    major_minor = f"{major}:{minor}"
    if major == 0:
        return BlockDevice(major_minor)
    entry = sys_dev_block / major_minor
    device = _devname(entry)
    if not device:
        return BlockDevice(major_minor)
    disk = device
    try:
        # A partition's sysfs directory sits inside its disk's and has a `partition` file.
        if (entry / "partition").exists():
            disk = _devname(entry.resolve().parent) or device
    except OSError:
        pass
    return BlockDevice(major_minor, device, disk)


def _devname(directory: Path) -> str:
    try:
        text = (directory / "uevent").read_text(encoding="ascii", errors="replace")
    except OSError:
        return ""
    for line in text.splitlines():
        if line.startswith("DEVNAME="):
            return line.removeprefix("DEVNAME=").strip()
    return ""
