"""The marker a run leaves when it had to abandon a child stuck in the kernel on its volume.

A child in uninterruptible sleep cannot be ended; it holds the probe directory's lock and
its files until the disk answers. The next run must not start another child behind it (a
second process stuck in the same place, and another after it at every schedule). So the
run that abandons a child writes down which process it was, and the next run looks first:
- that process is still there: the next run starts nothing on the volume, pushes `timeout`
  again and says the previous run is still stuck;
- it is gone (the disk answered; SIGKILL, pending all along, then ended it): the marker is
  removed and the run goes on; its worker removes the run directory the abandoned child
  left, as it removes any leftover run directory.
A process is named by its pid and its start time (a pid alone may have been reused). A
process of another pod (another pid namespace) is not visible: the marker then only says
that a run was left behind, and a directory whose lock is still held (`busy`) is that run.

Where the marker lives: in the probe's own state directory when that is not on the probed
volume, else in the per-user state directory ($FIOPROBE_STATE_DIR, default
~/.local/state/fioprobe). Never on the probed volume: a marker there could be neither
written nor read while the volume hangs, which is exactly when it is needed.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from fioprobe.processes import start_ticks
from fioprobe.publish.statefile import StateDir, StateError, StateFile, default_state_dir, file_name


@dataclass(frozen=True, slots=True)
class Stuck:
    """A child that a run left behind."""

    pid: int
    #: The process's start time in clock ticks since boot (/proc/<pid>/stat, field 22).
    start_ticks: int | None
    abandoned_at: float
    #: What it was doing when it was abandoned.
    phase: str

    def still_there(self) -> bool:
        """Whether that same process still exists (and has not exited: a zombie is gone).
        When /proc cannot be read it may: nothing is started behind it this time."""
        try:
            found = start_ticks(self.pid)
        except OSError:
            return True
        return found is not None and found == self.start_ticks

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.abandoned_at))
        return f"pid {self.pid}, left behind at {when} while {self.phase}"


@dataclass(frozen=True, slots=True)
class Marker:
    """The marker file of one probe directory."""

    file: StateFile

    @classmethod
    def for_directory(
        cls, probe_directory: Path, state_directory: Path | None, *, prefix: str = "stuck-"
    ) -> Marker:
        """`state_directory`: the probe's own state directory when it is off the volume.
        `prefix`: whose marker (the continuous stream's writer has one of its own)."""
        if state_directory is None:
            state_directory = default_state_dir().path
        name = file_name({"directory": os.path.abspath(probe_directory)}, prefix=prefix)
        return cls(StateDir(Path(state_directory), create_parents=True).file(name))

    @property
    def path(self) -> Path:
        return self.file.path

    def read(self) -> Stuck | None:
        """The recorded child, or None (no marker, or one that is not fioprobe's)."""
        data = self.file.read()
        if not isinstance(data, dict):
            return None
        pid, ticks = data.get("pid"), data.get("start_ticks")
        at, phase = data.get("abandoned_at"), data.get("phase")
        if type(pid) is not int or pid < 2 or not isinstance(at, int | float):
            return None
        if not 0 <= at < 2**34:  # a time a calendar can show (also NaN, infinities)
            return None
        return Stuck(pid, ticks if type(ticks) is int else None, float(at), str(phase)[:200])

    def record(self, pid: int, phase: str) -> Stuck:
        try:
            ticks = start_ticks(pid)
        except OSError:  # /proc unreadable now: recorded without its start time
            ticks = None
        stuck = Stuck(pid, ticks, time.time(), phase)
        self.file.write(
            {
                "pid": stuck.pid,
                "start_ticks": stuck.start_ticks,
                "abandoned_at": stuck.abandoned_at,
                "phase": stuck.phase,
            }
        )
        return stuck

    def clear(self) -> None:
        self.file.remove()


__all__ = ["Marker", "StateError", "Stuck"]
