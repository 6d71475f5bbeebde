"""The one error type of fioprobe, its exit codes, and the closed set of failure reasons.

Every error fioprobe raises on purpose is a `FioprobeError`: it carries the exit status the
command line ends with and a one-line message for a person. The CLI catches this one base
class; anything else is a bug and still shows its traceback.

A probe run that fails does not end the process: it becomes a pushed outcome
(`fioprobe_success 0` with `fioprobe_failure_reason_info{reason}`), and `reason` is always a
member of `FailureReason`. The set is closed so that alerts, dashboards and runbooks can list
every value; docs/runbooks.md and the tests are checked against it.
"""

from __future__ import annotations

import enum
import errno


class ExitCode(enum.IntEnum):
    """Exit status of every fioprobe command (documented in `fioprobe --help`)."""

    OK = 0
    #: The probe ran and failed; the failure was pushed.
    PROBE_FAILED = 1
    #: Usage, configuration, profile or state error.
    USAGE = 2
    #: The fio output could not be read; nothing was pushed.
    BAD_INPUT = 3
    #: The Pushgateway could not be reached or refused; the run is kept for the next push.
    PUSH_FAILED = 4
    #: 128 + signal number is added by the signal handling, not listed here.


class FailureReason(enum.StrEnum):
    """Why a probe run failed: the `reason` label of fioprobe_failure_reason_info."""

    #: The probe directory (or its filesystem) is mounted read-only.
    READ_ONLY = "read_only"
    #: Not enough free space before the run, or the disk filled during it.
    NO_SPACE = "no_space"
    #: The disk answered an IO with an error (EIO and its kin).
    IO_ERROR = "io_error"
    #: The probe directory does not exist (an unmounted volume, a typo in the configuration).
    NO_DIRECTORY = "no_directory"
    #: The cumulative state cannot be read or written (permissions, a file in the way).
    STATE_ERROR = "state_error"
    #: fio did not finish within the wall-clock limit.
    TIMEOUT = "timeout"
    #: SIGTERM, SIGINT or SIGHUP arrived during the run.
    INTERRUPTED = "interrupted"
    #: fio exited non-zero or a job reported an error not covered above.
    FIO_ERROR = "fio_error"
    #: fio's own byte counts exceed the profile's declared IO budget.
    BUDGET_EXCEEDED = "budget_exceeded"
    #: The directory or profile broke a safety rule (symlink, device, forbidden option).
    UNSAFE_TARGET = "unsafe_target"
    #: fio's output could not be read as a whole.
    PARSE_ERROR = "parse_error"
    #: Another run holds the probe directory's lock (that run pushes its own result).
    BUSY = "busy"
    #: fio is not installed or too old.
    FIO_MISSING = "fio_missing"
    #: Another writer owns this group's counters; this run was not counted (see state.py).
    WRITER_CONFLICT = "writer_conflict"

    @property
    def pushed(self) -> bool:
        """Whether a run that ends with this reason pushes it: every reason does but `busy`,
        whose directory is held by another run that pushes its own outcome. The pushed ones
        are what fioprobe_failure_reason_info{reason} can hold (and what the runbooks list)."""
        return self is not FailureReason.BUSY


#: errno values and the failure reason each one means for a probe.
ERRNO_REASONS: dict[int, FailureReason] = {
    errno.EROFS: FailureReason.READ_ONLY,
    errno.ENOSPC: FailureReason.NO_SPACE,
    errno.EDQUOT: FailureReason.NO_SPACE,
    errno.EIO: FailureReason.IO_ERROR,
    errno.ENXIO: FailureReason.IO_ERROR,
    errno.ENODEV: FailureReason.IO_ERROR,
    errno.EUCLEAN: FailureReason.IO_ERROR,
    errno.ENOTCONN: FailureReason.IO_ERROR,  # a FUSE daemon or network volume that went away
    errno.ESTALE: FailureReason.IO_ERROR,
    errno.ENOENT: FailureReason.NO_DIRECTORY,
    errno.ELOOP: FailureReason.UNSAFE_TARGET,
}


def reason_for_errno(number: int | None, default: FailureReason) -> FailureReason:
    """The failure reason of an OSError's errno, or `default` for the ones not listed."""
    return ERRNO_REASONS.get(number or 0, default)


class FioprobeError(Exception):
    """Base of every error fioprobe reports: a one-line message and an exit status."""

    #: An ExitCode, or 128 + the signal number for an interruption.
    exit_code: int = ExitCode.USAGE
    #: The failure reason a probe run reports when this error ends it.
    reason: FailureReason = FailureReason.FIO_ERROR

    def __init__(self, message: str) -> None:
        super().__init__(message)


class UsageError(FioprobeError):
    """A bad argument, configuration or profile: nothing was run or pushed."""

    exit_code = ExitCode.USAGE
    reason = FailureReason.UNSAFE_TARGET


class ProbeFailure(FioprobeError):
    """One probe run failed for `reason`; the runner pushes it and goes on."""

    exit_code = ExitCode.PROBE_FAILED

    def __init__(self, reason: FailureReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class Interrupted(FioprobeError):
    """SIGTERM, SIGINT or SIGHUP arrived; cleanup runs, then the process exits 128+signal."""

    reason = FailureReason.INTERRUPTED

    def __init__(
        self, signum: int, name: str, what_happened: str = "fio stopped, its files removed"
    ) -> None:
        super().__init__(name)
        self.signum = signum
        #: What was done before the command ends, for the one line it prints.
        self.what_happened = what_happened
        self.exit_code = 128 + signum
