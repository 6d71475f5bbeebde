"""The writer child: etcd's WAL pattern on one target, reported line by line to the parent.

Runs as its own process (`python -I -c ... writer.main`), started by `stream`, so that a
write stuck in the kernel holds only this process. It imports only the standard library,
`fioprobe.errors` and `fioprobe.target.etcd_filesystem` (standard library only too), so each
target costs one small interpreter.

What it does, and the safety rules it keeps (docs/CONTINUOUS.md, "Safety"):
1. Opens the target directory without following a symlink (a symlink is `unsafe_target`, a
   missing directory `no_directory`); fioprobe never creates that directory. A target with
   etcd's data directory (`--etcd-data-dir`) must be on its filesystem, or it is refused
   (`unsafe_target`) before anything is written, and the parent hears the verdict either
   way (`S` line), so the stream claims no etcd disk for a target that is not on it. The
   data directory's stat is IO on the probed disk too: it is done here, where a hang holds
   only this process.
2. Makes its own subdirectory `.fioprobe-continuous` (0700) in it, or reuses one that is a
   real directory owned by this user and writable by no one else; anything else there is
   not its own and is refused.
3. Removes the files of writers whose process is gone (`wal-<pid>`, nothing else, never
   recursing), checks free space, creates its file with O_EXCL|O_NOFOLLOW and preallocates
   it, so the writes that follow never grow the file (as etcd preallocates its WAL segments).
4. Every interval: a write at the next offset, then fdatasync; at the end of the file it
   wraps to the start, so the bytes on disk stay one file.
5. SIGTERM/SIGINT: removes its file (and the subdirectory when empty) and exits 0. A
   failure is reported and retried after a backoff; the process itself never dies of one.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import re
import signal
import stat
import sys
import time
from collections.abc import Sequence
from typing import TextIO

from fioprobe.continuous import protocol
from fioprobe.errors import FailureReason, ProbeFailure, reason_for_errno
from fioprobe.processes import alive
from fioprobe.target.etcd_filesystem import NotEtcdsFilesystem
from fioprobe.target.etcd_filesystem import check as check_etcd_filesystem

SUBDIR = ".fioprobe-continuous"
_FILE = re.compile(r"wal-(\d{1,10})")
#: Space kept free beyond the file, as for the probes: the stream never fills a disk.
FREE_SPACE_MARGIN_BYTES = 8 * 1024 * 1024
#: Entries of the subdirectory looked at when removing what dead writers left: a bound, so a
#: directory filled by someone else costs nothing.
MAX_ENTRIES_SCANNED = 256
#: Longest wait before retrying after a failure.
MAX_BACKOFF_SECONDS = 10.0


class _Stop(Exception):
    """SIGTERM/SIGINT: leave the loop, clean up, exit."""


class Writer:
    def __init__(self, directory: str, interval: float, write_size: int, file_size: int,
                 out: TextIO, etcd_data_dir: str | None = None) -> None:  # fmt: skip
        self.directory = directory
        self.etcd_data_dir = etcd_data_dir
        self.interval = interval
        self.write_size = write_size
        self.file_size = file_size
        self.out = out
        self.payload = os.urandom(write_size)
        self.dir_fd: int | None = None
        self.sub_fd: int | None = None
        self.fd: int | None = None
        #: The subdirectory was checked to be this writer's own: only then is it removed.
        self.owns_subdir = False
        self.name = f"wal-{os.getpid()}"

    # --- reporting ------------------------------------------------------------------------

    def send(self, line: str) -> None:
        self.out.write(line)
        self.out.flush()

    def failed(self, reason: FailureReason, message: str) -> None:
        self.send(protocol.fail(time.monotonic_ns(), reason.value, message))

    # --- set-up ---------------------------------------------------------------------------

    def setup(self) -> None:
        # Setting up is IO on the volume too (mkdir, create, preallocate, fdatasync): a disk
        # that hangs here must show as an operation in flight, like one that hangs later.
        # READY or FAIL ends it.
        self.send(protocol.begin(time.monotonic_ns()))
        try:
            self.dir_fd = os.open(
                self.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            )
        except OSError as exc:
            raise _setup_error(self.directory, exc, FailureReason.NO_DIRECTORY) from None
        if self.etcd_data_dir is not None:
            self._check_etcd_filesystem(self.dir_fd, self.etcd_data_dir)
        try:
            os.mkdir(SUBDIR, 0o700, dir_fd=self.dir_fd)
        except FileExistsError:
            pass
        except OSError as exc:
            raise _setup_error(f"{self.directory}/{SUBDIR}", exc, FailureReason.IO_ERROR) from None
        where = f"{self.directory}/{SUBDIR}"
        try:
            self.sub_fd = os.open(
                SUBDIR,
                os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                dir_fd=self.dir_fd,
            )
        except OSError as exc:
            raise _setup_error(where, exc, FailureReason.UNSAFE_TARGET) from None
        info = os.fstat(self.sub_fd)
        if not _own_directory(info):
            raise ProbeFailure(
                FailureReason.UNSAFE_TARGET,
                f"{where}: not the stream's own directory (owner {info.st_uid}, mode "
                f"{stat.S_IMODE(info.st_mode):o}); refusing to write there",
            )
        self.owns_subdir = True
        self._remove_dead_writers_files()
        try:
            usage = os.fstatvfs(self.sub_fd)
        except OSError as exc:
            raise _setup_error(where, exc, FailureReason.IO_ERROR) from None
        free = usage.f_bavail * usage.f_frsize
        if free < self.file_size + FREE_SPACE_MARGIN_BYTES:
            raise ProbeFailure(
                FailureReason.NO_SPACE,
                f"{where}: {free} bytes free, the stream needs {self.file_size} plus "
                f"{FREE_SPACE_MARGIN_BYTES} kept free",
            )
        try:
            self.fd = os.open(
                self.name,
                os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
                dir_fd=self.sub_fd,
            )
        except OSError as exc:
            raise _setup_error(f"{where}/{self.name}", exc, FailureReason.IO_ERROR) from None
        try:
            _preallocate(self.fd, self.file_size)
            os.fdatasync(self.fd)
        except OSError as exc:
            raise _setup_error(f"{where}/{self.name}", exc, FailureReason.IO_ERROR) from None
        self.send(protocol.device(os.major(info.st_dev), os.minor(info.st_dev)))
        self.send(protocol.ready(self.file_size, f"{where}/{self.name}"))

    def _check_etcd_filesystem(self, dir_fd: int, data_dir: str) -> None:
        """Checked at every set-up, so a target refused once stays refused while it is not
        on etcd's filesystem, and one moved onto it is taken from its next set-up."""
        try:
            check_etcd_filesystem(self.directory, dir_fd, data_dir)
        except NotEtcdsFilesystem:
            self.send(protocol.etcd_filesystem(False))
            raise
        self.send(protocol.etcd_filesystem(True))

    def _remove_dead_writers_files(self) -> None:
        assert self.sub_fd is not None
        try:
            with os.scandir(self.sub_fd) as entries:
                for count, entry in enumerate(entries):
                    if count >= MAX_ENTRIES_SCANNED:
                        break
                    match = _FILE.fullmatch(entry.name)
                    if match is None or _alive(int(match.group(1))):
                        continue
                    # unlink never follows a symlink; a directory of that name stays.
                    with contextlib.suppress(OSError):
                        os.unlink(entry.name, dir_fd=self.sub_fd)
        except OSError as exc:
            where = f"{self.directory}/{SUBDIR}"
            raise _setup_error(where, exc, FailureReason.IO_ERROR) from None

    def release(self) -> None:
        """Close and remove what this writer made (its file; the subdirectory if empty)."""
        # Each descriptor is taken before it is closed, so a signal arriving in between
        # never leads to closing it twice (and the clean-up after it still runs).
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)
        if self.sub_fd is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.name, dir_fd=self.sub_fd)
            sub_fd, self.sub_fd = self.sub_fd, None
            os.close(sub_fd)
        if self.dir_fd is not None:
            if self.owns_subdir:
                # Fails while another stream's file is still there: that one removes it.
                with contextlib.suppress(OSError):
                    os.rmdir(SUBDIR, dir_fd=self.dir_fd)
                self.owns_subdir = False
            dir_fd, self.dir_fd = self.dir_fd, None
            os.close(dir_fd)

    # --- the stream -----------------------------------------------------------------------

    def run(self) -> None:
        backoff = self.interval
        while True:
            try:
                self.setup()
                backoff = self.interval
                self.write_forever()
            except ProbeFailure as exc:
                self.failed(exc.reason, str(exc))
            except OSError as exc:
                reason = reason_for_errno(exc.errno, FailureReason.IO_ERROR)
                self.failed(reason, f"{self.directory}/{SUBDIR}/{self.name}: {exc.strerror}")
            # Closing and removing the file is IO on the failing disk too: an operation in
            # flight while it lasts, so a disk that hangs right after an error shows.
            self.send(protocol.begin(time.monotonic_ns()))
            self.release()
            self.send(protocol.cleaned(time.monotonic_ns()))
            time.sleep(backoff)
            backoff = min(backoff * 2, max(MAX_BACKOFF_SECONDS, self.interval))

    def write_forever(self) -> None:
        assert self.fd is not None
        offset = 0
        due = time.monotonic()
        while True:
            self.send(protocol.begin(time.monotonic_ns()))
            os.pwrite(self.fd, self.payload, offset)
            started = time.monotonic_ns()
            os.fdatasync(self.fd)
            done = time.monotonic_ns()
            self.send(protocol.end(done, done - started, self.write_size))
            offset += self.write_size
            if offset + self.write_size > self.file_size:
                offset = 0
            # A fixed rate, but no burst of catch-up writes after a stall.
            due = max(due + self.interval, time.monotonic())
            time.sleep(max(0.0, due - time.monotonic()))


def _setup_error(where: str, exc: OSError, default: FailureReason) -> ProbeFailure:
    reason = reason_for_errno(exc.errno, default)
    text = exc.strerror or str(exc)
    if exc.errno == errno.ENOTDIR:
        # O_DIRECTORY|O_NOFOLLOW answers ENOTDIR for a symlink too: say which it is, the
        # fixes differ (a planted link is someone else's doing).
        what = "is not a directory"
        with contextlib.suppress(OSError):
            if stat.S_ISLNK(os.lstat(where).st_mode):
                what = "is a symlink"
        reason, text = FailureReason.UNSAFE_TARGET, f"{what}; refusing"
    elif exc.errno == errno.ELOOP:
        reason, text = FailureReason.UNSAFE_TARGET, "is a symlink; refusing"
    elif exc.errno == errno.EACCES:
        reason = FailureReason.IO_ERROR  # permission denied: its own words say it
    elif reason == FailureReason.NO_DIRECTORY:
        text += " (is the volume mounted?); fioprobe never creates the target directory"
    return ProbeFailure(reason, f"{where}: {text}")


def _own_directory(info: os.stat_result) -> bool:
    """Owned by this user and writable by no one else, except its own group: the kubelet
    makes a volume's files group-writable for the pod's fsGroup, which is one of this
    process's groups. World-writable, or another group's, is someone else's place. Never
    gid 0, whatever this process's groups: it is the primary group of every container that
    sets no runAsGroup (OpenShift's default), so group 0 is everyone's (as the probe's state
    files see it, `fioprobe.publish.statefile`)."""
    if info.st_uid != os.geteuid() or info.st_mode & 0o002:
        return False
    own_groups = {os.getegid(), *os.getgroups()} - {0}
    return not (info.st_mode & 0o020 and info.st_gid not in own_groups)


def _alive(pid: int) -> bool:
    """Whether the writer of `wal-<pid>` may still use its file. A zombie is gone (an
    abandoned writer's parent may have exited before it, leaving it to a reaper)."""
    if pid == os.getpid():
        return False  # a file of this pid is a previous process's, reused pid or not
    return alive(pid)


def _preallocate(fd: int, size: int) -> None:
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):  # no fallocate: write zeros
            raise
        chunk = bytes(min(size, 1 << 16))
        written = 0
        while written < size:
            written += os.pwrite(fd, chunk[: size - written], written)


def _stop(signum: int, frame: object) -> None:
    raise _Stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fioprobe-continuous-writer")
    parser.add_argument("--dir", required=True)
    parser.add_argument("--interval", type=float, required=True)
    parser.add_argument("--write-size", type=int, required=True)
    parser.add_argument("--file-size", type=int, required=True)
    parser.add_argument("--etcd-data-dir")
    args = parser.parse_args(argv)
    writer = Writer(args.dir, args.interval, args.write_size, args.file_size, sys.stdout,
                    args.etcd_data_dir)  # fmt: skip
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        writer.run()
    except _Stop:
        pass
    except BrokenPipeError:
        # The parent is gone: a stream nobody reads must not write on. Its stdout can take
        # nothing more, not even the interpreter's flush at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        writer.release()
    return 0
