"""Numbers as the report's tables show them: milliseconds, counts, ratios."""

from __future__ import annotations

import re


def fmt_ms(seconds: float) -> str:
    """Milliseconds with 4 significant digits, never in exponent notation."""
    ms = seconds * 1e3
    if ms == 0:
        return "0"
    if abs(ms) >= 10000:
        return f"{ms:.0f}"
    if abs(ms) < 0.001:
        return f"{ms:.6f}".rstrip("0")
    return f"{ms:#.4g}".rstrip(".") if "e" not in f"{ms:.4g}" else f"{ms:.6f}"


def fmt_count(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def fmt_ratio(value: float) -> str:
    return f"×{value:.3f}"


def slug(text: str) -> str:
    """A file-name-safe form of a chart's name."""
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:60] or "x"
