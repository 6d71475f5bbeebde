"""Regenerate (or --check) the parts of the docs that are copies of a Python table.

Why: the metric table, the volume types and the failure reasons each have one home in the
package (`fioprobe.metrics.table.METRICS`, `fioprobe.target.volumes.MODELS`,
`fioprobe.errors.FailureReason`);
every doc that lists them holds a generated copy between markers, so adding a metric, a
volume type or a reason is one edit plus `make generate`, and CI (`--check`) notices a copy
that was edited by hand or not regenerated.

A generated part stands between `<!-- NAME:begin -->` and `<!-- NAME:end -->` in README.md or
any docs/*.md, for NAME in `SECTIONS` (other names belong to the benchmarks' writers). Block
parts (a table) start on their own line; inline ones (a list in a sentence) stay inside it.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from fioprobe.errors import FailureReason
from fioprobe.metrics.table import METRICS
from fioprobe.target.volumes import VOLUME_TYPES

REPO = Path(__file__).resolve().parents[1]
_MARKED = re.compile(
    r"<!-- (?P<name>[a-z-]+):begin(?P<note>[^>]*)-->(?P<body>.*?)<!-- (?P=name):end -->", re.S
)


def metrics_table() -> str:
    rows = ["| metric | type | labels | meaning |", "|---|---|---|---|"]
    for metric in METRICS:
        labels = ", ".join(metric.labels) or ""
        rows.append(f"| `{metric.name}` | {metric.kind} | {labels} | {metric.help} |")
    return "\n" + "\n".join(rows) + "\n"


def code_list(names: Iterable[str]) -> str:
    return ", ".join(f"`{name}`" for name in names)


def published() -> dict[str, str]:
    """publish.json: where a release is published (the one place of those addresses)."""
    result: dict[str, str] = json.loads((REPO / "publish.json").read_text())
    return result


def jsonnet_dependency() -> str:
    """The jsonnet-bundler dependency a kube-prometheus build adds, with publish.json's remote."""
    entry = {
        "source": {"git": {"remote": published()["jsonnetRemote"], "subdir": ""}},
        "version": "main",
        "name": "fioprobe",
    }
    return "\n```json\n" + json.dumps(entry, indent=2) + "\n```\n"


def jsonnet_import_path() -> str:
    """Where jb puts the repository without a `name`: the remote's host and path."""
    remote = published()["jsonnetRemote"].removeprefix("https://").removesuffix(".git")
    return f"`{remote}/mixin.libsonnet`"


#: Every generated part: its marker name and what stands between the markers.
SECTIONS: dict[str, Callable[[], str]] = {
    "metrics-table": metrics_table,
    "volume-types": lambda: code_list(VOLUME_TYPES),
    # What fioprobe_failure_reason_info{reason} can hold: every reason a run pushes.
    "failure-reasons": lambda: code_list(r.value for r in FailureReason if r.pushed),
    # publish.json's addresses, where the docs show them.
    "jsonnet-dependency": jsonnet_dependency,
    "jsonnet-import-path": jsonnet_import_path,
    "image": lambda: f"`{published()['image']}`",
    "chart-repository": lambda: f"`{published()['chartRepository']}`",
}


def documents() -> list[Path]:
    return [
        REPO / "README.md",
        *sorted((REPO / "docs").glob("*.md")),
        REPO / "charts" / "fioprobe" / "README.md",
        REPO / "manifests" / "kube-prometheus" / "README.md",
    ]


def regenerate(text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in SECTIONS:  # another generator's part (benchmark tables)
            return match[0]
        return f"<!-- {name}:begin{match['note']}-->{SECTIONS[name]()}<!-- {name}:end -->"

    return _MARKED.sub(replace, text)


def main() -> int:
    stale = []
    for path in documents():
        text = path.read_text()
        wanted = regenerate(text)
        if wanted == text:
            continue
        if "--check" in sys.argv:
            stale.append(str(path.relative_to(REPO)))
        else:
            path.write_text(wanted)
    if stale:
        print(
            f"generated parts are stale in {', '.join(stale)}: run `make generate`", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
