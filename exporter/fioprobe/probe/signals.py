"""How fioprobe stops on SIGTERM, SIGINT or SIGHUP: a probe run at once while fio runs, only
after its outcome was published while that is under way; a loop of runs at once between them
(see `Signals`)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

from fioprobe.errors import Interrupted

#: The signals that stop a probe: the CronJob's SIGTERM, Ctrl-C, a closed terminal.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Signals:
    """SIGTERM/SIGINT/SIGHUP handling for one probe, or for a loop of runs between them.

    While fio runs, a signal raises `Interrupted` at once (fio is then killed and its files
    removed). While the outcome is being published, a signal is only noted: stopping half
    way would push nothing and then claim a failure was pushed; the publish is bounded by
    the Pushgateway deadline, and `Interrupted` is raised right after it. A loop's handler
    raises at once too, saying `stopped_at_once` (what was going on: no run), except where
    it defers (a write it must not cut in half).
    """

    def __init__(self, stopped_at_once: str = "fio stopped, its files removed") -> None:
        self.deferring = False
        self.received: int | None = None
        #: What was done when a signal ends the command at once.
        self.stopped_at_once = stopped_at_once

    def handler(self, signum: int, _frame: object) -> None:
        if self.received is not None:
            return  # a second signal must not interrupt the cleanup the first one started
        self.received = signum
        if not self.deferring:
            raise Interrupted(signum, signal.Signals(signum).name, self.stopped_at_once)

    @contextmanager
    def installed(self) -> Iterator[None]:
        previous = {sig: signal.signal(sig, self.handler) for sig in STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)

    @contextmanager
    def deferred(self) -> Iterator[None]:
        self.deferring = True
        try:
            yield
        finally:
            self.deferring = False

    def raise_if_received(self, what_happened: str) -> None:
        if self.received is not None:
            name = signal.Signals(self.received).name
            raise Interrupted(self.received, name, what_happened)
