"""Static checks of the Grafana dashboards (dashboards/*.libsonnet -> dashboards/out/*.json).

No Grafana server can run here, so what Grafana would reject, or silently render wrong, is
checked without it: the JSON schema generated from @grafana/schema (scripts/setup.d/
20-grafana-schema.sh), the layout, units and descriptions, the template variables, and
that every metric a query names is one the exporter produces or a documented external one.
The integration test against real pushed data is tests/mixin/test_dashboards_live.py.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from support.paths import GO_JSONNET, REPO
from support.promql import VARIABLE_REF, metric_names

DASHBOARDS = REPO / "dashboards"
OUT = DASHBOARDS / "out"
SCHEMA_DIR = REPO / ".tools" / "grafana-schema"
EXTERNAL = json.loads((DASHBOARDS / "external-metrics.json").read_text())
GENERATOR = REPO / "scripts" / "generate.d" / "20-dashboards.sh"
#: The generators' interpreter: what the tests render is what dashboards/out holds.

#: The uids are a contract: links, bookmarks and provisioning refer to them.
EXPECTED_UIDS = {
    "fioprobe-overview.json": "fioprobe-overview",
    "fioprobe-comparison.json": "fioprobe-comparison",
    "fioprobe-etcd-disks.json": "fioprobe-etcd-disks",
}

#: Variables Grafana defines itself.
BUILTIN_VARIABLES = {
    "__interval",
    "__interval_ms",
    "__rate_interval",
    "__range",
    "__range_s",
    "__range_ms",
    "__all",
    "__name",
    "__from",
    "__to",
    "__dashboard",
}

#: Deprecated or removed panel plugins (the old graph, singlestat, table and piechart).
DEPRECATED_PANEL_TYPES = {"graph", "singlestat", "table-old", "grafana-piechart-panel"}

Json = dict[str, Any]


@cache
def _dashboards() -> dict[str, Json]:
    """The committed rendered dashboards by file name (what users deploy)."""
    files = sorted(OUT.glob("*.json"))
    return {p.name: json.loads(p.read_text()) for p in files}


def _render(config: str = "{}") -> dict[str, Json]:
    """The mixin's grafanaDashboards rendered with `config` merged into its _config."""
    code = f"((import 'mixin.libsonnet') + {{ _config+:: {config} }}).grafanaDashboards"
    result = subprocess.run(
        [str(GO_JSONNET), "-J", ".", "-J", "vendor", "-e", code],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    )
    rendered: dict[str, Json] = json.loads(result.stdout)
    return rendered


def _panels(dashboard: Json) -> Iterator[Json]:
    """Every panel, including those nested in collapsed rows."""
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def _data_panels(dashboard: Json) -> Iterator[Json]:
    """Panels that show data (rows are only headings: no unit, no description in the schema)."""
    return (p for p in _panels(dashboard) if p["type"] != "row")


def _targets(dashboard: Json) -> Iterator[tuple[Json, Json]]:
    for panel in _data_panels(dashboard):
        for target in panel.get("targets", []):
            yield panel, target


def _variables(dashboard: Json) -> list[Json]:
    variables: list[Json] = dashboard.get("templating", {}).get("list", [])
    return variables


def _variable_query(variable: Json) -> str:
    query = variable.get("query", "")
    return query if isinstance(query, str) else str(query.get("query", ""))


@cache
def _schema(name: str) -> Json:
    path = SCHEMA_DIR / name
    if not path.exists():
        pytest.fail(
            f"{path} is missing: run scripts/setup.sh (scripts/setup.d/20-grafana-schema.sh)"
        )
    schema: Json = json.loads(path.read_text())
    return schema


def _without_required(schema: Any) -> Any:
    """A copy of a JSON schema with every `required` list removed.

    Why: the panel plugins' Options/FieldConfig types are generated from Grafana's CUE panel
    schemas, where fields with defaults are non-optional (stat's `wideLayout`, bargauge's
    `sizing`, table's `frameIndex`...). Grafana fills those defaults in when it loads a
    panel, and dashboards exported by Grafana itself omit many of them, so their absence is
    not an error. Everything else stays: unknown keys (additionalProperties: false), types
    and enum values are still checked, which is what catches typos.
    """
    if isinstance(schema, dict):
        return {k: _without_required(v) for k, v in schema.items() if k != "required"}
    if isinstance(schema, list):
        return [_without_required(v) for v in schema]
    return schema


def test_every_dashboard_is_rendered() -> None:
    """The three dashboards are committed, and nothing else is in out/."""
    assert set(_dashboards()) == set(EXPECTED_UIDS)


@pytest.mark.parametrize("name", sorted(EXPECTED_UIDS))
def test_validates_against_grafana_schema(name: str) -> None:
    """Each dashboard is a valid Grafana dashboard (@grafana/schema's Dashboard type)."""
    validator = jsonschema.Draft7Validator(_schema("dashboard.json"))
    errors = [
        f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(_dashboards()[name])
    ]
    assert errors == []


def test_schema_rejects_broken_dashboards() -> None:
    """The schema really constrains panels: a misspelt key or a wrong type is an error."""
    validator = jsonschema.Draft7Validator(_schema("dashboard.json"))
    dashboard = _dashboards()["fioprobe-overview.json"]
    panel_index = next(i for i, p in enumerate(dashboard["panels"]) if p["type"] != "row")
    misspelt = copy.deepcopy(dashboard)
    misspelt["panels"][panel_index]["descripton"] = "typo"
    wrong_type = copy.deepcopy(dashboard)
    wrong_type["panels"][panel_index]["gridPos"]["w"] = "12"
    no_version = copy.deepcopy(dashboard)
    del no_version["schemaVersion"]
    for broken in (misspelt, wrong_type, no_version):
        assert not validator.is_valid(broken)


@pytest.mark.parametrize("name", sorted(EXPECTED_UIDS))
def test_panel_options_match_plugin_schemas(name: str) -> None:
    """Panel `options` and `fieldConfig.defaults.custom` follow their plugin's types."""
    errors = []
    for panel in _data_panels(_dashboards()[name]):
        parts = [
            ("options", panel.get("options", {})),
            ("fieldconfig", panel.get("fieldConfig", {}).get("defaults", {}).get("custom", {})),
        ]
        for kind, instance in parts:
            file = f"panel-{panel['type']}.{kind}.json"
            if kind == "options" or (SCHEMA_DIR / file).exists():
                schema = _without_required(_schema(file))
                for e in jsonschema.Draft7Validator(schema).iter_errors(instance):
                    errors.append(f"{panel['title']} {kind} {list(e.absolute_path)}: {e.message}")
    assert errors == []


def test_plugin_schema_check_can_fail() -> None:
    """The relaxed plugin schemas still reject an unknown option and a wrong enum value."""
    schema = _without_required(_schema("panel-timeseries.options.json"))
    validator = jsonschema.Draft7Validator(schema)
    assert validator.is_valid({"legend": {"displayMode": "table"}})
    assert not validator.is_valid({"legend": {"displayMode": "tabel"}})
    assert not validator.is_valid({"legendd": {}})


def test_uids_are_stable_and_unique() -> None:
    uids = {name: d.get("uid") for name, d in _dashboards().items()}
    assert uids == EXPECTED_UIDS
    assert len(set(uids.values())) == len(uids)
    for uid in uids.values():
        # Grafana's limit and charset for uids.
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,40}", uid), uid


@pytest.mark.parametrize("name", sorted(EXPECTED_UIDS))
def test_panels_do_not_overlap(name: str) -> None:
    """Grafana would push overlapping panels around; the layout must be the intended one."""
    rects = []
    for panel in _dashboards()[name]["panels"]:
        pos = panel["gridPos"]
        x, y, w, h = pos["x"], pos["y"], pos["w"], pos["h"]
        assert w > 0 and h > 0 and x >= 0 and y >= 0 and x + w <= 24, (panel["title"], pos)
        rects.append((panel["title"], x, y, w, h))
    for i, (t1, x1, y1, w1, h1) in enumerate(rects):
        for t2, x2, y2, w2, h2 in rects[i + 1 :]:
            overlap = x1 < x2 + w2 and x2 < x1 + w1 and y1 < y2 + h2 and y2 < y1 + h1
            assert not overlap, f"{t1!r} overlaps {t2!r}"


def test_panel_ids_are_unique() -> None:
    for name, dashboard in _dashboards().items():
        ids = [p["id"] for p in _panels(dashboard)]
        assert len(ids) == len(set(ids)), name


@pytest.mark.parametrize("name", sorted(EXPECTED_UIDS))
def test_every_panel_has_unit_and_description(name: str) -> None:
    missing = [
        p["title"]
        for p in _data_panels(_dashboards()[name])
        if not p.get("description", "").strip()
        or not p.get("fieldConfig", {}).get("defaults", {}).get("unit")
    ]
    assert missing == []


def test_no_deprecated_panel_types() -> None:
    """Timeseries, not the deprecated graph panel (nor the other removed Angular panels)."""
    types = {p["type"] for d in _dashboards().values() for p in _panels(d)}
    assert types & DEPRECATED_PANEL_TYPES == set()
    assert "timeseries" in types


def test_every_panel_and_target_uses_the_datasource_variable() -> None:
    for dashboard in _dashboards().values():
        datasource_vars = [v for v in _variables(dashboard) if v["type"] == "datasource"]
        assert [(v["name"], v["query"]) for v in datasource_vars] == [("datasource", "prometheus")]
        for panel in _data_panels(dashboard):
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
            assert panel["targets"], panel["title"]
        for panel, target in _targets(dashboard):
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]
            assert target["expr"].strip(), panel["title"]
        for variable in _variables(dashboard):
            if variable["type"] == "query":
                assert variable["datasource"]["uid"] == "${datasource}", variable["name"]


def test_every_dashboard_has_the_probe_variables() -> None:
    """docs/DESIGN.md: datasource, cluster, storageclass, node and profile variables."""
    for name, dashboard in _dashboards().items():
        names = {v["name"] for v in _variables(dashboard)}
        storageclass = (
            {"storageclass"} if "comparison" not in name else {"storageclass_a", "storageclass_b"}
        )
        assert {"datasource", "cluster", "node", "profile"} | storageclass <= names, name


def variable_references(text: str) -> set[str]:
    """Names of the Grafana variables `text` refers to ($x, ${x}, ${x:fmt}, [[x]])."""
    return {next(g for g in m.groups() if g) for m in VARIABLE_REF.finditer(text)}


def test_variable_references_parser() -> None:
    text = 'x{a=~"$cluster"}[${window}] offset ${shift:raw} [[old]] $__rate_interval {{legend}}'
    assert variable_references(text) == {"cluster", "window", "shift", "old", "__rate_interval"}


@pytest.mark.parametrize("name", sorted(EXPECTED_UIDS))
def test_template_variables_are_consistent(name: str) -> None:
    """No text refers to an undefined variable, a variable's query uses only variables
    defined before it (Grafana resolves them in order), and every variable is used."""
    dashboard = _dashboards()[name]
    variables = _variables(dashboard)
    names = [v["name"] for v in variables]
    assert len(names) == len(set(names))
    undefined: list[str] = []
    used: set[str] = set()
    for i, variable in enumerate(variables):
        refs = variable_references(_variable_query(variable))
        refs |= variable_references(json.dumps(variable.get("datasource", {})))
        used |= refs
        undefined += [
            f"variable {variable['name']}: ${r}" for r in refs - set(names[:i]) - BUILTIN_VARIABLES
        ]
    for panel in _data_panels(dashboard):
        texts = [panel["title"], panel["description"], json.dumps(panel.get("datasource", {}))]
        texts += [t["expr"] for t in panel["targets"]] + [
            t.get("legendFormat", "") for t in panel["targets"]
        ]
        for text in texts:
            refs = variable_references(text)
            used |= refs
            undefined += [
                f"panel {panel['title']!r}: ${r}" for r in refs - set(names) - BUILTIN_VARIABLES
            ]
    assert undefined == []
    assert set(names) - used == set(), "variables no panel or variable uses"


# --- Metric names -----------------------------------------------------------------------


def test_metric_names_parser() -> None:
    expr = (
        "histogram_quantile(0.99, sum by (profile, le) (rate(fioprobe_sync_latency_seconds_bucket"
        '{storageclass="$a", node=~"x|y"}[$window] offset $shift))) / on (profile) '
        "(probe:fioprobe_sync_latency_seconds:p99 > 1e-3) or vector(0) + time() - up"
    )
    assert metric_names(expr) == {
        "fioprobe_sync_latency_seconds_bucket",
        "probe:fioprobe_sync_latency_seconds:p99",
        "up",
    }
    assert metric_names('count(fioprobe_success{a="b"} == 0) or vector(0)') == {"fioprobe_success"}


def _all_metric_names() -> dict[str, set[str]]:
    """Metric name -> dashboards that query it (panels and variable queries)."""
    found: dict[str, set[str]] = {}
    for name, dashboard in _dashboards().items():
        exprs = [t["expr"] for _, t in _targets(dashboard)]
        for variable in _variables(dashboard):
            match = re.fullmatch(r"label_values\((.*),\s*\w+\)", _variable_query(variable))
            if variable["type"] == "query":
                assert match, f"{name}: unexpected variable query {_variable_query(variable)!r}"
                exprs.append(match.group(1))
        for expr in exprs:
            for metric in metric_names(expr):
                found.setdefault(metric, set()).add(name)
    return found


def test_every_metric_is_exported_or_documented_external() -> None:
    """docs/DESIGN.md: each metric a dashboard queries is produced by the exporter (its one
    metric table) or listed in dashboards/external-metrics.json."""
    from fioprobe.metrics.table import exposed_series_names

    known = exposed_series_names() | set(EXTERNAL["external"]) | set(EXTERNAL["recording_rules"])
    unknown = {m: sorted(d) for m, d in _all_metric_names().items() if m not in known}
    assert unknown == {}


def test_external_metrics_list_is_not_stale() -> None:
    """Every documented external metric is used by a dashboard, and none is an exporter one."""
    from fioprobe.metrics.table import exposed_series_names

    used = set(_all_metric_names())
    documented = set(EXTERNAL["external"]) | set(EXTERNAL["recording_rules"])
    assert set(EXTERNAL["external"]) <= used
    assert documented & exposed_series_names() == set()
    for file, panels in EXTERNAL["needs_external_data"].items():
        titles = {p["title"] for p in _data_panels(_dashboards()[file])}
        assert set(panels) <= titles, file


def test_recording_rules_used_are_recorded_by_the_mixin() -> None:
    """The probe:* series the dashboards read are recorded by the mixin's own rules."""
    code = (
        "[r.record for g in (import 'mixin.libsonnet').prometheusRules.groups"
        " for r in g.rules if std.objectHas(r, 'record')]"
    )
    result = subprocess.run(
        [str(GO_JSONNET), "-J", ".", "-e", code],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    )
    recorded = set(json.loads(result.stdout))
    used = {m for m in _all_metric_names() if ":" in m}
    assert used, "the dashboards should use the shared recording rules"
    assert used <= recorded
    assert set(EXTERNAL["recording_rules"]) <= recorded


def test_no_fioprobe_query_depends_on_job_or_instance() -> None:
    """OpenShift user-workload monitoring renames job/instance of pushed series."""
    external = set(EXTERNAL["external"])
    for name, dashboard in _dashboards().items():
        exprs = [t["expr"] for _, t in _targets(dashboard)] + [
            _variable_query(v) for v in _variables(dashboard)
        ]
        for expr in exprs:
            if metric_names(expr) & external:
                continue  # other exporters' series keep their job/instance
            assert not re.search(r"\b(exported_)?(job|instance)\b", expr), (name, expr)


# --- Configuration ------------------------------------------------------------------------


def test_cluster_label_is_configurable() -> None:
    """With clusterLabel changed, every query and variable uses the new label name."""
    rendered = _render("{ clusterLabel: 'k8s_cluster' }")
    assert set(rendered) == set(EXPECTED_UIDS)
    for name, dashboard in rendered.items():
        texts = [t["expr"] for _, t in _targets(dashboard)] + [
            _variable_query(v) for v in _variables(dashboard)
        ]
        assert not any(re.search(r'\bcluster=~"\$cluster"', t) for t in texts), name
        assert any('k8s_cluster=~"$cluster"' in t for t in texts), name
        cluster_var = next(v for v in _variables(dashboard) if v["name"] == "cluster")
        assert _variable_query(cluster_var).endswith(", k8s_cluster)")


def test_thresholds_follow_config() -> None:
    """The etcd thresholds come from config.libsonnet, the yellow line from dashboards config."""
    rendered = _render(
        "{ etcdFsyncP99WarningSeconds: 0.02, dashboards+: { latencyYellowSeconds: 0.004 } }"
    )
    steps = [
        s["value"]
        for p in _data_panels(rendered["fioprobe-overview.json"])
        if p["title"] == "fsync p99 over time"
        for s in p["fieldConfig"]["defaults"]["thresholds"]["steps"]
    ]
    assert steps == [None, 0.004, 0.02]


# --- Sources and generated files --------------------------------------------------------


def test_regenerating_changes_nothing(tmp_path: Path) -> None:
    """dashboards/out is exactly what scripts/generate.d/20-dashboards.sh renders."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "stale.json").write_text("{}")  # the generator removes files nobody renders
    env = {**os.environ, "FIOPROBE_DASHBOARDS_OUT": str(out)}
    subprocess.run(["bash", str(GENERATOR)], cwd=tmp_path, env=env, check=True)
    fresh = {p.name: p.read_text() for p in sorted(out.iterdir())}
    committed = {p.name: p.read_text() for p in sorted(OUT.iterdir())}
    assert fresh.keys() == committed.keys()
    for name, text in fresh.items():
        assert text == committed[name], f"{name} is stale: run scripts/generate.sh"


def test_layout_wraps_and_starts_rows_on_new_lines() -> None:
    """common.libsonnet's layout: panels fill a line of 24, a wrapped line starts below the
    tallest panel of the line before, and a row is a full-width line of its own."""
    code = """
      local k = (import 'dashboards/common.libsonnet')((import 'mixin.libsonnet')._config);
      [p.gridPos for p in k.layout([
        { type: 'stat', gridPos: { w: 16, h: 4 } },
        { type: 'stat' },
        { type: 'stat', gridPos: { w: 6, h: 3 } },
        { type: 'row' },
        { type: 'stat', gridPos: { w: 24, h: 2 } },
      ], width=8, height=8)]
    """
    result = subprocess.run(
        [str(GO_JSONNET), "-J", ".", "-J", "vendor", "-e", code],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    )
    assert json.loads(result.stdout) == [
        {"x": 0, "y": 0, "w": 16, "h": 4},
        {"x": 16, "y": 0, "w": 8, "h": 8},
        {"x": 0, "y": 8, "w": 6, "h": 3},
        {"x": 0, "y": 11, "w": 24, "h": 1},
        {"x": 0, "y": 12, "w": 24, "h": 2},
    ]


def test_dashboards_are_built_on_the_vendored_grafonnet() -> None:
    """grafonnet comes from jsonnet-bundler (jsonnetfile.json, its lock, vendor/), pinned to
    a commit, and no local stand-in for it is left."""
    assert not (DASHBOARDS / "lib").exists()
    (entry,) = [
        d
        for d in json.loads((REPO / "jsonnetfile.json").read_text())["dependencies"]
        if d["source"]["git"]["remote"] == "https://github.com/grafana/grafonnet.git"
    ]
    assert entry["source"]["git"]["subdir"] == "gen/grafonnet-v11.4.0"
    import_line = f"import 'github.com/grafana/grafonnet/{entry['source']['git']['subdir']}/"
    assert import_line in (DASHBOARDS / "g.libsonnet").read_text()
    lock = json.loads((REPO / "jsonnetfile.lock.json").read_text())["dependencies"]
    locked = {d["source"]["git"]["remote"]: d for d in lock}
    assert re.fullmatch(r"[0-9a-f]{40}", locked[entry["source"]["git"]["remote"]]["version"])
    for path in DASHBOARDS.glob("*sonnet"):
        if path.name != "g.libsonnet":  # the one import, so the version is named once
            assert "import 'github.com/grafana/" not in path.read_text(), path


# --- What each panel's number is -----------------------------------------------------------

#: A latency percentile reaches the dashboards two ways: fio's exact percentile of the last
#: run (the summaries, or the recording rule probe:fioprobe_last_<op>_latency_seconds:p99
#: made from them) or a histogram estimate over a window (histogram_quantile, or the
#: recording rules made with it; the continuous stream's op reads "continuous_sync").
_LAST_RUN = re.compile(
    r'fioprobe_last_(\w+)_latency_seconds\{[^}]*quantile="([\d.]+)"'
    r"|probe:fioprobe_last_(\w+)_latency_seconds:p(\d+)"
)
_ESTIMATE = re.compile(
    r"probe:fioprobe_(?!last_)(\w+)_latency_seconds:p(\d+)"
    r"|histogram_quantile\(([\d.]+), .*?fioprobe_(\w+)_latency"
)
_RECORD_QUANTILE = {"50": "0.5", "99": "0.99", "999": "0.999"}
#: How a panel names the window of the histogram estimate it shows: the recording rules'
#: runs, the Comparison's $window, or the continuous stream's window.
_ESTIMATE_WINDOW = re.compile(
    r"histogram estimate over (the last \d+ runs \(\w+\)|each \$window|the dash"
    r"|the stream's last \w+)"
)


def _latency_kinds(panel: Json) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(op, quantile) pairs a panel shows as last-run values and as histogram estimates."""
    last, estimate = set(), set()
    for target in panel["targets"]:
        for op, q, record_op, record in _LAST_RUN.findall(target["expr"]):
            last.add((op, q) if op else (record_op, _RECORD_QUANTILE[record]))
        for op, record, q, hist_op in _ESTIMATE.findall(target["expr"]):
            estimate.add((op, _RECORD_QUANTILE[record]) if op else (hist_op, q))
    return last, estimate


def test_latency_kinds_parser() -> None:
    last, estimate = _latency_kinds(
        {
            "targets": [
                {"expr": 'max(fioprobe_last_sync_latency_seconds{a="b", quantile="0.99"})'},
                {"expr": 'probe:fioprobe_write_latency_seconds:p999{c=~"$c"}'},
                {"expr": "histogram_quantile(0.5, sum(rate(fioprobe_read_latency_seconds_bucket"},
            ]
        }
    )
    assert last == {("sync", "0.99")}
    assert estimate == {("write", "0.999"), ("read", "0.5")}
    # The last run's recorded p99 is a last-run value, not an estimate; the stream's
    # histogram is an estimate of its own op.
    last, estimate = _latency_kinds(
        {
            "targets": [
                {"expr": 'max by (node) (probe:fioprobe_last_sync_latency_seconds:p99{a="b"})'},
                {
                    "expr": "histogram_quantile(0.99, sum by (node, le) "
                    "(rate(fioprobe_continuous_sync_latency_seconds_bucket[5m])))"
                },
            ]
        }
    )
    assert last == {("sync", "0.99")}
    assert estimate == {("continuous_sync", "0.99")}


@pytest.mark.parametrize("name", sorted(EXPECTED_UIDS))
def test_latency_panels_say_which_number_they_show(name: str) -> None:
    """Every latency panel says whether it shows the last run's exact percentile or a
    histogram estimate over which window; where one dashboard shows the same percentile
    both ways, the last-run panel and an estimate panel name each other and say that (and
    why) they differ."""
    panels = list(_data_panels(_dashboards()[name]))
    kinds = {p["title"]: _latency_kinds(p) for p in panels}
    pairs = 0
    for panel in panels:
        title, text = panel["title"], panel["description"]
        last, estimate = kinds[title]
        if estimate:
            assert _ESTIMATE_WINDOW.search(text), title
        if not last:
            continue
        assert "exact" in text and "most recent run" in text, title
        partners = [p for p in panels if last & kinds[p["title"]][1]]
        named = [p for p in partners if f'"{p["title"]}"' in text]
        assert named or not partners, f"{title!r} names none of {[p['title'] for p in partners]}"
        for partner in named:
            pairs += 1
            assert "differ" in text and "differ" in partner["description"], partner["title"]
            assert f'"{title}"' in partner["description"], (partner["title"], title)
    assert pairs >= (0 if "comparison" in name else 1)


def test_full_credit_balance_is_drawn() -> None:
    """A credit balance sits at its top (100 %) while credits are full. A hard axis maximum
    there clips that line to the plot's top edge, where nobody sees it: the top is a soft
    maximum, which Grafana's axis reaches and pads above."""
    tops = {"Modelled burst credit balance": 1, "CloudWatch BurstBalance (when exported)": 100}
    found = 0
    for dashboard in _dashboards().values():
        for panel in _data_panels(dashboard):
            if panel["title"] not in tops:
                continue
            found += 1
            defaults = panel["fieldConfig"]["defaults"]
            assert defaults["min"] == 0, panel["title"]
            assert "max" not in defaults, (panel["title"], defaults["max"])
            assert defaults["custom"]["axisSoftMax"] == tops[panel["title"]], panel["title"]
    assert found == 3  # the modelled balance on Overview and etcd disks, CloudWatch's


# --- Repeats, burst credits, probe health -------------------------------------------------


def _lines(dashboard: Json) -> dict[int, list[str]]:
    """Titles of the panels on each grid line (y)."""
    lines: dict[int, list[str]] = {}
    for panel in dashboard["panels"]:
        pos = panel["gridPos"]
        for y in range(pos["y"], pos["y"] + pos["h"]):
            lines.setdefault(y, []).append(panel["title"])
    return lines


@pytest.mark.parametrize("name", sorted(EXPECTED_UIDS))
def test_repeated_panels_are_well_formed(name: str) -> None:
    """A repeated panel repeats over a multi-value variable its queries and title use, and
    sits alone on its lines: Grafana lays its copies over whole lines (horizontal copies are
    max(24/n, 24/maxPerRow) wide), so a neighbour would be overlapped or pushed around."""
    dashboard = _dashboards()[name]
    variables = {v["name"]: v for v in _variables(dashboard)}
    lines = _lines(dashboard)
    for panel in _data_panels(dashboard):
        repeat = panel.get("repeat")
        if not repeat:
            continue
        variable = variables[repeat]
        assert variable.get("multi") or variable.get("includeAll"), repeat
        assert repeat in variable_references(panel["title"]), panel["title"]
        for target in panel["targets"]:
            assert repeat in variable_references(target["expr"]), target["expr"]
        assert panel["repeatDirection"] in ("h", "v")
        if panel["repeatDirection"] == "h":
            assert panel["gridPos"]["w"] * panel["maxPerRow"] == 24, panel["gridPos"]
        pos = panel["gridPos"]
        for y in range(pos["y"], pos["y"] + pos["h"]):
            assert lines[y] == [panel["title"]], f"{panel['title']!r} shares line {y}: {lines[y]}"


def test_overview_heatmap_is_per_storageclass() -> None:
    """Summing the fsync buckets of every selected class mixes fast and slow disks: each
    heatmap (the probes' and the continuous streams') is repeated per StorageClass, so each
    copy sees exactly one class."""
    heatmaps = [
        p for p in _data_panels(_dashboards()["fioprobe-overview.json"]) if p["type"] == "heatmap"
    ]
    sources = set()
    for heatmap in heatmaps:
        assert heatmap["repeat"] == "storageclass"
        (target,) = heatmap["targets"]
        assert 'storageclass=~"$storageclass"' in target["expr"]
        sources |= metric_names(target["expr"])
    assert sources == {
        "fioprobe_sync_latency_seconds_bucket",
        "fioprobe_continuous_sync_latency_seconds_bucket",
    }


_VOLUME_SELECTOR = re.compile(r"(fioprobe_volume_\w+)\{([^}]*)\}")


def test_volume_gauges_are_joined_per_volume_ignoring_profile() -> None:
    """The volume gauges are pushed with every profile's group of a target: queries neither
    filter nor group them by profile, but by cluster, storageclass and node (and join on
    those), so each volume is one line and the profile variable cannot hide it."""
    found = 0
    for name, dashboard in _dashboards().items():
        for panel, target in _targets(dashboard):
            expr = target["expr"]
            for match in _VOLUME_SELECTOR.finditer(expr):
                found += 1
                assert "profile" not in match.group(2), (name, panel["title"], expr)
                by = f"by (cluster, storageclass, node) ({match.group(0)})"
                assert by in expr, (name, panel["title"], expr)
            if " and on " in expr:
                assert " and on (cluster, storageclass, node) " in expr, expr
    assert found >= 6


def test_burst_panels_cover_dedicated_storageclass_volumes() -> None:
    """The credit balance is modelled only for dedicated probe volumes, typically a PVC of a
    StorageClass (no node): the Overview's burst panels must not require a node, while the
    etcd dashboard's keep to node-local volumes like the rest of that dashboard."""
    titles = {"IOPS ceiling vs baseline and burst", "Modelled burst credit balance"}
    for name, node_local in (("fioprobe-overview.json", False), ("fioprobe-etcd-disks.json", True)):
        panels = [p for p in _data_panels(_dashboards()[name]) if p["title"] in titles]
        assert {p["title"] for p in panels} == titles, name
        for panel in panels:
            for target in panel["targets"]:
                assert ('node!=""' in target["expr"]) == node_local, (name, target["expr"])


def test_never_succeeded_probes_are_counted() -> None:
    """A probe that never succeeded has no last-success series, so the age panels miss it;
    the "Never succeeded" stat counts probes with runs and no such series."""
    (stat,) = [
        p
        for p in _data_panels(_dashboards()["fioprobe-overview.json"])
        if p["title"] == "Never succeeded"
    ]
    (target,) = stat["targets"]
    assert re.search(
        r"fioprobe_runs_total\{[^}]*\} > 0\) unless on \(cluster, storageclass, node, profile\) "
        r"fioprobe_last_success_timestamp_seconds\{",
        target["expr"],
    ), target["expr"]


@pytest.mark.parametrize("balance", [0.5, 1.0])
def test_preview_follows_the_soft_axis_maximum(balance: float) -> None:
    """The preview (fioprobe.preview.draw) follows the soft axis maximum as Grafana does:
    the axis reaches 100 % even while the balance is at half (a reader sees how far from
    full it is), and a balance at 100 % is drawn below the plot's top edge, not on it."""
    import matplotlib

    matplotlib.use("Agg")
    from fioprobe.preview.draw import draw_timeseries
    from matplotlib import pyplot

    (panel,) = [
        p
        for p in json.loads((OUT / "fioprobe-etcd-disks.json").read_text())["panels"]
        if p.get("title") == "Modelled burst credit balance"
    ]
    drawn = {  # as fioprobe.preview.evaluate hands a panel to the drawing
        **panel,
        "fieldConfig": panel["fieldConfig"]["defaults"],
        "targets": [
            {
                **panel["targets"][0],
                "result": [
                    {
                        "metric": {"node": "n1", "storageclass": "gp2"},
                        "values": [[1_800_000_000 + 60 * i, str(balance)] for i in range(10)],
                    }
                ],
            }
        ],
    }
    figure, ax = pyplot.subplots()
    try:
        draw_timeseries(ax, drawn)
        (line,) = ax.get_lines()
        full = max(line.get_ydata()) / balance  # 100 % in the axis' unit
        assert ax.get_ylim()[1] > full * 1.01, (ax.get_ylim(), full)
    finally:
        pyplot.close(figure)


# --- The continuous stream ------------------------------------------------------------------

STREAM_DASHBOARDS = ("fioprobe-overview.json", "fioprobe-etcd-disks.json")
ETCD_DISKS_JOIN = (
    'and on (cluster, storageclass, node) probe:fioprobe_etcd_disk:info{cluster=~"$cluster"}'
)
_SELECTOR = re.compile(r"([A-Za-z_:][\w:]*)\{([^}]*)\}")
_GROUPING = re.compile(r"\b(by|on)\s*\(([^)]*)\)")
_JOB_OR_INSTANCE = re.compile(r"\b(exported_)?(job|instance)\b")
#: Labels the scrape adds to the stream's series; they change when its pod is replaced.
_SCRAPE_LABELS = {"pod", "instance", "job", "namespace", "exported_job", "exported_instance"}


def _stream_targets(dashboard: Json) -> list[tuple[Json, Json]]:
    return [(p, t) for p, t in _targets(dashboard) if "fioprobe_continuous_" in t["expr"]]


def _node_exporter_targets(dashboard: Json) -> list[tuple[Json, Json]]:
    return [(p, t) for p, t in _targets(dashboard) if "node_disk_" in t["expr"]]


def _panel(dashboard: Json, title: str) -> Json:
    (panel,) = [p for p in _data_panels(dashboard) if p["title"] == title]
    return panel


@pytest.mark.parametrize("name", STREAM_DASHBOARDS)
def test_stream_panels_select_by_the_dashboard_variables(name: str) -> None:
    """Every selector of the stream's series uses the dashboard's cluster, storageclass and
    node variables (the etcd dashboard: node-local streams of disks that hold etcd, by the
    deployment's own statement); every grouping carries the cluster and never a label of
    the scrape (a replaced pod would split a stream in two)."""
    dashboard = _dashboards()[name]
    etcd = "etcd" in name
    found = _stream_targets(dashboard)
    assert len({p["title"] for p, _ in found}) >= (6 if etcd else 11), [
        p["title"] for p, _ in found
    ]
    for panel, target in found:
        expr = target["expr"]
        for metric, matchers in _SELECTOR.findall(expr):
            if not metric.startswith("fioprobe_continuous_"):
                continue
            required = ['cluster=~"$cluster"', 'storageclass=~"$storageclass"', 'node=~"$node"']
            required += ['node!=""'] if etcd else []
            for matcher in required:
                assert matcher in matchers, (panel["title"], matcher, expr)
            assert not _JOB_OR_INSTANCE.search(matchers), (panel["title"], expr)
        for keyword, labels in _GROUPING.findall(expr):
            names = {label.strip() for label in labels.split(",")}
            assert not names & _SCRAPE_LABELS, (panel["title"], expr)
            assert "cluster" in names or names == {"le"}, (panel["title"], keyword, expr)
        # Only the etcd dashboard selects streams by the etcd role, and there every one.
        assert (ETCD_DISKS_JOIN in expr) == etcd, (panel["title"], expr)


def test_etcd_stream_heatmap_is_per_etcd_disk_node() -> None:
    """The stream's heatmap cannot sum nodes: it repeats per selected node that holds an
    etcd disk ($etcd_node: hidden, narrowed by $node and the etcd disks' recording rule),
    not per node of every node-local probe (a per-node DaemonSet puts every worker there)."""
    dashboard = _dashboards()["fioprobe-etcd-disks.json"]
    variables = {v["name"]: v for v in _variables(dashboard)}
    etcd_node = variables["etcd_node"]
    assert etcd_node["hide"] == 2 and etcd_node["includeAll"] and etcd_node["multi"]
    query = _variable_query(etcd_node)
    assert query.startswith("label_values(probe:fioprobe_etcd_disk:info{"), query
    assert 'node=~"$node"' in query and 'storageclass=~"$storageclass"' in query
    (heatmap,) = [p for p in _data_panels(dashboard) if p["type"] == "heatmap"]
    assert heatmap["repeat"] == "etcd_node"
    (target,) = heatmap["targets"]
    assert 'node=~"$etcd_node"' in target["expr"]
    assert target["expr"].startswith("sum by (le) (rate(fioprobe_continuous_sync_latency_seconds")


def test_node_exporter_join_uses_the_configured_labels() -> None:
    """node_exporter names the host only by a label its scrape sets: the join copies the
    configured label (and the device) into the stream info's names and joins on the node
    the stream ran on and its disk, with the configured selector on node_exporter's series."""
    defaults = {"host": "instance", "selector": 'job="node-exporter"', "disk": "disk"}
    changed = {"host": "nodename", "selector": 'service="ne"', "disk": "device"}
    rendered = _render(
        "{ dashboards+: { nodeExporterHostLabel: 'nodename', "
        "nodeExporterSelector: 'service=\"ne\"', nodeExporterDiskLabel: 'device' } }"
    )
    for dashboards, want in ((_dashboards(), defaults), (rendered, changed)):
        for name in STREAM_DASHBOARDS:
            found = _node_exporter_targets(dashboards[name])
            assert {p["title"] for p, _ in found} == {
                "Device write await (node_exporter)",
                "Device utilisation (node_exporter)",
            }, name
            for panel, target in found:
                expr = target["expr"]
                assert f'"ran_on_node", "", "{want["host"]}")' in expr, (panel["title"], expr)
                assert f'"{want["disk"]}", "", "device")' in expr, expr
                assert f"* on (cluster, ran_on_node, {want['disk']}) group_right () " in expr
                for metric, matchers in _SELECTOR.findall(expr):
                    if metric.startswith("node_disk_"):
                        assert want["selector"] in matchers, expr
                        assert 'cluster=~"$cluster"' in matchers, expr
                    elif metric == "fioprobe_continuous_info":
                        assert f'{want["disk"]}!=""' in matchers, expr
                if want is changed:
                    assert not _JOB_OR_INSTANCE.search(expr), expr
                    assert target["legendFormat"].endswith("{{device}}"), target["legendFormat"]


def test_only_the_configured_exceptions_use_job_or_instance() -> None:
    """docs/DESIGN.md: nothing depends on job or instance, except node_exporter's host label and
    etcd's member label, both configurable. With those set to other labels, no query, legend
    or variable of any dashboard names job or instance at all."""
    rendered = _render(
        "{ dashboards+: { nodeExporterHostLabel: 'nodename', nodeExporterSelector: '', "
        "etcdMemberLabel: 'member' } }"
    )
    for name, dashboard in rendered.items():
        texts = [t["expr"] for _, t in _targets(dashboard)]
        texts += [t.get("legendFormat", "") for _, t in _targets(dashboard)]
        texts += [_variable_query(v) for v in _variables(dashboard)]
        for text in texts:
            assert not _JOB_OR_INSTANCE.search(text), (name, text)


def test_etcd_member_is_joined_to_its_node() -> None:
    """etcd's WAL fsync p99 beside each etcd disk's stream is the member on that node: its
    series name the node by etcdNodeLabel as etcdNodePrefix + node (static pods: `pod`,
    "etcd-<node>"), built from the etcd disk's node without a regex capture (`$1` would be
    a Grafana variable), over the stream's window."""
    title = "Stream fdatasync p99, probe and etcd"
    cases = [
        (_dashboards(), "pod", "label_replace(probe:fioprobe_etcd_disk:info{", '"etcd-"', "5m"),
        (
            _render(
                "{ dashboards+: { etcdNodeLabel: 'node', etcdNodePrefix: '', "
                "continuousWindow: '10m' } }"
            ),
            "node",
            "label_join(probe:fioprobe_etcd_disk:info{",
            None,
            "10m",
        ),
    ]
    for dashboards, label, inner, prefix, window in cases:
        panel = _panel(dashboards["fioprobe-etcd-disks.json"], title)
        (etcd,) = [t for t in panel["targets"] if "etcd_disk_wal_fsync" in t["expr"]]
        expr = etcd["expr"]
        assert (
            f"sum by (cluster, {label}, le) (rate(etcd_disk_wal_fsync_duration_seconds_bucket"
            in expr
        )
        assert f"[{window}])))" in expr, expr
        assert f"* on (cluster, {label}) group_right () " in expr, expr
        assert inner in expr, expr
        assert 'storageclass=~"$storageclass", node=~"$node"' in expr, expr
        assert expr.startswith("max by (cluster, storageclass, node) ("), expr
        if prefix:
            assert f'"etcd_node_prefix", {prefix}, "node", ".*")' in expr, expr
            assert f'"{label}", "", "etcd_node_prefix", "node")' in expr, expr
        else:
            assert "label_replace" not in expr, expr
        assert etcd["legendFormat"] == "etcd {{node}}"


def test_stream_thresholds_and_window_follow_config() -> None:
    """The stream's p99 lines and window, and the in-flight and stall panels' lines (the
    stream alerts' own stall and hang numbers), come from config.libsonnet."""
    rendered = _render(
        "{ etcdFsyncP99WarningSeconds: 0.02, continuousStallSeconds: 2, "
        "continuousStallWindow: '2m', continuousHangCriticalSeconds: 20, "
        "dashboards+: { continuousWindow: '10m' } }"
    )
    for dashboards, red, stall, per_minute, hang, window in (
        (_dashboards(), 0.01, 5, 5, 30, "5m"),
        (rendered, 0.02, 2, 1, 20, "10m"),
    ):
        for name in STREAM_DASHBOARDS:
            dashboard = dashboards[name]
            inflight = _panel(dashboard, "Stream in-flight age")
            defaults = inflight["fieldConfig"]["defaults"]
            assert [s["value"] for s in defaults["thresholds"]["steps"]] == [None, stall, hang]
            assert defaults["custom"]["axisSoftMax"] == hang
            assert defaults["custom"]["thresholdsStyle"]["mode"] == "dashed"
            stalls = _panel(dashboard, "Stream stall seconds per minute")["fieldConfig"]["defaults"]
            assert [s["value"] for s in stalls["thresholds"]["steps"]] == [None, per_minute]
            assert stalls["custom"]["thresholdsStyle"]["mode"] == "dashed"
            (p99,) = [
                p for p in _data_panels(dashboard) if p["title"].startswith("Stream fdatasync p99")
            ]
            steps = [s["value"] for s in p99["fieldConfig"]["defaults"]["thresholds"]["steps"]]
            assert red in steps, (name, steps)
            stream = p99["targets"][0]
            assert "fioprobe_continuous_sync_latency_seconds_bucket" in stream["expr"]
            assert f"[{window}])" in stream["expr"], stream["expr"]
            assert f"histogram estimate over the stream's last {window}" in p99["description"]
