"""Untrusted text made safe to print: one line, printable, bounded.

Strings that come from outside (a Pushgateway's answers and label values, file and archive
member names an operator's tar holds) reach log lines and the terminal. A newline would forge
a line of its own and an escape sequence would rewrite the operator's terminal.
"""

from __future__ import annotations


def printable(text: str, limit: int = 200) -> str:
    """`text` as one line of printable characters, at most `limit` long.

    Runs of whitespace become one space; any other character that is not printable is
    written as its escape (ESC as \\x1b), so what was planted stays visible, inert.
    """
    # Bounded work for any length: more than this cannot be shown (collapsed whitespace aside).
    text = text[: 10 * limit + 16]
    text = "".join(
        ch if ch.isprintable() or ch.isspace() else ch.encode("unicode_escape").decode("ascii")
        for ch in text
    )
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
