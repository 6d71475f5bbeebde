"""Whether a probe directory is on etcd's filesystem, before anything measures it as etcd's.

An etcd target's probe directory is a directory of its own (`/var/lib/etcd-fioprobe`) that
must sit on the filesystem of etcd's data directory. Where etcd has a disk of its own
mounted at its data directory, a probe directory on the root disk measures the root disk,
and every run would still publish etcd_disk="true": the etcd alerts would judge a disk etcd
does not use. So a target that names `etcd_data_dir` compares the device of the open probe
directory with the device of etcd's data directory (mounted read-only into the pod, only
stat'ed: it is typically root's and 0700) before anything is written there; a mismatch
refuses the target (`unsafe_target`) and the refusal publishes no etcd role.

Same device means same filesystem: a hostPath is a bind mount, which keeps the device of
the filesystem it shows. btrfs gives each subvolume a device of its own, so there the
probe directory must be in etcd's subvolume.

The data directory lies on the probed disk, so its stat can hang with that disk: it is
called only where the volume is touched (the probe's volume child, the stream's writer
child). This module imports only the standard library and `fioprobe.errors`, so the
stream's small writer process can use it.
"""

from __future__ import annotations

import errno
import os
import stat

from fioprobe.errors import FailureReason, ProbeFailure, reason_for_errno


class NotEtcdsFilesystem(ProbeFailure):
    """The target is refused: its probe directory is not on etcd's filesystem, or etcd's
    data directory is not there to compare with. A run refused this way publishes
    etcd_disk="false": it measured nothing of etcd's disk and must not claim to."""

    def __init__(self, message: str) -> None:
        super().__init__(FailureReason.UNSAFE_TARGET, message)


def check(directory: str, directory_fd: int, data_dir: str) -> None:
    """Raise NotEtcdsFilesystem unless the open probe directory (`directory_fd`) and etcd's
    data directory are on one device. A stat that fails otherwise (EIO, EACCES) is a
    ProbeFailure of its errno's reason: the question stays open, so the target's declared
    role stands for that run."""
    what = f"etcd's data directory {data_dir}"
    try:
        info = os.lstat(data_dir)  # its own name is never followed: a symlink is refused
    except FileNotFoundError:
        raise NotEtcdsFilesystem(
            f"{what} does not exist here: is etcd.dataDir right for this distribution?"
        ) from None
    except OSError as exc:
        if exc.errno == errno.ENOTDIR:  # a path component is a file
            raise NotEtcdsFilesystem(
                f"{what} is not a directory (a part of its path is not)"
            ) from None
        reason = reason_for_errno(exc.errno, FailureReason.IO_ERROR)
        raise ProbeFailure(reason, f"{what}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(info.st_mode):
        raise NotEtcdsFilesystem(
            f"{what} is a symlink: give the real directory, as etcd.dataDir names it"
        )
    if not stat.S_ISDIR(info.st_mode):
        raise NotEtcdsFilesystem(f"{what} is not a directory: is etcd.dataDir right?")
    try:
        own = os.fstat(directory_fd).st_dev
    except OSError as exc:
        reason = reason_for_errno(exc.errno, FailureReason.IO_ERROR)
        raise ProbeFailure(reason, f"{directory}: {exc.strerror or exc}") from None
    if own != info.st_dev:
        raise NotEtcdsFilesystem(
            f"{directory}: the probe directory is not on etcd's filesystem ({data_dir} is on "
            f"device {_device(info.st_dev)}, the probe directory on {_device(own)}); the "
            "probe would measure another disk than etcd's"
        )


def _device(number: int) -> str:
    return f"{os.major(number)}:{os.minor(number)}"
