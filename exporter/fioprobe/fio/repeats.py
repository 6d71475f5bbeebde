"""Client/server output read a second time, for the keys a JSON decoder silently merges.

Plain output never comes here: the reader (`parse`) sends only documents with a
`client_stats` list, so the probe's hot path keeps the decoder's fast path.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from fioprobe.fio.output_error import FioOutputError

#: fio's JSON document starts with "{" at the start of a line (possibly indented when
#: copied out of a document). Only those braces are tried, which keeps the search linear;
#: the reader (`parse`) looks for documents with the same two.
DOCUMENT_START = re.compile(r"^[ \t]*\{", re.MULTILINE)
DECODER = json.JSONDecoder()


class _DifferentRepeat(Exception):
    """A key repeated in one object with another value: which value is fio's is unknowable."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def strict_if_client_server(
    document: dict[str, Any], text: str, start: int, source: str
) -> dict[str, Any]:
    """Client/server output read again, refusing every repeated key fio does not write.

    A JSON decoder keeps the last of two equal keys and says nothing. fio's client writes
    "global options" as the options of every server in one object, so a key repeats there
    with the same value once per server (fio 3.33, one job file sent to three servers:
    "bs" three times); fio 3.1 and older also repeat "0.00": 0 for unused slots of a
    "percentile" object (and only there).
    Those two repeats are accepted as they are; any other repeated key, or a repeat with
    another value, is an edited or broken file, rejected whole. Plain (not client/server)
    documents take the decoder's fast path unchecked: they are the probe's hot path.
    """
    if not isinstance(document.get("client_stats"), list):
        return document
    repeats: list[tuple[dict[str, Any], list[str]]] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        again: list[str] = []
        for key, value in items:
            if key in obj:
                if not _same_value(obj[key], value):
                    raise _DifferentRepeat(key)
                again.append(key)
            obj[key] = value
        if again:
            repeats.append((obj, again))
        return obj

    strict: dict[str, Any]
    try:
        strict, end = json.JSONDecoder(object_pairs_hook=pairs).raw_decode(text, start)
    except _DifferentRepeat as exc:
        raise FioOutputError(
            source, f"key {_shown_key(exc.key)} appears twice in one object with different values"
        ) from None
    except (json.JSONDecodeError, RecursionError):  # the first decoding succeeded: not fio's
        raise FioOutputError(source, "fio JSON decodes differently on a second reading") from None
    _refuse_junk_after(text, end, source)
    options = strict.get("global options")
    accepted = [options] if isinstance(options, dict) else []
    if isinstance(options, list):
        accepted = [item for item in options if isinstance(item, dict)]
    percentiles = {id(obj) for obj in _percentile_objects(strict)} if repeats else set()
    for obj, keys in repeats:
        if any(obj is item for item in accepted):
            continue
        if (
            id(obj) in percentiles
            and set(keys) == {"0.00"}
            and obj["0.00"] == 0
            and type(obj["0.00"]) is int
        ):
            continue
        raise FioOutputError(
            source,
            f"key {_shown_key(keys[0])} appears more than once in one object; fio repeats "
            'keys only in client/server "global options"',
        )
    return strict


def _refuse_junk_after(text: str, end: int, source: str) -> None:
    """Refuse client/server output with broken JSON after its document.

    fio's client writes its document last; what may follow is whitespace or another
    complete document. A document cut into, a second one half written or text glued to the
    closing brace means the file was edited or concatenated, and which figures are fio's is
    then unknowable: the whole file is rejected rather than the last good-looking part read.
    """
    line_end = text.find("\n", end)
    glued = text[end : len(text) if line_end < 0 else line_end].strip()
    if glued:
        line = text.count("\n", 0, end) + 1
        raise FioOutputError(
            source, f"text after the fio JSON document on its last line {line}: {glued[:40]!r}"
        )
    position = end
    while (match := DOCUMENT_START.search(text, position)) is not None:
        try:
            _, position = DECODER.raw_decode(text, match.end() - 1)
        except (json.JSONDecodeError, RecursionError) as exc:
            detail = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
            line = text.count("\n", 0, match.end() - 1) + 1
            raise FioOutputError(
                source, f"invalid JSON after the fio document, at line {line}: {detail}"
            ) from None


def _percentile_objects(value: object) -> Iterator[dict[str, Any]]:
    """Every object under a "percentile" key: where old fio writes its "0.00" slots."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "percentile" and isinstance(item, dict):
                yield item
            yield from _percentile_objects(item)
    elif isinstance(value, list):
        for item in value:
            yield from _percentile_objects(item)


def _same_value(first: object, second: object) -> bool:
    """Equal and of one JSON type (1 and 1.0, true and 1 are different values here)."""
    return type(first) is type(second) and first == second


def _shown_key(key: str) -> str:
    return f'"{key}"' if key.isprintable() and '"' not in key else repr(key)
