"""Loop-device filesystems and cgroup v1 blkio throttling: a real, adjustable IOPS ceiling.

Why this exists: a gp2 volume that ran out of burst credits, or any disk at its limit, shows
up as an IOPS (or bandwidth) ceiling. On the build machine neither dm-delay nor cgroup v2
io.max exist, but cgroup v1's blk-throttle does: limits are per (cgroup, device), so a small
ext4 filesystem on a loop device gets its own device number that can be throttled for the
processes of one cgroup without touching the host's disk or anybody else's IO.

Measured on the build machine (kernel 6.18, loop over a file on ext4, limits on the loop
device's own major:minor; see README.md for details):
- fio direct=1 (libaio, psync, io_uring) reads and writes: throttled to the limit exactly.
- buffered writes + fdatasync (the etcd-fsync pattern): throttled too, because fdatasync
  writes the dirty pages back in the calling task's context; the jbd2 journal commit is not.
- plain buffered writes without sync: not throttled (cgroup v1 cannot attribute writeback).
- a limit on the *backing* disk (vda) does not slow loop writes (the loop driver writes to
  the backing file's page cache), only cache-missing loop reads.

Everything here is cleaned up in every case; every wait is bounded.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

BLKIO_ROOT = Path("/sys/fs/cgroup/blkio")
CGROUP_PREFIX = "fioprobe-test-"

# Every cgroup this process created, so that a test can assert that none is left behind.
CREATED_CGROUPS: list[Path] = []
# Every loop mount this process made (image, device, mountpoint), for the same reason.
CREATED_LOOP_MOUNTS: list[LoopMount] = []

_LIMIT_FILES = {
    "read_iops": "blkio.throttle.read_iops_device",
    "write_iops": "blkio.throttle.write_iops_device",
    "read_bps": "blkio.throttle.read_bps_device",
    "write_bps": "blkio.throttle.write_bps_device",
}


def _run(cmd: Sequence[str], timeout: float = 60.0) -> str:
    """Run a setup command, raising with its stderr on failure (setup must not half-work)."""
    res = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr.strip()}")
    return res.stdout


def _run_quiet(cmd: Sequence[str], timeout: float = 30.0) -> bool:
    """Run a cleanup command; report success, never raise (cleanup must go on)."""
    try:
        return (
            subprocess.run(list(cmd), capture_output=True, timeout=timeout, check=False).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


def _mounted_at(path: Path) -> bool:
    """True if something is mounted exactly at ``path`` (from /proc/self/mounts)."""
    target = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[1].replace("\\040", " ") == target:
                return True
    return False


def leftovers() -> list[str]:
    """What this process created and did not clean up (empty when all is well)."""
    left = [f"cgroup {p}" for p in CREATED_CGROUPS if p.exists()]
    for lm in CREATED_LOOP_MOUNTS:
        backing = loop_backing_file(lm.device)
        if backing and os.path.realpath(backing) == os.path.realpath(lm.image):
            left.append(f"loop device {lm.device} -> {lm.image}")
        if _mounted_at(lm.mountpoint):
            left.append(f"mount {lm.mountpoint}")
        if lm.image.exists():
            left.append(f"image {lm.image}")
    return left


def loop_backing_file(device: str) -> str | None:
    """Backing file of a loop device, or None if it is not bound (from sysfs)."""
    name = os.path.basename(device)
    try:
        return Path(f"/sys/block/{name}/loop/backing_file").read_text().strip()
    except OSError:
        return None


def _umount(path: Path, timeout_s: float = 30.0) -> None:
    """Unmount, retrying briefly while busy, then lazily; raises if it is still mounted."""
    deadline = time.monotonic() + timeout_s
    while _mounted_at(path) and time.monotonic() < deadline:
        if _run_quiet(["umount", str(path)], timeout=max(1.0, deadline - time.monotonic())):
            break
        time.sleep(0.2)
    if _mounted_at(path):
        _run_quiet(["umount", "-l", str(path)])
    if _mounted_at(path):
        raise RuntimeError(f"could not unmount {path}")


def _detach_loop(device: str, image: Path, timeout_s: float = 20.0) -> None:
    """Detach ``device`` if it is still bound to ``image``; retries while the kernel is busy.

    Checks the backing file first so a device that was already released and then taken by
    somebody else is never detached by mistake.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        backing = loop_backing_file(device)
        if backing is None or os.path.realpath(backing) != os.path.realpath(image):
            return
        if _run_quiet(["losetup", "-d", device], timeout=10):
            return
        time.sleep(0.2)
    raise RuntimeError(f"could not detach {device} from {image}")


@dataclass
class LoopMount:
    """A mounted filesystem on a loop device over a sparse image file."""

    image: Path
    device: str
    mountpoint: Path
    major: int
    minor: int

    @property
    def devno(self) -> str:
        """'MAJ:MIN' as blkio.throttle.* files want it."""
        return f"{self.major}:{self.minor}"


@contextlib.contextmanager
def loop_mount(
    mountpoint: str | os.PathLike[str],
    size_bytes: int = 256 * 1024 * 1024,
    image_dir: str | os.PathLike[str] | None = None,
    fstype: str = "ext4",
    loop_direct_io: bool = False,
) -> Iterator[LoopMount]:
    """Create a sparse image, bind a free loop device to it, mkfs and mount it.

    Each step registers its own undo before the next one starts, so a failure anywhere
    (no free loop device, mkfs error, a body that raises) still unmounts, detaches and
    deletes what exists. ``loop_direct_io`` makes the loop driver bypass the backing file's
    page cache (``losetup --direct-io=on``), closer to a real disk; off by default because it
    needs the image's filesystem to support O_DIRECT.
    """
    mp = Path(mountpoint).resolve()
    mp.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        fd, image_name = tempfile.mkstemp(prefix="fioprobe-loop-", suffix=".img", dir=image_dir)
        image = Path(image_name)
        stack.callback(lambda: image.unlink(missing_ok=True))
        try:
            os.ftruncate(fd, size_bytes)  # sparse: costs no space until written
        finally:
            os.close(fd)

        cmd = ["losetup", "--find", "--show"]
        if loop_direct_io:
            cmd.append("--direct-io=on")
        device = _run([*cmd, str(image)]).strip()
        stack.callback(_detach_loop, device, image)

        st = os.stat(device)
        mkfs = [f"mkfs.{fstype}", "-q"]
        if fstype.startswith("ext"):
            # No lazy init: otherwise ext4lazyinit writes in the background during the
            # measurement, and -F because the target is not a partition.
            mkfs += ["-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"]
        _run([*mkfs, device], timeout=120)

        _run(["mount", device, str(mp)])
        stack.callback(_umount, mp)
        lm = LoopMount(image, device, mp, os.major(st.st_rdev), os.minor(st.st_rdev))
        CREATED_LOOP_MOUNTS.append(lm)
        yield lm


def blkio_available() -> str | None:
    """None if cgroup v1 blk-throttle is usable here, else the reason it is not."""
    if not (BLKIO_ROOT / "blkio.throttle.write_iops_device").exists():
        return f"cgroup v1 blkio throttling is not mounted at {BLKIO_ROOT}"
    if os.geteuid() != 0:
        return "cgroup v1 blkio throttling needs root"
    return None


@dataclass
class BlkioCgroup:
    """A cgroup v1 blkio group: set or lift limits, run commands in it.

    Processes started with :meth:`popen` get their own session (process group) so that
    :meth:`remove` can end them and their children by PID.
    """

    path: Path
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @classmethod
    def create(cls, name: str | None = None) -> BlkioCgroup:
        """Create ``/sys/fs/cgroup/blkio/fioprobe-test-<random>``."""
        path = BLKIO_ROOT / (name or CGROUP_PREFIX + secrets.token_hex(4))
        path.mkdir()
        CREATED_CGROUPS.append(path)
        return cls(path)

    def set_limits(
        self,
        devno: str,
        *,
        read_iops: int | None = None,
        write_iops: int | None = None,
        read_bps: int | None = None,
        write_bps: int | None = None,
    ) -> None:
        """Set limits for device ``MAJ:MIN``; None leaves one unchanged, 0 lifts it.

        Works while processes run in the group: queued IO is re-evaluated at once.
        """
        values = {
            "read_iops": read_iops,
            "write_iops": write_iops,
            "read_bps": read_bps,
            "write_bps": write_bps,
        }
        for key, value in values.items():
            if value is not None:
                (self.path / _LIMIT_FILES[key]).write_text(f"{devno} {int(value)}\n")

    def limits(self) -> dict[str, dict[str, int]]:
        """Current limits as {kind: {devno: value}} (kinds without a limit are empty)."""
        out: dict[str, dict[str, int]] = {}
        for key, fname in _LIMIT_FILES.items():
            rows = (self.path / fname).read_text().split("\n")
            out[key] = {r.split()[0]: int(r.split()[1]) for r in rows if r.strip()}
        return out

    def lift(self) -> None:
        """Remove every limit on every device (lets throttled IO drain at full speed)."""
        for kind, per_dev in self.limits().items():
            for devno in per_dev:
                (self.path / _LIMIT_FILES[kind]).write_text(f"{devno} 0\n")

    def ios_done(self, devno: str, op: str = "Write") -> int:
        """IOs of kind `op` (Read, Write, ...) the group has had serviced on ``MAJ:MIN``."""
        for row in (self.path / "blkio.throttle.io_serviced").read_text().splitlines():
            fields = row.split()
            if len(fields) == 3 and fields[0] == devno and fields[1] == op:
                return int(fields[2])
        return 0

    def pids(self) -> list[int]:
        """PIDs currently in the group."""
        try:
            text = (self.path / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(p) for p in text.split()]

    def add_pid(self, pid: int) -> None:
        """Move an existing process (all its threads) into the group."""
        (self.path / "cgroup.procs").write_text(f"{pid}\n")

    def wrap(self, cmd: Sequence[str]) -> list[str]:
        """``cmd`` prefixed so that it joins the group before exec.

        A shell wrapper rather than preexec_fn: preexec_fn is unsafe in threaded programs
        (pytest plugins, FUSE threads), and the wrapper also works from other languages.
        """
        procs = str(self.path / "cgroup.procs")
        script = 'echo $$ > "$0" && exec "$@"'
        return ["sh", "-c", script, procs, *cmd]

    @property
    def prefix(self) -> list[str]:
        """Argv prefix that runs whatever follows it inside the group (``wrap([])``)."""
        return self.wrap([])

    def popen(self, cmd: Sequence[str], **kwargs: object) -> subprocess.Popen[bytes]:
        """Start ``cmd`` inside the group (own session); remembered for :meth:`remove`."""
        proc: subprocess.Popen[bytes] = subprocess.Popen(
            self.wrap(cmd),
            start_new_session=True,
            **kwargs,  # type: ignore[call-overload]
        )
        self.started.append(proc)
        return proc

    def run(
        self, cmd: Sequence[str], timeout: float, **kwargs: object
    ) -> subprocess.CompletedProcess[bytes]:
        """Run ``cmd`` inside the group to completion, killing its process group on timeout."""
        proc = self.popen(cmd, **kwargs)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def remove(self, timeout_s: float = 20.0) -> None:
        """Lift limits, end what we started, move any other process out, rmdir the group.

        Limits go first so that IO queued by the throttle drains instead of holding up the
        processes that are being ended.
        """
        if not self.path.exists():
            return
        with contextlib.suppress(OSError):
            self.lift()
        for proc in self.started:
            _kill_group(proc)
        deadline = time.monotonic() + timeout_s
        while True:
            for pid in self.pids():
                with contextlib.suppress(OSError):
                    (BLKIO_ROOT / "cgroup.procs").write_text(f"{pid}\n")
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError as e:
                if e.errno != errno.EBUSY or time.monotonic() > deadline:
                    raise RuntimeError(f"could not remove {self.path}: {e}") from e
            time.sleep(0.1)


def _kill_group(proc: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    """End ``proc`` and its process group: SIGTERM, bounded wait, then SIGKILL."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
        return
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)


@contextlib.contextmanager
def blkio_cgroup(name: str | None = None) -> Iterator[BlkioCgroup]:
    """A fresh blkio cgroup for the ``with`` body, removed afterwards in every case."""
    cg = BlkioCgroup.create(name)
    try:
        yield cg
    finally:
        cg.remove()


@dataclass
class ThrottledMount:
    """A loop-mounted filesystem plus a cgroup whose limits apply to its device."""

    mount: LoopMount
    cgroup: BlkioCgroup

    @property
    def path(self) -> Path:
        """Where to run fio (the mounted filesystem)."""
        return self.mount.mountpoint

    def set_limits(self, **limits: int | None) -> None:
        """Change limits (read_iops, write_iops, read_bps, write_bps) for this device."""
        self.cgroup.set_limits(self.mount.devno, **limits)

    def lift(self) -> None:
        """Remove every limit (e.g. partway through a run)."""
        self.cgroup.lift()


@contextlib.contextmanager
def throttled_loop_mount(
    mountpoint: str | os.PathLike[str],
    size_bytes: int = 256 * 1024 * 1024,
    image_dir: str | os.PathLike[str] | None = None,
    **limits: int | None,
) -> Iterator[ThrottledMount]:
    """:func:`loop_mount` + :func:`blkio_cgroup` with ``limits`` set for the loop device.

    The cgroup is removed before the filesystem is unmounted, so that nothing throttled is
    still writing to it.
    """
    with (
        loop_mount(mountpoint, size_bytes, image_dir) as lm,
        blkio_cgroup() as cg,
    ):
        cg.set_limits(lm.devno, **limits)
        yield ThrottledMount(lm, cg)
