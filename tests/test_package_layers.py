"""The package's stages import each other in one direction only: down the data flow.

Why: fioprobe runs fio, reads its output, turns it into metrics, pushes them and keeps its
totals between runs; each stage is a folder, and a folder that imports a later one drags it
(and whatever that one loads: yaml, the probe's safety rules, the state file) into every
command that only needs the earlier one. Such an import passes every other test, so this one
reads the source: every import, absolute or relative, at the top, nested in a function or
under `if TYPE_CHECKING:` (a type-only import still ties one stage's interface to another's),
resolved to the module it names.

The layers are data below, lowest first; a module imports its own layer and the ones below
it. `RULES` adds what the layers alone do not say, and `EXCEPTIONS` lists every import that
breaks them today, each with why it is still there: an entry that no longer matches an
import fails too, so the list only shrinks.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

from conftest import REPO

PACKAGE = REPO / "exporter" / "fioprobe"
ROOT = "fioprobe"

#: The layers, lowest first: foundation (errors, text, bounds: what every stage shares);
#: kube/ reads the Kubernetes API (for probe/ and continuous/; it needs no other stage);
#: fio/ runs and reads fio; metrics/ is where a fio field becomes a metric; gateway/ is the
#: Pushgateway client; publish/ keeps the totals between runs and pushes them; probe/ is one
#: probe run; the consumers are the commands and what only they use. Each entry is a module
#: or a package (then all its modules).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "foundation",
        (
            ROOT,
            "fioprobe.errors",
            "fioprobe.text",
            "fioprobe.bounds",
            "fioprobe.thresholds",
            "fioprobe.grouping",
            "fioprobe.processes",
        ),
    ),
    ("kube", ("fioprobe.kube",)),
    ("fio", ("fioprobe.fio",)),
    ("metrics", ("fioprobe.metrics",)),
    ("gateway", ("fioprobe.gateway",)),
    ("publish", ("fioprobe.publish",)),
    ("probe", ("fioprobe.probe",)),
    (
        "consumers",
        (
            "fioprobe.cli",
            "fioprobe.__main__",
            "fioprobe.demo",
            "fioprobe.preview",
            "fioprobe.continuous",
            "fioprobe.report",
            "fioprobe.offline",
            "fioprobe.distributed",
        ),
    ),
)


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
        ("fioprobe.report", "fioprobe.offline", "fioprobe.metrics.collector"),
        ("fioprobe.publish",),
        "report, backfill, convert and the collector import no state module",
    ),
)

#: Imports that break a layer or a rule today: (importer, imported module) -> why it stays.
#: Empty: every import follows the layers. A new entry needs a reason a reviewer accepts.
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
    for index, (_, units) in enumerate(LAYERS):
        if any(within(module, unit) for unit in units):
            return index
    return None


def violations(package: Path) -> dict[tuple[str, str], str]:
    """(importer, imported module) -> "file:line: what is broken", for every import
    against a layer or a rule."""
    modules = package_modules(package)
    found: dict[tuple[str, str], str] = {}
    for importer, path in modules.items():
        own = layer_of(importer)
        for line, name in imported_names(path, package):
            target = resolve(name, modules)
            if target is None or target == importer:
                continue
            where = f"{path.relative_to(package.parent)}:{line}: {importer} imports {target}"
            other = layer_of(target)
            if own is not None and other is not None and other > own:
                found.setdefault(
                    (importer, target),
                    f"{where}: {LAYERS[own][0]} may not import {LAYERS[other][0]}, a layer above",
                )
            for rule in RULES:
                if any(within(importer, unit) for unit in rule.importers) and any(
                    within(target, unit) for unit in rule.forbidden
                ):
                    found.setdefault((importer, target), f"{where}: {rule.why}")
    return found


def test_every_module_has_a_layer() -> None:
    """A new folder or top-level module must be placed, or it would be checked by nothing."""
    assert [m for m in package_modules(PACKAGE) if layer_of(m) is None] == []


def test_imports_follow_the_layers_and_rules() -> None:
    found = violations(PACKAGE)
    assert sorted(v for key, v in found.items() if key not in EXCEPTIONS) == []


def test_every_exception_is_still_needed() -> None:
    """An exception whose import is gone (or now allowed) is removed, not kept."""
    assert sorted(set(EXCEPTIONS) - set(violations(PACKAGE))) == []


def test_cli_and_demo_are_above_everything_else() -> None:
    """Nothing below the consumers imports cli/ or demo/: the layer table puts them on top."""
    top = len(LAYERS) - 1
    assert layer_of("fioprobe.cli.main") == layer_of("fioprobe.demo.chain") == top
    assert layer_of("fioprobe.probe.prober") == top - 1


def test_the_scan_sees_every_import_form(tmp_path: Path) -> None:
    """The checks above could pass by reading nothing: every import form is seen, resolved
    to its module, and judged."""
    package = tmp_path / "fioprobe"
    for folder in ("fio", "metrics", "gateway", "publish", "probe", "cli", "report"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    for module in (
        "__init__", "errors", "text", "fio/model", "metrics/totals", "gateway/transport",
        "publish/state", "probe/config", "cli/main", "report/load",
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
    }
