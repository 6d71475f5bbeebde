"""What a failed benchmark names: the servers it failed on, and its reason.

With tens of servers, "fio's client did not finish" says nothing about which node to look
at. A failure found in fio's output (a server missing from it, a job error, a budget
overrun, a prepare cut short) names its servers where it is raised. A phase that fio's client
did not finish, or that fio's client gave up on, is named after the fact: once fio's client
is stopped, the servers that do not answer fio's probe (`liveness.py`) are the ones to look
at, and they are added to whatever failure ended the benchmark (`silence.py`).
"""

from __future__ import annotations

from collections.abc import Sequence

from fioprobe.errors import FailureReason, FioprobeError, ProbeFailure


class ServersFailed(ProbeFailure):
    """A benchmark's failure with the servers it names, by their `server` label."""

    def __init__(self, reason: FailureReason, message: str, servers: Sequence[str] = ()) -> None:
        super().__init__(reason, message)
        self.servers = tuple(servers)


class PhaseTimedOut(ServersFailed):
    """fio's client did not finish a phase within its deadline and was stopped; which
    server held it up, fio's client does not say."""


def failed_servers(error: FioprobeError | None) -> tuple[str, ...]:
    """The `server` labels a failure names (none for a failure that is no server's)."""
    return error.servers if isinstance(error, ServersFailed) else ()
