"""A failed benchmark named after the servers that do not answer fio's probe.

Once fio's client is stopped, the servers that do not answer (`liveness.py`) are the ones to
look at: they are added to whatever failure ended the benchmark (`failures.py`). Its own
module, above the servers and their liveness, so the failures themselves need neither.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fioprobe.distributed.failures import PhaseTimedOut, ServersFailed
from fioprobe.distributed.liveness import NoAnswer
from fioprobe.distributed.servers import Server
from fioprobe.errors import FailureReason, FioprobeError, Interrupted

#: The reasons a server that lets the time run out can be behind: fio's client waiting on it
#: until stopped, giving up on it (no result), or writing nothing readable.
_CAUSED_BY_SILENCE = (FailureReason.TIMEOUT, FailureReason.FIO_ERROR, FailureReason.PARSE_ERROR)


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
