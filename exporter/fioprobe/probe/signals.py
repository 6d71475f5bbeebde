"""How a probe run stops on SIGTERM, SIGINT or SIGHUP: at once while fio runs, only after
its outcome was published while that is under way (see `Signals`)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

from fioprobe.errors import Interrupted

#: The signals that stop a probe: the CronJob's SIGTERM, Ctrl-C, a closed terminal.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Signals:
    """SIGTERM/SIGINT/SIGHUP handling for one probe.

    While fio runs, a signal raises `Interrupted` at once (fio is then killed and its files
    removed). While the outcome is being published, a signal is only noted: stopping half
    way would push nothing and then claim a failure was pushed; the publish is bounded by
    the Pushgateway deadline, and `Interrupted` is raised right after it.
    """

    def __init__(self) -> None:
        self.deferring = False
        self.received: int | None = None
        #: What was done when a signal ends the command at once (see `interruptible`).
        self.stopped_at_once = "fio stopped, its files removed"

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

    @contextmanager
    def interruptible(self, what_happened: str) -> Iterator[None]:
        """Within `deferred()`, a stretch that a signal cuts short at once (a loop's sleep
        between runs); a signal noted before it ends the command on entering it."""
        self.raise_if_received(what_happened)
        self.deferring, self.stopped_at_once = False, what_happened
        try:
            yield
        finally:
            self.deferring = True

    def raise_if_received(self, what_happened: str) -> None:
        if self.received is not None:
            name = signal.Signals(self.received).name
            raise Interrupted(self.received, name, what_happened)
