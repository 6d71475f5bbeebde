"""What /proc says of one process: whether it is still there, and since when.

A PID alone names a process only while it lives: a zombie has exited (its parent has not
reaped it yet) and counts as gone, and a PID can be reused, which its start time tells.

A stat that cannot be read counts as gone too. Every PID asked about here is one of this
user's own processes (a fio child, a stream's writer, a writer of a state temporary): those
are readable to this user whatever /proc's `hidepid` says, while another user's process is
refused (`hidepid=1`: EPERM) or hidden (`hidepid=2`: ENOENT). So a PID that cannot be read
now is another user's, or none: the process asked about has exited, its PID maybe reused.
"""

from __future__ import annotations

#: The process states of /proc/<pid>/stat that mean it has exited.
_EXITED = (b"Z", b"X")


def stat_fields(pid: int) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat after the command name (state first), or None when
    there is no such process or it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            line = handle.read(4096)
    except OSError:
        return None
    # The command name is in parentheses and may itself hold ") ".
    return line[line.rfind(b")") + 2 :].split()


def alive(pid: int) -> bool:
    """Whether process `pid` exists and has not exited."""
    fields = stat_fields(pid)
    return fields is not None and len(fields) > 0 and fields[0] not in _EXITED


def start_ticks(pid: int) -> int | None:
    """The start time of a live process in clock ticks since boot (field 22), None if there
    is none (or only a zombie)."""
    fields = stat_fields(pid)
    if fields is None or len(fields) < 20 or fields[0] in _EXITED:
        return None
    try:
        return int(fields[19])
    except ValueError:
        return None
