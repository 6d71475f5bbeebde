"""A progress bar on a terminal, and nothing at all anywhere else.

Long inputs (thousands of result files, big archives) take a while; a person at a terminal
wants to see it move. A pipe, a log file or CI gets no carriage returns and no bar.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """`step(name)` once per file; `close()` at the end. Draws at most ~10 times a second."""

    def __init__(self, total: int | None, label: str, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _isatty(self.stream)
        self.total = total
        self.label = label
        self.done = 0
        self._drawn_at = 0.0
        self._width = 0

    def step(self, name: str = "") -> None:
        self.done += 1
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._drawn_at < 0.1 and self.done != self.total:
            return
        self._drawn_at = now
        if self.total:
            fraction = min(1.0, self.done / self.total)
            filled = int(fraction * 30)
            bar = "#" * filled + "-" * (30 - filled)
            line = f"{self.label} [{bar}] {self.done}/{self.total}"
        else:
            line = f"{self.label} {self.done} files"
        tail = f" {name[-40:]}" if name else ""
        self._write(line + tail)

    def close(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()

    def _write(self, line: str) -> None:
        pad = max(0, self._width - len(line))
        self.stream.write("\r" + line + " " * pad)
        self.stream.flush()
        self._width = len(line)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
