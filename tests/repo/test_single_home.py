"""fioprobe's version and the Pushgateway grouping key's labels each have one home, and no
source file of the repository holds a copy.

Why: the version was written in the package, pyproject.toml, the manifests' defaults and
configuration and the Dockerfile's instructions; a release that bumps four of them ships
objects whose app.kubernetes.io/version or image tag lies. The grouping key's labels were
spelled in every module that builds or reads a group and in the mixin's rules, which must
aggregate by exactly what is pushed; a label added in one place and not the others splits a
probe's series or keeps gc from recognising its groups.

Homes: the version is exporter/fioprobe/__init__.py's `__version__` (pyproject.toml reads it
through setuptools' `attr`, the manifests through manifests/lib/version.libsonnet, the image
tag defaults to the manifests' version). The labels are exporter/fioprobe/grouping.py's
PROBE_LABELS for Python and lib/util.libsonnet's groupingLabels for jsonnet, held equal here.

The search reads every file git knows or would add (ignored ones aside), except generated
outputs (rendered from the homes by scripts/generate.sh, each checked current by its own
test) and fixture data (tests/data). For the labels it also leaves out tests, benchmarks and
the promtool scenario generator: they write label sets as data on purpose, independently of
the code whose output they check. A version is not such a contract: a fixture that spells it
goes stale at every release, so the version is searched for everywhere.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO
from fioprobe import __version__
from fioprobe.grouping import PROBE_LABELS
from support.paths import GO_JSONNET

VERSION_HOME = "exporter/fioprobe/__init__.py"
LABEL_HOMES = {"exporter/fioprobe/grouping.py", "lib/util.libsonnet"}

#: Rendered by scripts/generate.sh from the homes (prefixes of repository paths), and the
#: promtool tests alerts/tests/*.yaml (the generators beside them are sources).
GENERATED = (
    "alerts/out/",
    "dashboards/out/",
    "manifests/generated/",
    "manifests/kustomization.yaml",
    # The Helm chart's, but its templates and README (scripts/generate.d/32-chart.sh).
    "charts/fioprobe/Chart.yaml",
    "charts/fioprobe/values.yaml",
    "charts/fioprobe/values.schema.json",
    "charts/fioprobe/files/",
)
#: Label sets written as data (see the module docstring).
LABEL_DATA = ("tests/", "bench/", "alerts/tests/")

#: Source kinds searched, by suffix or file name. JSON files are lock files, schemas and
#: data; go.mod/go.sum hold other projects' versions.
CODE_SUFFIXES = {".py", ".jsonnet", ".libsonnet", ".sh", ".yaml", ".yml", ".toml", ".ini"}
CODE_NAMES = {"Dockerfile", "Makefile", "run"}

#: Markdown parts between generation markers: `<!-- name:begin -->` ... `<!-- name:end -->`
#: (scripts/generated_docs.py) and `<!-- generated: ... -->` ... `<!-- end generated: ... -->`
#: (scripts/generate.d/31-manifests-params.sh).
GENERATED_DOC_PART = re.compile(
    r"<!-- ([\w-]+)[^>]*:begin[^>]*-->.*?<!-- \1:end -->"
    r"|<!-- generated: [^>]*-->.*?<!-- end generated: [^>]*-->",
    re.S,
)

#: The grouping key's label names, and the two that every fioprobe group has.
LABELS = {"job", *PROBE_LABELS}
CORE = {"storageclass", "profile"}


def jsonnet(code: str) -> object:
    """`code` evaluated by the generators' interpreter, from the repository root."""
    proc = subprocess.run(
        [str(GO_JSONNET), "-J", str(REPO), "-e", code],
        capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def source_files() -> list[str]:
    """Repository paths of every file git tracks or would add, as they are in the work tree."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=True,
    ).stdout.splitlines()  # fmt: skip
    return sorted({path for path in listed if (REPO / path).is_file()})


def is_generated(path: str) -> bool:
    return path.startswith(GENERATED) or (
        path.startswith("alerts/tests/") and path.endswith(".yaml")
    )


def searched(path: str) -> bool:
    """Whether `path` is a source the searches read (code or Markdown, not generated)."""
    if path.startswith("tests/data/") or is_generated(path):
        return False
    name = Path(path).name
    return name in CODE_NAMES or Path(path).suffix in CODE_SUFFIXES | {".md"}


def text_of(path: str) -> str:
    text = (REPO / path).read_text(encoding="utf-8")
    return GENERATED_DOC_PART.sub("", text) if path.endswith(".md") else text


# --- the version ----------------------------------------------------------------------------


def version_lines(path: str, text: str, version: str) -> Iterator[str]:
    """`path:line` of every occurrence of `version` as a whole version (not inside 19.8.7.1
    or a Go module's v9.8.7)."""
    pattern = re.compile(rf"(?<![\w.]){re.escape(version)}(?![\w.])")
    for number, line in enumerate(text.splitlines(), 1):
        if pattern.search(line):
            yield f"{path}:{number}: {line.strip()}"


def test_pyproject_and_the_manifests_read_the_packages_version() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "fioprobe.__version__"}
    assert jsonnet("import 'manifests/lib/version.libsonnet'") == __version__
    config = jsonnet("(import 'manifests/main.libsonnet')().config")
    assert isinstance(config, dict)
    assert config["version"] == config["image"]["tag"] == __version__


def test_no_source_file_spells_the_version_outside_its_home() -> None:
    found = [
        hit
        for path in source_files()
        if path != VERSION_HOME and searched(path)
        for hit in version_lines(path, text_of(path), __version__)
    ]
    assert not found, "\n".join(["copies of the version (read fioprobe.__version__):", *found])


def test_the_version_search_finds_a_copy_and_nothing_else() -> None:
    text = 'version = "9.8.7"\nimage: 19.8.7.1\ngithub.com/x/y v9.8.7 h1:abc\ntag: 9.8.7-rc1\n'
    assert list(version_lines("f", text, "9.8.7")) == [
        'f:1: version = "9.8.7"',
        "f:4: tag: 9.8.7-rc1",
    ]


def test_generated_markdown_parts_are_left_out_and_nothing_else() -> None:
    text = (
        "a <!-- volume-types:begin -->x<!-- volume-types:end --> b\n"
        "<!-- generated: keys (script) -->\ny\n<!-- end generated: keys -->\nc"
    )
    assert GENERATED_DOC_PART.sub("", text) == "a  b\n\nc"


# --- the grouping key's labels --------------------------------------------------------------


def test_the_mixin_groups_by_the_pushed_labels() -> None:
    """lib/util.libsonnet's groupingLabels is PROBE_LABELS, and the labels the mixin's rules
    aggregate a probe or a volume by are taken from it."""
    util = jsonnet(
        "local u = import 'lib/util.libsonnet';"
        "{ grouping: u.groupingLabels, probe: u.probeLabels, volume: u.volumeLabels }"
    )
    assert isinstance(util, dict)
    assert tuple(util["grouping"]) == PROBE_LABELS
    assert sorted(util["probe"]) == sorted(PROBE_LABELS)
    assert util["volume"] == [label for label in PROBE_LABELS if label != "profile"]


def _python_names(node: ast.expr) -> set[str]:
    """Label names a collection literal spells: its string items, a dict's string keys, and
    the names of (name, value) pairs."""
    items: list[ast.expr] = []
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        items = node.elts
    elif isinstance(node, ast.Dict):
        items = [key for key in node.keys if key is not None]
    names = set()
    for item in items:
        if isinstance(item, ast.Tuple) and len(item.elts) == 2:
            item = item.elts[0]
        if isinstance(item, ast.Constant) and isinstance(item.value, str):
            names.add(item.value)
    return names


def python_label_lines(path: str, text: str) -> Iterator[str]:
    """Collection literals (tuple, list, set, dict keys, name-value pairs) naming both
    storageclass and profile: the grouping key written out."""
    lines = text.splitlines()
    for node in ast.walk(ast.parse(text, path)):
        if isinstance(node, ast.expr) and _python_names(node) >= CORE:
            yield f"{path}:{node.lineno}: {lines[node.lineno - 1].strip()}"


_QUOTED = r"""['"](?:{})['"]""".format("|".join(sorted(LABELS)))
#: Two or more quoted label names in a row: a list of them.
_QUOTED_RUN = re.compile(rf"{_QUOTED}(?:\s*,\s*{_QUOTED})+")
_BARE = r"\b(?:{})\b".format("|".join(sorted(PROBE_LABELS)))
#: Every probe label, bare and comma-separated: a PromQL `by (...)` or `on (...)` list.
_BARE_RUN = re.compile(rf"{_BARE}(?:\s*,\s*{_BARE}){{{len(PROBE_LABELS) - 1},}}")
#: A comment to the end of the line (jsonnet, shell, YAML), not a URL's `//`.
_COMMENT = re.compile(r"(?:^|(?<=\s))(?://|#).*$")


def text_label_lines(path: str, text: str) -> Iterator[str]:
    """Outside comments: quoted lists of label names naming storageclass and profile, and
    bare lists naming every probe label."""
    for number, line in enumerate(text.splitlines(), 1):
        code = _COMMENT.sub("", line)
        quoted = [
            set(re.findall(r"""['"](\w+)['"]""", run.group())) for run in _QUOTED_RUN.finditer(code)
        ]
        bare = [set(re.findall(r"\w+", run.group())) for run in _BARE_RUN.finditer(code)]
        if any(names >= CORE for names in quoted) or any(
            names == set(PROBE_LABELS) for names in bare
        ):
            yield f"{path}:{number}: {line.strip()}"


def label_lines(path: str) -> Iterator[str]:
    if path.endswith(".py"):
        yield from python_label_lines(path, text_of(path))
    elif not path.endswith(".md"):
        yield from text_label_lines(path, text_of(path))


def test_no_source_file_spells_the_grouping_labels_outside_their_homes() -> None:
    found = [
        hit
        for path in source_files()
        if path not in LABEL_HOMES and not path.startswith(LABEL_DATA) and searched(path)
        for hit in label_lines(path)
    ]
    assert not found, "\n".join(
        [
            "the grouping key written out (use fioprobe.grouping in Python, "
            "lib/util.libsonnet's groupingLabels in jsonnet):",
            *found,
        ]
    )


@pytest.mark.parametrize(
    "source",
    [
        'KEY = ("storageclass", "profile", "node")',
        'OK = frozenset({"job", "storageclass", "profile"})',
        'key = {"storageclass": sc, "profile": p}',
        'pairs = (("storageclass", a.storageclass), ("profile", a.profile), ("node", a.node))',
    ],
)
def test_the_python_search_finds_a_key_written_out(source: str) -> None:
    assert len(list(python_label_lines("f.py", source))) == 1


@pytest.mark.parametrize(
    "source",
    [
        'names = ("alertname", "severity", "storageclass", "node")',
        'volume = {"storageclass": sc, "node": n}',
        'target = ProbeTarget(storageclass="gp2", profile="etcd-fsync")',
        'labels.get("storageclass", "")',
    ],
)
def test_the_python_search_leaves_other_label_sets_alone(source: str) -> None:
    assert list(python_label_lines("f.py", source)) == []


@pytest.mark.parametrize(
    "source",
    [
        "  probeLabels:: ['storageclass', 'node', 'profile'],",
        "    local identity = 'storageclass, profile, node',",
        "  sum by (cluster, node, profile, storageclass) (x)",
    ],
)
def test_the_text_search_finds_a_list_written_out(source: str) -> None:
    assert len(list(text_label_lines("f.libsonnet", source))) == 1


@pytest.mark.parametrize(
    "source",
    [
        "  volumeBy(c):: std.join(', ', [c.clusterLabel, 'storageclass', 'node']),",
        "        and on (storageclass, profile)",
        """    local stream = [c.clusterLabel + '="%s"', 'storageclass="%s"', 'node="%s"'];""",
        "  // Every probe, as {storageclass, profile, node (node-local only)}",
        "  fioprobeSelector: 'job=\"fioprobe\"',",
        "      'profile', 'profile', 'Profile', 'Probe profile (jobs/<profile>.fio).', extra",
    ],
)
def test_the_text_search_leaves_other_label_sets_alone(source: str) -> None:
    assert list(text_label_lines("f.libsonnet", source)) == []
