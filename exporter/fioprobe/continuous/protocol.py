"""The lines a writer child sends its parent, one event per line, on the child's stdout.

Times are CLOCK_MONOTONIC nanoseconds (`time.monotonic_ns()`), one clock for every process
of the machine, so the parent can tell the age of an operation that began in a child and
has not ended. Plain text: the child stays small (no imports beyond the standard library's
smallest modules), and a line is easy to read in a test.

    B <t_ns>                              an operation (write + fdatasync) began
    E <t_ns> <sync_ns> <bytes>            it ended: its fdatasync took sync_ns
    F <t_ns> <reason> <message>           it (or the set-up) failed for reason
    C <t_ns>                              the clean-up after a failure (closing and removing
                                          the file: IO too, begun with a B) ended
    D <major> <minor>                     the device of the filesystem the file is on
    R <bytes> <path>                      ready: the file is preallocated, writing starts
    S <1|0>                               the target directory is (1) or is not (0) on
                                          etcd's filesystem (targets with etcd_data_dir)
"""

from __future__ import annotations

from dataclasses import dataclass

BEGIN, END, FAIL, CLEANED, DEVICE, READY, ETCD_FILESYSTEM = "B", "E", "F", "C", "D", "R", "S"


@dataclass(frozen=True, slots=True)
class Event:
    kind: str
    t_ns: int = 0
    sync_ns: int = 0
    size: int = 0
    reason: str = ""
    message: str = ""
    major: int = 0
    minor: int = 0
    #: ETCD_FILESYSTEM: whether the target directory is on etcd's filesystem.
    same: bool = False


def begin(t_ns: int) -> str:
    return f"{BEGIN} {t_ns}\n"


def end(t_ns: int, sync_ns: int, size: int) -> str:
    return f"{END} {t_ns} {sync_ns} {size}\n"


def fail(t_ns: int, reason: str, message: str) -> str:
    # One line whatever the message holds: an errno text never has a newline, a path might.
    text = " ".join(message.split())
    return f"{FAIL} {t_ns} {reason} {text}\n"


def cleaned(t_ns: int) -> str:
    return f"{CLEANED} {t_ns}\n"


def device(major: int, minor: int) -> str:
    return f"{DEVICE} {major} {minor}\n"


def ready(size: int, path: str) -> str:
    return f"{READY} {size} {' '.join(path.split())}\n"


def etcd_filesystem(same: bool) -> str:
    return f"{ETCD_FILESYSTEM} {int(same)}\n"


def parse(line: str) -> Event | None:
    """The event of one line, or None for a line that is not one (never raises)."""
    parts = line.rstrip("\n").split(" ", 3)
    try:
        kind = parts[0]
        if kind == BEGIN and len(parts) == 2:
            return Event(BEGIN, t_ns=int(parts[1]))
        if kind == CLEANED and len(parts) == 2:
            return Event(CLEANED, t_ns=int(parts[1]))
        if kind == END and len(parts) == 4:
            return Event(END, t_ns=int(parts[1]), sync_ns=int(parts[2]), size=int(parts[3]))
        if kind == FAIL and len(parts) >= 3:
            message = parts[3] if len(parts) == 4 else ""
            return Event(FAIL, t_ns=int(parts[1]), reason=parts[2], message=message)
        if kind == DEVICE and len(parts) == 3:
            return Event(DEVICE, major=int(parts[1]), minor=int(parts[2]))
        if kind == ETCD_FILESYSTEM and len(parts) == 2 and parts[1] in ("0", "1"):
            return Event(ETCD_FILESYSTEM, same=parts[1] == "1")
        if kind == READY and len(parts) >= 2:
            path = " ".join(parts[2:]) if len(parts) > 2 else ""
            return Event(READY, size=int(parts[1]), message=path)
    except ValueError:
        return None
    return None
