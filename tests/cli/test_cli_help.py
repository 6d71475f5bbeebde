"""`fioprobe --help` and every `fioprobe COMMAND --help` say what the saved texts say.

Why: the help is the command line's documentation, and a change to how the parser is built
(where an option is declared, which module adds it) must not change what a user reads. The
saved texts are tests/data/cli-help/<command>.txt (`fioprobe.txt` for the top level), made
with `COLUMNS=100 python -m fioprobe [COMMAND] --help`; each is made again here the same way.

The comparison sets the order of the options aside, and nothing else:

- The usage line (all of its wrapped lines joined, whitespace collapsed) is split into its
  top-level elements (a bracketed or parenthesised element is one, nested brackets such as
  `[--listen [HOST]:PORT]` included). An element starting with `-` is a required option and
  takes the next bare element as its value (every required option of fioprobe has one). The
  program name, the positionals in their order and the sorted list of option elements are
  compared.
- The rest is cut into sections at each unindented line ending in `:` (the description
  before the first). In each section, an option entry (a line indented by two spaces that
  starts with `-`, with its continuation lines indented deeper) becomes one string with its
  whitespace collapsed; the set of those strings is compared per section. Every other line
  (descriptions, positionals, the command list, the exit statuses after the options) is
  compared as it is, in its order; blank lines are left out.

So an option moved within its group, or declared elsewhere, passes; an option added, lost,
moved to another group, or reworded, and any change of the commands, fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

import pytest
from conftest import REPO

SAVED = REPO / "tests" / "data" / "cli-help"
#: The top level first, then the commands in the order `fioprobe --help` lists them.
COMMANDS = [
    "fioprobe",
    "convert",
    "push",
    "probe",
    "run",
    "prepare-dirs",
    "continuous",
    "demo",
    "provision",
    "gc",
    "report",
    "backfill",
    "distributed",
]


@dataclass(frozen=True)
class Usage:
    prog: str
    positionals: tuple[str, ...]
    options: tuple[str, ...]


@dataclass(frozen=True)
class Section:
    heading: str
    lines: tuple[str, ...]
    options: frozenset[str]


def _elements(text: str) -> list[str]:
    """The top-level elements of a usage line: brackets and parentheses nest."""
    elements: list[str] = []
    current, depth = "", 0
    for char in text:
        if char == " " and depth == 0:
            if current:
                elements.append(current)
            current = ""
            continue
        depth += (char in "[(") - (char in "])")
        current += char
    if current:
        elements.append(current)
    return elements


def _usage(lines: list[str]) -> Usage:
    elements = _elements(" ".join(" ".join(lines).split()))
    assert elements[0] == "usage:", lines
    prog, rest = elements[1], elements[2:]
    if rest and not rest[0].startswith(("-", "[", "(")):
        prog, rest = f"{prog} {rest[0]}", rest[1:]  # `fioprobe push`
    positionals, options = [], []
    index = 0
    while index < len(rest):
        element = rest[index]
        if element.startswith("-"):
            options.append(f"{element} {rest[index + 1]}")
            index += 2
            continue
        is_option = element.startswith(("[-", "(-"))
        (options if is_option else positionals).append(element)
        index += 1
    return Usage(prog, tuple(positionals), tuple(sorted(options)))


def normalised(text: str) -> tuple[Usage, list[Section]]:
    lines = text.splitlines()
    end = lines.index("")
    usage = _usage(lines[:end])
    sections: list[Section] = []
    heading, kept, options = "", [], set()
    entry: list[str] | None = None
    for line in lines[end:]:
        if line and not line[0].isspace() and line.endswith(":"):
            sections.append(Section(heading, tuple(kept), frozenset(options)))
            heading, kept, options, entry = line, [], set(), None
            continue
        indent = len(line) - len(line.lstrip(" "))
        if entry is not None and line and indent > 2:
            entry.append(line)
            continue
        if entry is not None:
            options.add(" ".join(" ".join(entry).split()))
            entry = None
        if indent == 2 and line[2:3] == "-":
            entry = [line]
        elif line:
            kept.append(line.rstrip())
    if entry is not None:
        options.add(" ".join(" ".join(entry).split()))
    sections.append(Section(heading, tuple(kept), frozenset(options)))
    return usage, sections


def help_text(command: str) -> str:
    """What `COLUMNS=100 python -m fioprobe [COMMAND] --help` prints."""
    args = ["--help"] if command == "fioprobe" else [command, "--help"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FIOPROBE_")}
    env.pop("NODE_NAME", None)
    env["COLUMNS"] = "100"
    result = subprocess.run(
        [sys.executable, "-m", "fioprobe", *args],
        env=env,
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert result.stderr == b""
    return result.stdout.decode()


def test_every_command_has_a_saved_help() -> None:
    assert sorted(p.stem for p in SAVED.glob("*.txt")) == sorted(COMMANDS)
    listed = normalised(help_text("fioprobe"))[1][1].lines
    names = [line.split()[0] for line in listed if line.startswith("    ") and line[4] != " "]
    assert names == COMMANDS[1:]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_is_the_saved_one_option_order_aside(command: str) -> None:
    saved = (SAVED / f"{command}.txt").read_text()
    assert normalised(help_text(command)) == normalised(saved)


def test_the_normalisation_sees_what_matters() -> None:
    """Options swapped within a group compare equal; a changed word or a moved option does not."""
    saved = (SAVED / "push.txt").read_text()
    usage, sections = normalised(saved)
    assert usage.prog == "fioprobe push"
    assert usage.positionals == ("FILE|-",)
    assert "--storageclass STORAGECLASS" in usage.options
    assert "[--etcd-disk | --no-etcd-disk]" in usage.options
    assert [s.heading for s in sections] == [
        "",
        "positional arguments:",
        "options:",
        "Pushgateway:",
    ]
    assert "--quiet no progress line on stderr" in sections[2].options
    lines = saved.splitlines()
    quiet = lines.index("  --quiet               no progress line on stderr")
    swapped = lines[:]
    swapped[quiet], swapped[quiet + 1] = lines[quiet + 1], lines[quiet]  # --owner is 3 lines
    assert normalised("\n".join(swapped)) != normalised(saved)  # the lines are cut apart
    moved = lines[:quiet] + lines[quiet + 1 : quiet + 4] + [lines[quiet]] + lines[quiet + 4 :]
    assert normalised("\n".join(moved)) == normalised(saved)
    usage_swapped = saved.replace("[--quiet] [--owner NAME]", "[--owner NAME] [--quiet]")
    assert normalised(usage_swapped) == normalised(saved)
    assert normalised(saved.replace("stderr", "stdout")) != normalised(saved)
    elsewhere = lines[:quiet] + lines[quiet + 1 :] + [lines[quiet]]  # into Pushgateway:
    assert normalised("\n".join(elsewhere)) != normalised(saved)
