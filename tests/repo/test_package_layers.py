"""The package's stages import each other in one direction only: down the data flow.

Why: fioprobe runs fio, reads its output, turns it into metrics, pushes them and keeps its
totals between runs; each stage is a folder, and a folder that imports a later one drags it
(and whatever that one loads: yaml, the probe's safety rules, the state file) into every
command that only needs the earlier one. Such an import passes every other test, so this one
reads the source: every import, absolute or relative, at the top, nested in a function or
under `if TYPE_CHECKING:` (a type-only import still ties one stage's interface to another's),
resolved to the module it names.

What is checked, each from data below:
- `LAYERS`, lowest first: a module imports its own layer and the ones below it. The packages
  of a layer marked `apart` stand side by side and import nothing of each other: so no
  command package imports another, and what two of them need lives a layer below both.
  `cli/` is alone on top, under only the `python -m fioprobe` entry point.
- `ORDER`: inside a stage (a folder; the foundation's top-level modules are one too), each
  module is placed, lowest first, and imports only modules placed below it.
- No cycle at all, late imports (inside a function) included: a cycle that a late import
  closes works by accident of import order, and the order above would be a lie.
- `RULES` adds what the layers alone do not say, and `EXCEPTIONS` lists every import that
  breaks any of it, each with why it is still there: an entry that no longer matches an
  import fails too, so the list only shrinks. It is empty, and a new entry needs a reason a
  reviewer accepts.
Each check is shown to fail on a violation seeded into a copy of the package.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path
from typing import NamedTuple

from conftest import REPO

PACKAGE = REPO / "exporter" / "fioprobe"
ROOT = "fioprobe"


class Layer(NamedTuple):
    name: str
    #: Modules or packages (then all their modules).
    units: tuple[str, ...]
    #: The units stand side by side: none imports another (the foundation's modules, which
    #: do import each other, are kept in order by `ORDER` instead).
    apart: bool = True


#: The layers, lowest first. foundation: what every stage shares (errors, text, bounds...),
#: and what stages of different layers share (one HTTP exchange under one deadline, for
#: kube/ and gateway/: exchange); kube/ speaks to the Kubernetes API; provision/ computes the
#: provisioning probe's steps and failure reasons from objects' JSON (its model is pure: a
#: rule below) and runs it against the API (follow, runner); fio/ runs and reads fio;
#: metrics/ is where a fio field becomes a metric; gateway/ is the Pushgateway client;
#: publish/ keeps the totals between runs and pushes them; shared: what several stages above
#: need (target/: a target's configuration and the safe ways to touch its volume; services/:
#: local Prometheus and friends; results/: folders of fio results read); stages: one probe
#: run (probe/), the dashboards evaluated and drawn (preview/); commands: the packages a
#: command of cli/ runs, which nothing but cli/ imports; cli/; the entry point.
LAYERS: tuple[Layer, ...] = (
    Layer(
        "foundation",
        (
            ROOT,
            "fioprobe.errors",
            "fioprobe.text",
            "fioprobe.bounds",
            "fioprobe.thresholds",
            "fioprobe.grouping",
            "fioprobe.processes",
            "fioprobe.exchange",
        ),
        apart=False,
    ),
    Layer("kube", ("fioprobe.kube",)),
    Layer("provision", ("fioprobe.provision",)),
    Layer("fio", ("fioprobe.fio",)),
    Layer("metrics", ("fioprobe.metrics",)),
    Layer("gateway", ("fioprobe.gateway",)),
    Layer("publish", ("fioprobe.publish",)),
    Layer("shared", ("fioprobe.target", "fioprobe.services", "fioprobe.results")),
    Layer("stages", ("fioprobe.probe", "fioprobe.preview")),
    Layer(
        "commands",
        (
            "fioprobe.continuous",
            "fioprobe.demo",
            "fioprobe.distributed",
            "fioprobe.offline",
            "fioprobe.report",
        ),
    ),
    Layer("cli", ("fioprobe.cli",)),
    Layer("entry point", ("fioprobe.__main__",)),
)

#: Each stage's modules, lowest first: a module imports only modules placed before it. A
#: package's own `__init__` is placed like any module. The foundation's stage is the root.
ORDER: dict[str, tuple[str, ...]] = {
    ROOT: (
        "__init__", "errors", "text", "bounds", "thresholds", "grouping", "processes",
        "exchange", "__main__",
    ),
    "fioprobe.kube": ("__init__", "errors", "stream", "client", "nodes", "watch"),
    "fioprobe.provision": (
        "__init__", "shape", "timestamps", "objects", "attach", "observations", "steps",
        "events", "reasons", "cross_check", "workload", "follow", "runner",
    ),
    "fioprobe.fio": (
        "__init__", "output_error", "model", "repeats", "parse", "clientserver", "profiles",
        "execute",
    ),
    "fioprobe.metrics": (
        "__init__", "exposition", "table", "histogram", "totals", "collector", "distributed",
        "provision",
    ),
    "fioprobe.gateway": (
        "__init__", "deadline", "defaults", "settings", "transport", "api", "readback", "shards",
    ),
    "fioprobe.publish": ("__init__", "statefile", "state", "outcome", "provision"),
    "fioprobe.target": (
        "__init__", "quantity", "volumes", "config", "childproc", "stuck", "etcd_filesystem",
    ),
    "fioprobe.services": ("__init__", "servers"),
    "fioprobe.results": ("__init__", "discover", "progress", "load", "run_time"),
    "fioprobe.probe": (
        "__init__", "signals", "slot", "directory", "model", "credits", "volume_worker",
        "volume_part", "volume_run", "prober", "runner", "stagger", "members", "schedule", "gc",
        "prepare",
    ),
    "fioprobe.preview": ("__init__", "evaluate", "draw"),
    "fioprobe.continuous": (
        "__init__", "protocol", "writer", "device", "state", "collector", "http", "stream",
        "command",
    ),
    "fioprobe.demo": ("__init__", "slowdisk", "chain"),
    "fioprobe.distributed": (
        "__init__", "plan", "jobs", "failures", "servers", "liveness", "silence", "client",
        "archive", "summary", "push", "benchmark",
    ),
    "fioprobe.offline": ("__init__", "convert", "backfill"),
    "fioprobe.report": (
        "__init__", "options", "format", "significance", "analysis", "verdict", "content",
        "document", "charts", "tables", "verdict_view", "report_json", "sections", "build",
    ),
    "fioprobe.cli": (
        "__init__", "argtypes", "options", "backfill_cmd", "continuous_cmd", "convert_cmd",
        "demo_cmd", "distributed_cmd", "gc_cmd", "prepare_cmd", "probe_cmd", "provision_cmd",
        "push_cmd",
        "report_cmd", "run_cmd", "main",
    ),
}  # fmt: skip


#: The provisioning probe's model: what a run's objects mean, computed from their JSON alone.
PROVISION_MODEL = (
    "shape", "timestamps", "objects", "attach", "observations", "steps", "events", "reasons",
    "cross_check", "workload",
)  # fmt: skip


class Rule(NamedTuple):
    """`importers` (modules or packages) import nothing of `forbidden`, because `why`."""

    importers: tuple[str, ...]
    forbidden: tuple[str, ...]
    why: str


#: What the layers alone allow but the design does not. Names, not files: a rule holds for
#: a module from the moment it exists.
RULES: tuple[Rule, ...] = (
    Rule(
        (
            "fioprobe.gateway.transport",
            "fioprobe.gateway.deadline",
            "fioprobe.gateway.defaults",
            "fioprobe.gateway.shards",
        ),
        ("fioprobe.metrics", "fioprobe.fio", "fioprobe.publish"),
        "the transport knows no metric",
    ),
    Rule(
        ("fioprobe.report", "fioprobe.offline", "fioprobe.results", "fioprobe.metrics.collector"),
        ("fioprobe.publish",),
        "report, backfill, convert, the results they read and the collector import no state module",
    ),
    Rule(
        tuple(f"fioprobe.provision.{name}" for name in PROVISION_MODEL),
        ("fioprobe.kube",),
        "the provisioning model is pure (no I/O, no clock): the API is follow's and runner's",
    ),
    Rule(
        ("fioprobe.continuous",),
        ("fioprobe.probe",),
        "the stream and the scheduled probe are two paths: what both need lives in target/",
    ),
)

#: Imports that break a layer, an order or a rule today: (importer, imported module) -> why
#: it stays. Empty: every import follows them. A new entry needs a reason a reviewer accepts.
EXCEPTIONS: dict[tuple[str, str], str] = {}


class Import(NamedTuple):
    line: int
    name: str  # the dotted name as written, made absolute: a module, or a module.attribute


def module_name(path: Path, package: Path) -> str:
    """The dotted name of a source file under `package` (a package's __init__ is the package)."""
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_names(path: Path, package: Path) -> list[Import]:
    """Every import of one source file, nested and type-only ones too, as absolute dotted
    names: `import a.b` gives a.b, `from a import b` gives a.b (a module or a name in a),
    `from .. import c` is resolved against the file's own package."""
    name = module_name(path, package)
    here = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Import] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.extend(Import(node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = here.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, node.module] if node.module else parts)
            else:
                base = node.module or ""
            found.extend(Import(node.lineno, f"{base}.{alias.name}") for alias in node.names)
    return found


def package_modules(package: Path) -> dict[str, Path]:
    return {module_name(path, package): path for path in sorted(package.rglob("*.py"))}


def resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The deepest module of the package `name` is or lies in; None outside the package."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def within(module: str, unit: str) -> bool:
    """Whether `module` is `unit` or lies in it (the package root contains only itself)."""
    return module == unit or (unit != ROOT and module.startswith(unit + "."))


def layer_of(module: str) -> int | None:
    for index, layer in enumerate(LAYERS):
        if any(within(module, unit) for unit in layer.units):
            return index
    return None


def unit_of(module: str, layer: int) -> str:
    return next(unit for unit in LAYERS[layer].units if within(module, unit))


def stage_of(module: str, modules: dict[str, Path]) -> tuple[str, str]:
    """(stage, the module's name in it): a folder and its file's name (`__init__` for the
    package itself), or the root for the foundation's top-level modules."""
    parts = module.split(".")
    if len(parts) > 2:
        return ".".join(parts[:2]), ".".join(parts[2:])
    if module == ROOT:
        return ROOT, "__init__"
    if modules[module].name == "__init__.py":
        return module, "__init__"
    return ROOT, parts[1]


def graph(package: Path) -> dict[str, dict[str, int]]:
    """importer -> {imported module: the first line importing it}, within the package."""
    modules = package_modules(package)
    edges: dict[str, dict[str, int]] = {}
    for importer, path in modules.items():
        targets = edges.setdefault(importer, {})
        for line, name in imported_names(path, package):
            target = resolve(name, modules)
            if target is not None and target != importer:
                targets.setdefault(target, line)
    return edges


def cycles(package: Path) -> list[list[str]]:
    """Every set of modules that import each other round in a circle (Tarjan), sorted."""
    edges = graph(package)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in edges.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found)


def violations(package: Path) -> dict[tuple[str, str], str]:
    """(importer, imported module) -> "file:line: what is broken", for every import
    against a layer, a stage's order or a rule."""
    modules = package_modules(package)
    found: dict[tuple[str, str], str] = {}
    for importer, targets in graph(package).items():
        path = modules[importer]
        own = layer_of(importer)
        for target, line in targets.items():
            where = f"{path.relative_to(package.parent)}:{line}: {importer} imports {target}"
            other = layer_of(target)
            if own is not None and other is not None and other > own:
                found.setdefault(
                    (importer, target),
                    f"{where}: {LAYERS[own].name} may not import {LAYERS[other].name}, "
                    "a layer above",
                )
            elif own is not None and own == other and LAYERS[own].apart:
                mine, theirs = unit_of(importer, own), unit_of(target, own)
                if mine != theirs:
                    found.setdefault(
                        (importer, target),
                        f"{where}: {mine} and {theirs} stand side by side "
                        f"({LAYERS[own].name}): what both need belongs a layer below",
                    )
            stage, name = stage_of(importer, modules)
            target_stage, target_name = stage_of(target, modules)
            order = ORDER.get(stage, ())
            if (
                stage == target_stage
                and name in order
                and target_name in order
                and order.index(target_name) > order.index(name)
            ):
                found.setdefault(
                    (importer, target),
                    f"{where}: {stage}'s order places {target_name} above {name}",
                )
            for rule in RULES:
                if any(within(importer, unit) for unit in rule.importers) and any(
                    within(target, unit) for unit in rule.forbidden
                ):
                    found.setdefault((importer, target), f"{where}: {rule.why}")
    return found


def test_every_module_has_a_layer_and_a_place() -> None:
    """A new folder, top-level module or file must be placed, or it would be checked by
    nothing: in a layer, and in its stage's order."""
    modules = package_modules(PACKAGE)
    assert [m for m in modules if layer_of(m) is None] == []
    unplaced = []
    for module in modules:
        stage, name = stage_of(module, modules)
        if name not in ORDER.get(stage, ()):
            unplaced.append(f"{stage}: {name}")
    assert unplaced == []
    named = {stage_of(m, modules) for m in modules}
    stale = [f"{stage}: {name}" for stage, names in ORDER.items() for name in names]
    assert [s for s in stale if tuple(s.split(": ")) not in named] == []


def test_imports_follow_the_layers_orders_and_rules() -> None:
    found = violations(PACKAGE)
    assert sorted(v for key, v in found.items() if key not in EXCEPTIONS) == []


def test_there_are_no_exceptions() -> None:
    assert EXCEPTIONS == {}


def test_every_exception_is_still_needed() -> None:
    """An exception whose import is gone (or now allowed) is removed, not kept."""
    assert sorted(set(EXCEPTIONS) - set(violations(PACKAGE))) == []


def test_no_import_cycle_late_imports_included() -> None:
    assert cycles(PACKAGE) == []


def test_cli_is_alone_on_top() -> None:
    """cli/ alone in the top layer, under only `python -m fioprobe`; the demo is one command
    among the others, and the probe a stage below them."""
    assert LAYERS[-1] == Layer("entry point", ("fioprobe.__main__",))
    assert LAYERS[-2] == Layer("cli", ("fioprobe.cli",))
    top = len(LAYERS) - 2
    assert layer_of("fioprobe.cli.main") == top
    assert layer_of("fioprobe.demo.chain") == layer_of("fioprobe.report.build") == top - 1
    assert layer_of("fioprobe.probe.prober") == top - 2


# --- each check fails on a seeded violation --------------------------------------------------


def seeded(tmp_path: Path, file: str, source: str) -> dict[tuple[str, str], str]:
    """The violations of a copy of the package with `source` appended to `file`."""
    package = tmp_path / ROOT
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    path = package / file
    path.write_text(path.read_text() + "\n" + source)
    return violations(package)


def test_a_command_package_importing_another_fails(tmp_path: Path) -> None:
    found = seeded(tmp_path, "demo/chain.py", "from fioprobe.report import build\n")
    assert "stand side by side" in found["fioprobe.demo.chain", "fioprobe.report.build"]


def test_the_provisioning_model_importing_kube_fails(tmp_path: Path) -> None:
    """The provisioning computation stays pure: the API client is the runner's business."""
    found = seeded(tmp_path, "provision/steps.py", "from fioprobe.kube import client\n")
    assert "model is pure" in found["fioprobe.provision.steps", "fioprobe.kube.client"]


def test_kube_importing_provision_fails(tmp_path: Path) -> None:
    found = seeded(tmp_path, "kube/client.py", "from fioprobe.provision import steps\n")
    assert "a layer above" in found["fioprobe.kube.client", "fioprobe.provision.steps"]


def test_importing_cli_from_below_fails(tmp_path: Path) -> None:
    found = seeded(tmp_path, "report/build.py", "from fioprobe.cli import main\n")
    assert "a layer above" in found["fioprobe.report.build", "fioprobe.cli.main"]


def test_an_import_against_a_stage_order_fails(tmp_path: Path) -> None:
    found = seeded(tmp_path, "probe/directory.py", "from fioprobe.probe import runner\n")
    assert "order places runner above" in found["fioprobe.probe.directory", "fioprobe.probe.runner"]


def test_a_rule_fails(tmp_path: Path) -> None:
    found = seeded(tmp_path, "continuous/stream.py", "from fioprobe.probe import slot\n")
    assert "two paths" in found["fioprobe.continuous.stream", "fioprobe.probe.slot"]


def test_a_late_import_that_closes_a_cycle_fails(tmp_path: Path) -> None:
    """The volume part once imported the prober back inside a function, the prober
    importing it at the top: both checks see such a pair."""
    source = "def publish():\n    from fioprobe.probe.prober import publish_result\n"
    found = seeded(tmp_path, "probe/volume_part.py", source)
    pair = ("fioprobe.probe.volume_part", "fioprobe.probe.prober")
    assert "order places prober above" in found[pair]
    cycle = cycles(tmp_path / ROOT)
    assert len(cycle) == 1 and set(pair) <= set(cycle[0])


def test_the_scan_sees_every_import_form(tmp_path: Path) -> None:
    """The checks above could pass by reading nothing: every import form is seen, resolved
    to its module, and judged."""
    package = tmp_path / "fioprobe"
    for folder in ("fio", "metrics", "gateway", "publish", "probe", "cli", "report", "results"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    for module in (
        "__init__", "errors", "text", "fio/model", "metrics/totals", "gateway/transport",
        "publish/state", "probe/config", "cli/main", "report/load", "results/load",
    ):  # fmt: skip
        (package / f"{module}.py").touch()
    source = package / "fio" / "parse.py"
    source.write_text(
        "import os\n"
        "import fioprobe.errors\n"
        "from fioprobe import text\n"
        "from fioprobe.metrics.totals import GroupTotals\n"
        "from . import model\n"
        "from ..publish import state\n"
        "from .. import probe\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from fioprobe.probe.config import Config\n"
        "def later():\n"
        "    import fioprobe.cli.main as main\n"
        "class Late:\n"
        "    def method(self):\n"
        "        from ..gateway.transport import Transport\n"
    )
    (package / "gateway" / "transport.py").write_text("from fioprobe.metrics import totals\n")
    (package / "report" / "load.py").write_text("from fioprobe.publish.state import load\n")
    (package / "results" / "load.py").write_text("from fioprobe.publish.state import load\n")

    modules = package_modules(package)
    seen = {resolve(name, modules) for _, name in imported_names(source, package)}
    assert seen == {
        None,  # os, typing: not the package's
        "fioprobe.errors",
        "fioprobe.text",
        "fioprobe.metrics.totals",
        "fioprobe.fio.model",
        "fioprobe.publish.state",
        "fioprobe.probe",
        "fioprobe.probe.config",
        "fioprobe.cli.main",
        "fioprobe.gateway.transport",
    }
    assert set(violations(package)) == {
        ("fioprobe.fio.parse", "fioprobe.metrics.totals"),
        ("fioprobe.fio.parse", "fioprobe.publish.state"),
        ("fioprobe.fio.parse", "fioprobe.probe"),
        ("fioprobe.fio.parse", "fioprobe.probe.config"),
        ("fioprobe.fio.parse", "fioprobe.cli.main"),
        ("fioprobe.fio.parse", "fioprobe.gateway.transport"),
        ("fioprobe.gateway.transport", "fioprobe.metrics.totals"),  # a rule, not a layer
        ("fioprobe.report.load", "fioprobe.publish.state"),  # a rule, not a layer
        ("fioprobe.results.load", "fioprobe.publish.state"),  # a rule: results sit above publish
    }
