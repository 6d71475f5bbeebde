"""What /proc says of one process: whether it is still there, and since when.

A PID alone names a process only while it lives: a zombie has exited (its parent has not
reaped it yet) and counts as gone, and a PID can be reused, which its start time tells.

A stat that is not there, or is refused, counts as gone too: the PIDs asked about were
recorded while they were this user's own processes in this PID namespace (a volume or
publish worker left stuck, a stream's writer, a writer of a state temporary), and /proc shows
a user's own processes whatever its `hidepid` says, while another user's are refused
(`hidepid=1`: EPERM) or hidden (`hidepid=2`: ENOENT). A process of another PID namespace is
not visible at all (docs/FAULTS.md says what that means for the markers). Any other failure
to read /proc (no file descriptor or memory left) says nothing about the process: it is
raised, and each caller takes the side that keeps a live process's files and never starts a
second process behind a stuck one.
"""

from __future__ import annotations

#: The process states of /proc/<pid>/stat that mean it has exited.
_EXITED = (b"Z", b"X")


#: What reading /proc/<pid>/stat raises when there is no such process of this user's.
_GONE = (FileNotFoundError, ProcessLookupError, PermissionError)


def stat_fields(pid: int) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat after the command name (state first), or None when
    there is no such process (or it is another user's). Raises OSError when /proc could not
    be read at all."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            line = handle.read(4096)
    except _GONE:
        return None
    # The command name is in parentheses and may itself hold ") ".
    return line[line.rfind(b")") + 2 :].split()


def alive(pid: int) -> bool:
    """Whether process `pid` exists and has not exited; True when /proc cannot tell (the
    callers then keep that process's files)."""
    try:
        fields = stat_fields(pid)
    except OSError:
        return True
    return fields is not None and len(fields) > 0 and fields[0] not in _EXITED


def start_ticks(pid: int) -> int | None:
    """The start time of a live process in clock ticks since boot (field 22), None if there
    is none (or only a zombie). Raises OSError when /proc could not be read at all."""
    fields = stat_fields(pid)
    if fields is None or len(fields) < 20 or fields[0] in _EXITED:
        return None
    try:
        return int(fields[19])
    except ValueError:
        return None
