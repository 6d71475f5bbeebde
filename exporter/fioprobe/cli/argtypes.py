"""Bounded argparse types: every numeric option of every subcommand is one of these.

A number on the command line is checked where it is parsed, against a range that keeps the
command sensible whatever is passed: a value below the range would make a loop spin (`run
--every 0.01` runs fio back to back), a value above it would overflow or wait forever (`run
--every 1e300`), and NaN or infinity compare false with every bound. A refused value is one
line through argparse (`fioprobe: error: run: argument --every: ...`), exit 2, before
anything runs. The bounds of each option live beside the option (the command's module,
cli/options.py for the shared ones); the types, and so the messages,
are these.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from fioprobe.target.quantity import quantity_bytes


def number(low: float, high: float, unit: str) -> Callable[[str], float]:
    """A finite number from `low` to `high` (inclusive), in `unit` (seconds, milliseconds)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number of {unit}: {text[:64]!r}") from None
        if not (math.isfinite(value) and low <= value <= high):
            raise argparse.ArgumentTypeError(
                f"must be from {low:g} to {high:g} {unit}: {text[:64]!r}"
            )
        return value

    return parse


def seconds(low: float, high: float) -> Callable[[str], float]:
    """A finite number of seconds from `low` to `high`."""
    return number(low, high, "seconds")


def whole(low: int, high: int) -> Callable[[str], int]:
    """A whole number from `low` to `high` (decimal digits only: no 1e3, no 2.0)."""

    def parse(text: str) -> int:
        stripped = text.strip()
        digits = stripped.removeprefix("-")
        if not digits.isascii() or not digits.isdigit() or len(digits) > 18:
            raise argparse.ArgumentTypeError(f"not a whole number: {text[:64]!r}")
        value = int(stripped)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"must be a whole number from {low} to {high}: {text[:64]!r}"
            )
        return value

    return parse


def size_bytes(low: int, high: int) -> Callable[[str], int]:
    """A whole number of bytes from `low` to `high`: a number or a quantity like 4Mi."""

    def parse(text: str) -> int:
        value = quantity_bytes(text)
        if value is None:
            raise argparse.ArgumentTypeError(
                f"not a size in bytes (a number, or a quantity like 4Mi): {text[:64]!r}"
            )
        if not (low <= value <= high and value == int(value)):
            raise argparse.ArgumentTypeError(
                f"must be a whole number of bytes from {low} to {high}: {text[:64]!r}"
            )
        return int(value)

    return parse
