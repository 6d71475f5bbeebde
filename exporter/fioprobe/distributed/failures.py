"""What a failed benchmark names: the servers it failed on, and its reason.

With tens of servers, "fio's client did not finish" says nothing about which node to look
at. A failure found in fio's output (a server missing from it, a job error, a budget
overrun, a prepare cut short) names its servers where it is raised. A phase that fio's client
did not finish, or that fio's client gave up on, is named after the fact: once fio's client
is stopped, the servers that do not answer fio's probe (`liveness.py`) are the ones to look
at, and they are added to whatever failure ended the benchmark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from fioprobe.errors import FailureReason, FioprobeError, Interrupted, ProbeFailure

if TYPE_CHECKING:  # the two modules raise these failures: types only, no import cycle
    from fioprobe.distributed.liveness import NoAnswer
    from fioprobe.distributed.servers import Server

#: The reasons a server that lets the time run out can be behind: fio's client waiting on it
#: until stopped, giving up on it (no result), or writing nothing readable.
_CAUSED_BY_SILENCE = (FailureReason.TIMEOUT, FailureReason.FIO_ERROR, FailureReason.PARSE_ERROR)


class ServersFailed(ProbeFailure):
    """A benchmark's failure with the servers it names, by their `server` label."""

    def __init__(self, reason: FailureReason, message: str, servers: Sequence[str] = ()) -> None:
        super().__init__(reason, message)
        self.servers = tuple(servers)


class PhaseTimedOut(ServersFailed):
    """fio's client did not finish a phase within its deadline and was stopped; which
    server held it up, fio's client does not say."""


def named(
    error: FioprobeError, servers: Sequence[Server], answers: Mapping[Server, NoAnswer]
) -> FioprobeError:
    """The error that ends a failed benchmark, naming the servers that do not answer.

    An interruption is the caller's doing, not a server's: it is kept as it is (the
    clean-up line still names a server that did not answer).
    """
    if isinstance(error, Interrupted):
        return error
    silent = [server for server in servers if server in answers]
    own = error.servers if isinstance(error, ServersFailed) else ()
    if not silent:
        if isinstance(error, PhaseTimedOut):
            return PhaseTimedOut(
                error.reason,
                f"{error}; every server answers fio's probe: a job ran past the deadline on "
                "one of them (a slow or hung disk?)",
            )
        return error
    reason = error.reason
    if reason in _CAUSED_BY_SILENCE and any(answers[s].timed_out for s in silent):
        reason = FailureReason.TIMEOUT
    labels = [*own, *(s.label for s in silent if s.label not in own)]
    which = ", ".join(f"{s.name} ({answers[s].why})" for s in silent)
    return ServersFailed(reason, f"{error}; no answer from {which}", labels)


def failed_servers(error: FioprobeError | None) -> tuple[str, ...]:
    """The `server` labels a failure names (none for a failure that is no server's)."""
    return error.servers if isinstance(error, ServersFailed) else ()
