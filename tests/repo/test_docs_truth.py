"""The docs say what the repository has: every path they name exists, every jsonnet example
renders, every YAML and jsonnet block passes the check of what it is, and every dotted
configuration key they name is a key.

Why: docs drift silently. A moved module leaves its old path in a page; a retired key in an
example renders without a word (the mixin now refuses it, but only when someone runs it); a
values snippet that the schema refuses is found by a user mid-install. Prose is not parsed:
only paths, commands, code blocks and backticked keys, each of which can be checked.

- Paths: a token that starts with one of the repository's top-level folders (`exporter/...`,
  `docs/...`, `manifests/...`) in a doc, a docstring or a comment must exist, read from the
  repository root or from any folder above the file that names it (`lib/params.libsonnet` in
  manifests/ is manifests/lib/params.libsonnet). Placeholders (`<name>`, `*`) are not paths;
  NOT_PATHS lists, with a reason each, the few tokens that look like one and are not.
- jsonnet examples: `jsonnet ... --tla-code NAME='VALUE' FILE.jsonnet` in a doc or in a jsonnet
  file's comments renders (a VALUE with `...` is a placeholder).
- Code blocks: every ```yaml and ```jsonnet block in the docs is preceded by
  `<!-- checked: KIND -->` naming what it is, and passes KIND's check (CHECKS); `none: why`
  for a fragment of someone else's format.
- Keys: a backticked dotted key whose first part is a key of the manifests' configuration
  (docs/MANIFESTS.md, the chart's README) or the mixin's (docs/MIXIN.md) is a key there.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from conftest import REPO
from support.paths import GO_JSONNET

DOCS = [
    REPO / "README.md",
    REPO / "CONTRIBUTING.md",
    *sorted((REPO / "docs").glob("*.md")),
    REPO / "charts" / "fioprobe" / "README.md",
    REPO / "manifests" / "kube-prometheus" / "README.md",
    REPO / "tests" / "support" / "README.md",
]
#: Sources whose comments and docstrings are read: code, jsonnet, shell, the chart's templates.
SOURCE_SUFFIXES = (".py", ".libsonnet", ".jsonnet", ".sh", ".tpl")
#: Folders whose files are not the project's own words (vendored, generated, test data).
NOT_OURS = {"vendor", ".venv", ".tools", ".git", "data", "out", "generated", "node_modules"}
TOP_FOLDERS = (
    "exporter|tests|docs|bench|scripts|alerts|dashboards|manifests|charts|lib|jobs|typings"
)
PATH_TOKEN = re.compile(rf"(?<![\w./-])((?:{TOP_FOLDERS})/[\w./*<>{{}}-]*[\w*>}}/])")

#: Tokens that look like repository paths and are not, each with why.
NOT_PATHS = {
    "scripts/setup.d/NN-name.sh": "CONTRIBUTING.md: the naming of a setup step",
    "charts/NAME.png": "a report's output folder, not this repository's charts/",
    "charts/NN-name.png": "a report's output folder, not this repository's charts/",
    "charts/mine.png": "tests/report/test_report.py: a report's output, in the test's directory",
    "manifests/setup": "kube-prometheus' own layout (its manifests/setup/), applied by users",
    "scripts/build": "local-path-provisioner's repository, whose build it copies",
    "vendor/github.com/prometheus-operator/kube-prometheus": "made by setup (kube-prometheus)",
    "manifests/generated/openshift-securitycontextconstraints.yaml": (
        "generated only with platform: 'openshift' (docs/MANIFESTS.md, OpenShift)"
    ),
}


def ours(path: Path) -> bool:
    return not NOT_OURS.intersection(path.relative_to(REPO).parts)


def sources() -> Iterator[Path]:
    """The project's own source files, this one aside (its seeded mistakes are on purpose),
    and the chart's templates."""
    for suffix in SOURCE_SUFFIXES:
        for path in sorted(REPO.rglob(f"*{suffix}")):
            if ours(path) and path != Path(__file__).resolve():
                yield path
    templates = REPO / "charts" / "fioprobe" / "templates"
    yield from sorted([*templates.rglob("*.yaml"), *templates.rglob("*.txt")])


def dead_paths(text: str, where: Path) -> list[str]:
    """Every path token of `text` (written in `where`) that names nothing in the repository."""
    relative = where.relative_to(REPO).parts
    bases = [REPO.joinpath(*relative[:i]) for i in range(len(relative))]
    dead = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in PATH_TOKEN.finditer(line):
            token = match.group(1).rstrip("./")
            if any(c in token for c in "*<>{}") or token in NOT_PATHS:
                continue
            if not any((base / token).exists() for base in bases):
                dead.append(f"{where.relative_to(REPO)}:{number}: {token}")
    return dead


def test_every_path_a_doc_or_source_names_exists() -> None:
    dead = [d for path in [*DOCS, *sources()] for d in dead_paths(path.read_text(), path)]
    assert not dead, "paths that name nothing:\n" + "\n".join(dead)


def test_the_exceptions_are_still_named_somewhere() -> None:
    """An exception nobody writes any more is dropped, so the list cannot hide a new one."""
    text = "\n".join(p.read_text() for p in [*DOCS, *sources()])
    assert [token for token in NOT_PATHS if token not in text] == []


def test_a_dead_path_is_found_and_a_relative_one_is_not() -> None:
    doc = REPO / "docs" / "MANIFESTS.md"
    seeded = "see `exporter/fioprobe/probe/config.py` and docs/NOPE.md"
    assert dead_paths(seeded, doc) == [
        "docs/MANIFESTS.md:1: exporter/fioprobe/probe/config.py",
        "docs/MANIFESTS.md:1: docs/NOPE.md",
    ]
    within = REPO / "manifests" / "lib" / "params.libsonnet"
    assert dead_paths("// lib/defaults.libsonnet, <name>/x, docs/*.md", within) == []


# --- jsonnet examples -------------------------------------------------------------------------

TLA_EXAMPLE = re.compile(r"jsonnet\b[^\n]*?--tla-code (\w+)='([^']*)'[^\n]*?\s(\S+\.jsonnet)\b")


def tla_examples() -> list[tuple[str, str, str, str]]:
    """(where, name, value, file) of every runnable `--tla-code` example."""
    found = []
    for path in [*DOCS, *(p for p in sources() if p.suffix in (".jsonnet", ".libsonnet"))]:
        for name, value, file in TLA_EXAMPLE.findall(path.read_text()):
            if "..." not in value:
                found.append((str(path.relative_to(REPO)), name, value, file))
    return found


def render(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(GO_JSONNET), "-J", str(REPO), "-J", str(REPO / "vendor"), *args],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_there_are_examples_to_check() -> None:
    assert len(tla_examples()) >= 2, tla_examples()


@pytest.mark.parametrize(("where", "name", "value", "file"), tla_examples())
def test_every_jsonnet_example_renders(where: str, name: str, value: str, file: str) -> None:
    proc = render("--tla-code", f"{name}={value}", file)
    assert proc.returncode == 0, f"{where}: {file} with {name}={value}:\n{proc.stderr}"


def test_an_example_with_a_retired_key_fails() -> None:
    proc = render("--tla-code", "config={ latencyWindow: '1m' }", "alerts/rules.jsonnet")
    assert proc.returncode != 0 and "latencyWindow: unknown key" in proc.stderr


# --- code blocks ------------------------------------------------------------------------------

MARKER = re.compile(r"<!-- checked: ([\w-]+)(?::[^>]*)? -->\n```(\w+)\n(.*?)\n```", re.S)
FENCE = re.compile(r"^```(yaml|yml|jsonnet)\s*$", re.M)


def probe_config(text: str, tmp: Path) -> None:
    """A configuration as fioprobe reads it: a provisioning owner's, for gc, may have no
    target (the commands that probe refuse that one)."""
    from fioprobe.target.config import load_config

    path = tmp / "config.yaml"
    path.write_text(text)
    load_config(path, probes_optional=True)


def distributed_plan(text: str, tmp: Path) -> None:
    from fioprobe.distributed.plan import parse_plan

    parse_plan(text, "the doc's plan")


def distributed_jsonnet(text: str, tmp: Path) -> None:
    path = tmp / "benchmark.jsonnet"
    path.write_text(text)
    proc = render("--tla-code-file", f"benchmark={path}", "manifests/distributed.jsonnet")
    assert proc.returncode == 0, proc.stderr


def merged(defaults: Any, values: Any) -> Any:
    """Helm's merge of a user's values over the chart's: maps key by key, the rest replaced."""
    if isinstance(defaults, dict) and isinstance(values, dict):
        return {k: merged(defaults.get(k), values[k]) if k in values else defaults[k]
                for k in {**defaults, **values}}  # fmt: skip
    return values


def chart_values(text: str, tmp: Path) -> None:
    """What `helm install -f` checks: the snippet over values.yaml, against the schema."""
    chart = REPO / "charts" / "fioprobe"
    schema = json.loads((chart / "values.schema.json").read_text())
    defaults = yaml.safe_load((chart / "values.yaml").read_text())
    jsonschema.validate(merged(defaults, yaml.safe_load(text)), schema)


def mixin_config(text: str, tmp: Path) -> None:
    code = f"((import 'mixin.libsonnet') + {{ _config+:: {{ {text} }} }}).prometheusAlerts"
    proc = render("-e", code)
    assert proc.returncode == 0, proc.stderr


def kube_prometheus_part(text: str, tmp: Path) -> None:
    """A `local fioprobe = (import 'fioprobe/manifests/kube-prometheus/...')(...)` as a user's
    kube-prometheus build writes it (jsonnet-bundler installs this repository as fioprobe/),
    with its objects rendered."""
    if not (tmp / "fioprobe").exists():
        (tmp / "fioprobe").symlink_to(REPO)
    path = tmp / "part.jsonnet"
    path.write_text(f"local namespace = 'monitoring';\n{text}\nfioprobe")
    proc = render("-J", str(tmp), str(path))
    assert proc.returncode == 0, proc.stderr


def none(text: str, tmp: Path) -> None:
    """Someone else's format (a Prometheus or Alertmanager fragment): said so, not checked."""


CHECKS: dict[str, Callable[[str, Path], None]] = {
    "probe-config": probe_config,
    "distributed-plan": distributed_plan,
    "distributed-jsonnet": distributed_jsonnet,
    "chart-values": chart_values,
    "mixin-config": mixin_config,
    "kube-prometheus-part": kube_prometheus_part,
    "none": none,
}


def blocks() -> list[tuple[str, str, str]]:
    """(where, kind, text) of every marked block."""
    return [
        (f"{path.relative_to(REPO)}:{path.read_text()[: m.start()].count(chr(10)) + 1}", kind, body)
        for path in DOCS
        for m in MARKER.finditer(path.read_text())
        for kind, body in [(m.group(1), m.group(3))]
    ]


def test_every_yaml_and_jsonnet_block_says_what_it_is() -> None:
    unmarked = []
    for path in DOCS:
        text = path.read_text()
        marked = {m.start(2) for m in MARKER.finditer(text)}
        for fence in FENCE.finditer(text):
            if not any(abs(fence.start() + 3 - start) <= 1 for start in marked):
                line = text[: fence.start()].count("\n") + 1
                unmarked.append(f"{path.relative_to(REPO)}:{line}")
    assert not unmarked, "blocks without <!-- checked: KIND -->:\n" + "\n".join(unmarked)
    kinds = {kind for _, kind, _ in blocks()}
    assert kinds <= set(CHECKS), kinds - set(CHECKS)


@pytest.mark.parametrize(("where", "kind", "text"), blocks(), ids=lambda v: str(v)[:40])
def test_every_block_passes_its_check(where: str, kind: str, text: str, tmp_path: Path) -> None:
    try:
        CHECKS[kind](text, tmp_path)
    except Exception as exc:  # the check's own error says what is wrong
        pytest.fail(f"{where} ({kind}): {exc}")


PROBE = "pushgateway: {url: http://127.0.0.1:9091}\ntargets:\n  - {name: a, directory: /p, %s}\n"
PLAN = (
    "name: x\nstorageclass: y\nservers: %s\nfile_size: 32m\nblock_size: 4k\nruntime: 5\n"
    "budget: {bytes_per_server: 4g, seconds_per_server: 60}\n"
)
VALUES = "storageClasses:\n  - {name: a, volume: {type: %s, size: 20Gi}, profiles: [etcd-fsync]}\n"
KP = (
    "local fioprobe = (import 'fioprobe/manifests/kube-prometheus/fioprobe.libsonnet')"
    "(namespace, { %s: 10 });"
)
BENCHMARK = "{ name: 'x', storageclass: 'y', volumeSize: '1Gi', %s: 3, plan: { runtime: 5 } }"


@pytest.mark.parametrize(
    ("kind", "good", "bad", "message"),
    [
        ("probe-config", PROBE % "profiles: [etcd-fsync]", PROBE % "profile: [etcd-fsync]",
         "profile"),
        ("distributed-plan", PLAN % 3, PLAN % 0, "servers"),
        ("distributed-jsonnet", BENCHMARK % "servers", BENCHMARK % "server", "server"),
        ("chart-values", VALUES % "gp3", VALUES % "gp4", "gp4"),
        ("mixin-config", "latencyWindowRuns: 6,", "latencyWindow: '1m',", "latencyWindow"),
        ("kube-prometheus-part", KP % "everyMinutes", KP % "everyMinute", "everyMinute"),
    ],
)  # fmt: skip
def test_a_broken_block_fails_its_check(
    kind: str, good: str, bad: str, message: str, tmp_path: Path
) -> None:
    """One mistake in a block that passes: the check fails, naming it."""
    CHECKS[kind](good, tmp_path)
    with pytest.raises(Exception, match=message):  # each check raises its own kind
        CHECKS[kind](bad, tmp_path)


# --- configuration keys -----------------------------------------------------------------------

KEY_TOKEN = re.compile(r"`([a-z][A-Za-z0-9]*(?:\.[A-Za-z][A-Za-z0-9]*)+)`")
#: Kubernetes' own fields under a key that holds a Kubernetes object (resources).
KUBERNETES_FIELDS = {"limits", "requests", "cpu", "memory"}
#: Dotted keys of another configuration that the docs name on purpose, each with why.
OTHER_KEYS = {
    "pushgateway.shards": "the probes' own configuration (fioprobe run --config), not a setting",
    "continuous.namespaces": "a hidden field of the rendered stream component, not a setting",
}


def key_tree(code: str) -> Any:
    """Every key of a configuration object, hidden ones included, as nested dicts (a list's
    entries by its first one)."""
    tree = (
        "local tree(o) = if std.isObject(o)"
        " then { [k]: tree(o[k]) for k in std.objectFieldsAll(o) }"
        " else if std.isArray(o) && std.length(o) > 0 then [tree(o[0])] else null; tree(%s)"
    )
    proc = render("-e", tree % code)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def is_key(tree: Any, parts: list[str]) -> bool:
    for i, part in enumerate(parts):
        if isinstance(tree, list) and tree:
            tree = tree[0]
        if not isinstance(tree, dict) or part not in tree:
            return "resources" in parts[:i] and set(parts[i:]) <= KUBERNETES_FIELDS
        tree = tree[part]
    return True


def wrong_keys(text: str, tree: Any, where: str) -> list[str]:
    wrong = []
    for number, line in enumerate(text.splitlines(), 1):
        for token in KEY_TOKEN.findall(line):
            parts = token.split(".")
            if parts[0] in tree and token not in OTHER_KEYS and not is_key(tree, parts):
                wrong.append(f"{where}:{number}: {token}")
    return wrong


@pytest.fixture(scope="module")
def trees() -> dict[str, Any]:
    manifests = key_tree("(import 'manifests/main.libsonnet')().config")
    mixin = key_tree("(import 'config.libsonnet')._config")
    return {
        "docs/MANIFESTS.md": manifests,
        "charts/fioprobe/README.md": manifests,
        "docs/MIXIN.md": mixin,
    }


def test_every_dotted_key_the_docs_name_is_a_key(trees: dict[str, Any]) -> None:
    wrong = [
        w for doc, tree in trees.items() for w in wrong_keys((REPO / doc).read_text(), tree, doc)
    ]
    assert not wrong, "keys that are not keys:\n" + "\n".join(wrong)


def test_a_dead_key_is_found(trees: dict[str, Any]) -> None:
    tree = trees["docs/MANIFESTS.md"]
    seeded = "`etcd.dataDir`, `etcd.dataDirectory`, `continuous.resources.limits.cpu`, `a.b`"
    assert wrong_keys(seeded, tree, "x") == ["x:1: etcd.dataDirectory"]
    assert wrong_keys("`continuous.resources.limits.cpus`", tree, "x") != []


# --- Python names -----------------------------------------------------------------------------

PYTHON_NAME = re.compile(r"`(fioprobe(?:\.\w+)+)`")
#: `fioprobe.libsonnet` and the like are files, not Python names.
FILE_SUFFIXES = (".libsonnet", ".jsonnet", ".yaml", ".json", ".py", ".md")


def rule_groups() -> set[str]:
    """The rule groups' names (`fioprobe.rules`, `fioprobe.continuous.burn`, ...): dotted like
    a module, and not one."""
    names = set()
    for path in (REPO / "alerts" / "out").glob("*.yaml"):
        names |= {group["name"] for group in yaml.safe_load(path.read_text())["groups"]}
    return names


def resolves(name: str) -> bool:
    """Whether `fioprobe.a.b.C` is a module, or an attribute of the longest module it names
    that is defined there: a class or function only imported into a module (left behind by a
    move) does not count. `__main__` is never imported (it would run the command line)."""
    import importlib
    import inspect

    parts = name.split(".")
    if "__main__" in parts:
        return (REPO / "exporter" / Path(*parts[:-1]) / "__main__.py").exists()
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        try:
            target: Any = importlib.import_module(module)
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(target, attribute):
                return False
            target = getattr(target, attribute)
        defined = getattr(target, "__module__", module)
        return not (inspect.isclass(target) or inspect.isfunction(target)) or defined == module
    return False


def dead_names(text: str, where: str, groups: set[str]) -> list[str]:
    return [
        f"{where}:{number}: {name}"
        for number, line in enumerate(text.splitlines(), 1)
        for name in PYTHON_NAME.findall(line)
        if name not in groups and not name.endswith(FILE_SUFFIXES) and not resolves(name)
    ]


def test_every_python_name_the_docs_give_resolves() -> None:
    """`fioprobe.target.volumes.MODELS` in a doc is a module or an attribute of one: a name
    left behind by a move fails here."""
    groups = rule_groups()
    assert "fioprobe.continuous.burn" in groups
    dead = [
        found
        for path in DOCS
        for found in dead_names(path.read_text(), str(path.relative_to(REPO)), groups)
    ]
    assert not dead, "Python names that name nothing:\n" + "\n".join(dead)


def test_a_moved_python_name_is_found() -> None:
    seeded = "`fioprobe.probe.volumes.MODELS`, `fioprobe.target.volumes.MODELS`, `fioprobe.rules`"
    assert dead_names(seeded, "x", {"fioprobe.rules"}) == ["x:1: fioprobe.probe.volumes.MODELS"]
    # Imported into the prober, defined in model.py: the name a move left behind.
    assert not resolves("fioprobe.probe.prober.ProbeTarget")
    assert resolves("fioprobe.probe.model.ProbeTarget") and resolves("fioprobe.__main__")
