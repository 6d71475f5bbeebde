"""The fio corpus (tests/data/fio-corpus) read independently of fioprobe's reader: the fio
document of a file, and the problem each negative file must be reported with.

The corpus itself and its good and negative files are conftest's `CORPUS` and
`corpus_files`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

#: The problem each negative file must be reported with.
EXPECTED_ERRORS = {
    "neg-fio2.10-abridged-trailing-comma-extracted.txt": "invalid fio JSON at line 41 column 7",
    "neg-fio2.2.10-normal-text-output-ceph-rw.txt": "no fio JSON output found",
    "neg-fio3.7-ocs-ci-truncated-after-jobs-extracted.txt": "fio JSON is truncated",
    "neg-windows-job-parse-error-no-json.txt": "fio said: 'fio: \"C is not a directory'",
}


def raw_document(path: Path) -> dict:
    """The fio document, found independently of the reader: the largest decodable object."""
    text = path.read_text(errors="replace")
    best: dict = {}
    decoder = json.JSONDecoder()
    for match in re.finditer(r"^[ \t]*\{", text, re.MULTILINE):
        try:
            obj, _ = decoder.raw_decode(text, match.end() - 1)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and ("jobs" in obj or "client_stats" in obj):
            best = obj
    assert best, f"test bug: no fio document in {path}"
    return best
