"""A FUSE passthrough filesystem that makes fsync/fdatasync (and optionally writes) slow.

Why this exists: the probes' most important job is to notice a disk whose fsync turned slow
(etcd's WAL fsync p99 above 10 ms). dm-delay, cgroup v2 io.max and netem are not available on
the build machine, so a slow disk is simulated one layer up: every file operation is passed
through to a backing directory unchanged, and FSYNC requests sleep for a configured time
*after* the real fsync. That is real latency that fio (every ioengine that issues fsync or
fdatasync) and etcd observe through the kernel; nothing in the code under test is mocked.

It is part of the product because `fioprobe demo` shows an alert firing on such a disk; the
tests and benchmarks use the same code. Run as a process (foreground; SIGTERM/SIGINT unmount
and exit)::

    python -m fioprobe.demo.slowdisk --backing DIR --mountpoint DIR --fsync-delay-ms 15

or from Python with :func:`slow_fs`, which starts that process, waits for the mount, and
always unmounts. The delays can be changed while mounted through ``--control-file`` (the
context manager's :meth:`SlowFs.set_delays`), for "the disk turned slow partway through" tests.

Needs fusepy (pinned in the `demo` extra) and libfuse2's ``libfuse.so.2`` (Debian ``libfuse2``).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import errno
import os
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fuse import Operations

# Polling interval of the control-file watcher: small enough that a delay change takes effect
# within a fraction of a probe run, large enough to cost nothing.
CONTROL_POLL_S = 0.05

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
_libc.fallocate.restype = ctypes.c_int


class Delays:
    """Current delays in seconds, shared by all FUSE worker threads.

    Plain float attributes: a reader seeing the old or the new value during a change is fine,
    and a lock would serialise every FUSE request for nothing. A held request waits in
    `hold`, which a `release` ends at once: a hung disk that answers again answers what it
    held, not only what comes after.
    """

    def __init__(
        self, fsync_s: float, write_s: float, fail_errno: int = 0, unlink_s: float = 0.0
    ) -> None:
        self.fsync_s = fsync_s
        self.write_s = write_s
        #: Non-zero: every write and fsync fails with this errno (a dying disk: EIO).
        self.fail_errno = fail_errno
        #: Added to every unlink and rmdir (a disk that hangs in the clean-up after an error).
        self.unlink_s = unlink_s
        self._released = threading.Condition()
        self._releases = 0

    def arrived(self) -> int:
        """What a request notes when it arrives, for its `hold`: a release after this
        moment answers it, even one that comes before it is held."""
        return self._releases

    def hold(self, seconds: float, arrived: int) -> None:
        """Hold the calling request `seconds`, or until a release after it `arrived`."""
        with self._released:
            self._released.wait_for(lambda: self._releases != arrived, timeout=seconds)

    def release(self) -> None:
        """Answer every held request now."""
        with self._released:
            self._releases += 1
            self._released.notify_all()


def _build_operations(backing: str, delays: Delays) -> Operations:
    """Create the fusepy Operations object (imported lazily so that merely importing this
    module, e.g. for :func:`slow_fs` in a test process, never needs libfuse)."""
    from fuse import FuseOSError, Operations, fuse_get_context

    # Running as root (which `allow_other` needs, e.g. for a kubelet to bind-mount the disk
    # into pods), every file this process creates would be root's; with
    # `default_permissions` the kernel would then keep a non-root caller out of the
    # directory it has just made. A real filesystem gives a new entry its creator's uid, and
    # its creator's gid unless the parent directory is setgid (then the parent's group: that
    # is how fsGroup keeps a volume writable). Not root, the caller is always this process's
    # own user (no `allow_other`), so there is nothing to change.
    give_to_caller = os.geteuid() == 0

    class SlowPassthrough(Operations):
        """Passthrough of every operation fio and etcd use to ``backing``.

        raw_fi=True is used so that open/create see the real open flags (fusepy's plain
        create() gets no flags, and a file created write-only could not be read back).
        Backing files are opened without O_DIRECT: the FUSE layer hands us unaligned Python
        buffers, which O_DIRECT on the backing file would reject with EINVAL.
        """

        use_ns = True  # timestamps as integer nanoseconds, no precision loss

        def __init__(self) -> None:
            self.root = os.path.realpath(backing)

        def _full(self, path: str) -> str:
            return os.path.join(self.root, path.lstrip("/"))

        def _owned_by_caller(self, path: str) -> None:
            if not give_to_caller:
                return
            uid, gid, _pid = fuse_get_context()
            full = self._full(path)
            parent = os.stat(os.path.dirname(full))
            os.lchown(full, uid, -1 if parent.st_mode & stat.S_ISGID else gid)

        # --- metadata ---------------------------------------------------------------
        def access(self, path: str, amode: int) -> None:
            if not os.access(self._full(path), amode):
                raise FuseOSError(errno.EACCES)

        def getattr(self, path: str, fh: Any = None) -> dict[str, int]:
            st = os.fstat(fh.fh) if fh else os.lstat(self._full(path))
            return {
                "st_mode": st.st_mode,
                "st_ino": st.st_ino,
                "st_nlink": st.st_nlink,
                "st_uid": st.st_uid,
                "st_gid": st.st_gid,
                "st_size": st.st_size,
                "st_blocks": st.st_blocks,
                "st_blksize": st.st_blksize,
                "st_rdev": st.st_rdev,
                "st_atime": st.st_atime_ns,
                "st_mtime": st.st_mtime_ns,
                "st_ctime": st.st_ctime_ns,
            }

        def chmod(self, path: str, mode: int) -> None:
            os.chmod(self._full(path), mode)

        def chown(self, path: str, uid: int, gid: int) -> None:
            os.chown(self._full(path), uid, gid, follow_symlinks=False)

        def utimens(self, path: str, times: tuple[int, int] | None = None) -> None:
            if times is None:
                os.utime(self._full(path), follow_symlinks=False)
            else:
                os.utime(self._full(path), ns=times, follow_symlinks=False)

        def readlink(self, path: str) -> str:
            return os.readlink(self._full(path))

        def statfs(self, path: str) -> dict[str, int]:
            sv = os.statvfs(self._full(path))
            keys: tuple[str, ...] = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail")
            keys += ("f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")
            return {k: getattr(sv, k) for k in keys}

        # --- namespace --------------------------------------------------------------
        def readdir(self, path: str, fh: Any) -> list[str]:
            return [".", "..", *os.listdir(self._full(path))]

        def mkdir(self, path: str, mode: int) -> None:
            os.mkdir(self._full(path), mode)
            self._owned_by_caller(path)

        def rmdir(self, path: str) -> None:
            if delays.unlink_s > 0:
                delays.hold(delays.unlink_s, delays.arrived())
            os.rmdir(self._full(path))

        def mknod(self, path: str, mode: int, dev: int) -> None:
            os.mknod(self._full(path), mode, dev)
            self._owned_by_caller(path)

        def unlink(self, path: str) -> None:
            if delays.unlink_s > 0:
                delays.hold(delays.unlink_s, delays.arrived())
            os.unlink(self._full(path))

        def rename(self, old: str, new: str) -> None:
            os.rename(self._full(old), self._full(new))

        def symlink(self, target: str, source: str) -> None:
            # fusepy's naming: creates `target` pointing at `source` (ln -s source target).
            os.symlink(source, self._full(target))
            self._owned_by_caller(target)

        def link(self, target: str, source: str) -> None:
            os.link(self._full(source), self._full(target))

        # --- files ------------------------------------------------------------------
        def open(self, path: str, fi: Any) -> int:
            fi.fh = os.open(self._full(path), fi.flags & ~os.O_DIRECT)
            return 0

        def create(self, path: str, mode: int, fi: Any) -> int:
            flags = (fi.flags & ~os.O_DIRECT) | os.O_CREAT
            fi.fh = os.open(self._full(path), flags, mode)
            self._owned_by_caller(path)
            return 0

        def read(self, path: str, size: int, offset: int, fi: Any) -> bytes:
            return os.pread(fi.fh, size, offset)

        def write(self, path: str, data: bytes, offset: int, fi: Any) -> int:
            arrived = delays.arrived()
            if delays.fail_errno:
                raise FuseOSError(delays.fail_errno)
            if delays.write_s > 0:
                delays.hold(delays.write_s, arrived)
            return os.pwrite(fi.fh, data, offset)

        def truncate(self, path: str, length: int, fh: Any = None) -> None:
            if fh:
                os.ftruncate(fh.fh, length)
            else:
                os.truncate(self._full(path), length)

        def flush(self, path: str, fi: Any) -> None:
            return None  # data already went to the backing file at write time

        def release(self, path: str, fi: Any) -> None:
            os.close(fi.fh)

        def fsync(self, path: str, datasync: int, fi: Any) -> None:
            # The real sync first, then the injected delay: observed latency >= the delay.
            arrived = delays.arrived()
            if delays.fail_errno:
                raise FuseOSError(delays.fail_errno)
            if datasync:
                os.fdatasync(fi.fh)
            else:
                os.fsync(fi.fh)
            if delays.fsync_s > 0:
                delays.hold(delays.fsync_s, arrived)

        def fsyncdir(self, path: str, datasync: int, fi: Any) -> None:
            arrived = delays.arrived()
            fd = os.open(self._full(path), os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            if delays.fsync_s > 0:
                delays.hold(delays.fsync_s, arrived)

    return SlowPassthrough()


def _watch_control_file(path: str, delays: Delays, stop: threading.Event) -> None:
    """Apply "FSYNC_MS WRITE_MS [FAIL_ERRNO [UNLINK_MS [RELEASES]]]" from ``path`` when it
    changes; a new RELEASES count releases every held request (`Delays.release`).

    A polling thread, not a signal: the main thread sits inside libfuse's C loop, where a
    Python signal handler would never run.
    """
    last, released = "", 0
    while not stop.wait(CONTROL_POLL_S):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text == last:
            continue
        last = text
        try:
            fields = [float(x) for x in text.split()]
        except ValueError:
            print(f"slowfs: ignoring malformed control file content {text!r}", file=sys.stderr)
            continue
        if fields:
            delays.fsync_s = fields[0] / 1000.0
        if len(fields) > 1:
            delays.write_s = fields[1] / 1000.0
        delays.fail_errno = int(fields[2]) if len(fields) > 2 else 0
        delays.unlink_s = fields[3] / 1000.0 if len(fields) > 3 else 0.0
        # A line without the count (written by hand) releases nothing.
        if len(fields) > 4 and int(fields[4]) != released:
            released = int(fields[4])
            delays.release()
        print(f"slowfs: delays now fsync={delays.fsync_s}s write={delays.write_s}s "
              f"fail_errno={delays.fail_errno} unlink={delays.unlink_s}s", flush=True)  # fmt: skip


def serve(
    backing: str,
    mountpoint: str,
    fsync_delay_ms: float,
    write_delay_ms: float = 0.0,
    control_file: str | None = None,
) -> None:
    """Mount and serve in the foreground until unmounted or sent SIGTERM/SIGINT/SIGHUP."""
    from fuse import FUSE

    delays = Delays(fsync_delay_ms / 1000.0, write_delay_ms / 1000.0)
    stop = threading.Event()
    if control_file:
        threading.Thread(
            target=_watch_control_file, args=(control_file, delays, stop), daemon=True
        ).start()
    options: dict[str, Any] = {
        "foreground": True,
        "nothreads": False,  # concurrent requests (iodepth, etcd's parallel fsyncs) overlap
        "fsname": "slowfs",
        "subtype": "slowfs",
        "big_writes": True,  # without it libfuse2 splits every write into 4 KiB requests
        "max_write": 131072,
        "use_ino": True,
        "default_permissions": True,
    }
    if os.geteuid() == 0:
        options["allow_other"] = True  # processes of other users (e.g. etcd as its user)
    try:
        FUSE(_build_operations(backing, delays), mountpoint, raw_fi=True, **options)
    finally:
        stop.set()


# --------------------------------------------------------------------------------------
# Test-side helpers: start the filesystem as a subprocess and always clean it up.
# --------------------------------------------------------------------------------------


def _unescape_mount_field(field: str) -> str:
    """/proc/self/mounts escapes space, tab, newline and backslash as octal."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def mount_fstype(path: str | os.PathLike[str]) -> str | None:
    """Filesystem type mounted exactly at ``path``, or None.

    Reads /proc/self/mounts rather than calling os.path.ismount: a FUSE mount whose daemon
    died answers stat() with ENOTCONN, and ismount() then says False although the (dead)
    mount is still there and must still be unmounted.
    """
    target = os.path.realpath(path)
    found: str | None = None
    with open("/proc/self/mounts") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and _unescape_mount_field(parts[1]) == target:
                found = parts[2]  # the last match is the one on top
    return found


def mount_points_under(path: str | os.PathLike[str]) -> list[str]:
    """Mount points at or below ``path``, deepest first (the order to unmount them in)."""
    root = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        points = {
            point
            for line in f
            if len(parts := line.split()) >= 2
            for point in [_unescape_mount_field(parts[1])]
            if point == root or point.startswith(root + "/")
        }
    return sorted(points, key=len, reverse=True)


def _run_quiet(cmd: list[str], timeout: float = 10.0) -> bool:
    """Run a cleanup command; report success, never raise (cleanup must go on)."""
    try:
        return (
            subprocess.run(cmd, capture_output=True, timeout=timeout, check=False).returncode == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


def force_unmount(mountpoint: str | os.PathLike[str], timeout_s: float = 10.0) -> None:
    """Unmount a FUSE mount, falling back to a lazy unmount; no-op if nothing is mounted."""
    mp = os.path.realpath(mountpoint)
    deadline = time.monotonic() + timeout_s
    attempts = [
        ["fusermount3", "-u", mp],
        ["fusermount", "-u", mp],
        ["umount", mp],
        ["fusermount3", "-u", "-z", mp],
        ["umount", "-l", mp],
    ]
    for cmd in attempts:
        if mount_fstype(mp) is None or time.monotonic() > deadline:
            break
        _run_quiet(cmd, timeout=max(0.5, deadline - time.monotonic()))
    if mount_fstype(mp) is not None:
        raise RuntimeError(f"could not unmount {mp}")


# Every slow filesystem this process started, so that a test can assert none is left behind.
STARTED: list[SlowFs] = []


def leftovers() -> list[str]:
    """Slow filesystems this process started that are still mounted or running."""
    left = []
    for fs in STARTED:
        if mount_fstype(fs.mountpoint) is not None:
            left.append(f"mount {fs.mountpoint}")
        if fs.proc.poll() is None:
            left.append(f"slowfs process {fs.proc.pid}")
    return left


class SlowFs:
    """Handle of a running slow filesystem, yielded by :func:`slow_fs`."""

    def __init__(
        self,
        backing: Path,
        mountpoint: Path,
        proc: subprocess.Popen[bytes],
        control_file: Path,
        log_file: Path,
    ) -> None:
        self.backing = backing
        self.mountpoint = mountpoint
        self.proc = proc
        self.control_file = control_file
        self.log_file = log_file
        #: How many releases were asked for: the control file's count.
        self.releases = 0

    def set_delays(
        self,
        fsync_delay_ms: float,
        write_delay_ms: float = 0.0,
        settle_s: float = 0.3,
        fail_errno: int = 0,
        unlink_delay_ms: float = 0.0,
        release: bool = False,
    ) -> None:
        """Change the delays of the running filesystem (applied within ~50 ms); with
        `fail_errno`, every write and fsync fails with that errno instead; `unlink_delay_ms`
        delays every unlink and rmdir. `release`: the requests held now are answered at once
        (a hung disk that answers again); without it each finishes the delay it started with.

        Written to a temporary file and renamed, so the watcher never reads half a line;
        then waits ``settle_s`` so the change is in effect when this returns.
        """
        self.releases += release
        tmp = self.control_file.with_suffix(".tmp")
        tmp.write_text(
            f"{fsync_delay_ms} {write_delay_ms} {fail_errno} {unlink_delay_ms} {self.releases}\n"
        )
        os.replace(tmp, self.control_file)
        time.sleep(settle_s)

    def log(self) -> str:
        """The filesystem process's output so far (for failure messages)."""
        try:
            return self.log_file.read_text(errors="replace")
        except OSError:
            return ""


@contextlib.contextmanager
def slow_fs(
    backing: str | os.PathLike[str],
    mountpoint: str | os.PathLike[str],
    fsync_delay_ms: float,
    write_delay_ms: float = 0.0,
    mount_timeout_s: float = 10.0,
) -> Iterator[SlowFs]:
    """Mount a slow passthrough of ``backing`` on ``mountpoint`` for the ``with`` body.

    Starts ``slowfs.py`` with the venv's interpreter, waits (bounded) until the mount is
    visible, yields a :class:`SlowFs`, and on the way out - also when the body raises -
    terminates that process by PID (SIGTERM, then SIGKILL) and makes sure no mount is left.
    Both directories must exist; ``mountpoint`` should be empty.
    """
    backing_p = Path(backing).resolve()
    mount_p = Path(mountpoint).resolve()
    if not backing_p.is_dir() or not mount_p.is_dir():
        raise FileNotFoundError(f"backing {backing_p} and mountpoint {mount_p} must be dirs")
    if mount_fstype(mount_p) is not None:
        raise RuntimeError(f"{mount_p} is already a mount point")
    workdir = Path(tempfile.mkdtemp(prefix="slowfs-ctl-"))
    control = workdir / "delays"
    control.write_text(f"{fsync_delay_ms} {write_delay_ms}\n")
    log_path = workdir / "slowfs.log"
    cmd = [
        sys.executable,
        "-u",
        "-m",
        "fioprobe.demo.slowdisk",
        "--backing",
        str(backing_p),
        "--mountpoint",
        str(mount_p),
        "--fsync-delay-ms",
        str(fsync_delay_ms),
        "--write-delay-ms",
        str(write_delay_ms),
        "--control-file",
        str(control),
    ]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    handle = SlowFs(backing_p, mount_p, proc, control, log_path)
    STARTED.append(handle)
    try:
        deadline = time.monotonic() + mount_timeout_s
        while mount_fstype(mount_p) is None:
            if proc.poll() is not None:
                raise RuntimeError(f"slowfs exited with {proc.returncode}: {handle.log()}")
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"slowfs did not mount within {mount_timeout_s}s: {handle.log()}"
                )
            time.sleep(0.02)
        yield handle
    finally:
        _stop(proc, mount_p)
        for p in (control, control.with_suffix(".tmp"), log_path):
            with contextlib.suppress(OSError):
                p.unlink()
        with contextlib.suppress(OSError):
            workdir.rmdir()


def _stop(proc: subprocess.Popen[bytes], mountpoint: Path) -> None:
    """Terminate the filesystem process by PID, then guarantee the mount is gone."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            # Usually a process still has files open on the mount; unmounting lazily lets
            # libfuse's loop end, and SIGKILL is the last resort.
            force_unmount(mountpoint)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
    force_unmount(mountpoint)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (used by :func:`slow_fs` and by hand)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backing", required=True, help="directory whose content is mirrored")
    ap.add_argument("--mountpoint", required=True, help="empty directory to mount on")
    ap.add_argument("--fsync-delay-ms", type=float, required=True)
    ap.add_argument("--write-delay-ms", type=float, default=0.0)
    ap.add_argument(
        "--control-file",
        help='file holding "FSYNC_MS [WRITE_MS [FAIL_ERRNO [UNLINK_MS [RELEASES]]]]"; its '
        "changes apply while mounted, and a new RELEASES count answers every held request",
    )
    args = ap.parse_args(argv)
    serve(
        args.backing,
        args.mountpoint,
        args.fsync_delay_ms,
        args.write_delay_ms,
        args.control_file,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
