"""The one error of reading fio output, shared by the reader (`parse`) and its strict second
reading of client/server output (`repeats`)."""

from __future__ import annotations

from fioprobe.errors import ExitCode, FailureReason, FioprobeError


class FioOutputError(FioprobeError, ValueError):
    """fio output that cannot be turned into a trustworthy result (exit 3, parse_error).

    The message is one line: "<source>: <what is wrong>".
    """

    exit_code = ExitCode.BAD_INPUT
    reason = FailureReason.PARSE_ERROR

    def __init__(self, source: str, problem: str) -> None:
        super().__init__(f"{source}: {problem}")
        self.source = source
        self.problem = problem
