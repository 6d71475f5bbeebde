"""Every dashboard query against real data: probes -> Pushgateway -> Prometheus (+ etcd).

Why: tests/test_dashboards.py proves the dashboards are well-formed and only name metrics
that exist, but not that a query returns anything: a wrong label, a missing `by`, a rate
window that can never hold two samples or a variable that selects nothing all render fine
and show an empty panel. Here real probes run (fio through `fioprobe run --config`) against
two targets: a plain directory (modelled as a dedicated gp2 volume of its StorageClass, a
PVC without a node), and a FUSE filesystem that delays every fsync by 15 ms
(tests/support/slowfs.py), a node-local probe with a dedicated gp2 volume model, which also
holds the data directory of a real etcd that Prometheus scrapes while a bounded loop
writes to it. A third target fails on purpose (its
directory is a symlink: `unsafe_target`), so the "failing probes" panels have data instead
of being excused. The mixin's recording rules, rendered from jsonnet in the test with a
short latency window, run in the same Prometheus.

Then every variable query and every panel query of every dashboard in dashboards/out/ is
run through Prometheus's HTTP API with Grafana's variables substituted the way Grafana
does ($__interval, $__rate_interval, $__range, "All" -> allValue, one copy of a repeated
panel per selected value), and must return at least one finite value. The exceptions are
what dashboards/external-metrics.json documents as needing data no environment here can
have (CloudWatch's BurstBalance), and the heatmap copy of the never-succeeding target's
StorageClass (EMPTY_BY_DESIGN); such a panel must then really be empty, so the list cannot
go stale unnoticed.

scripts/dashboard_pictures.py reuses `live_stack` and `collect_results` to plot every
panel's data into docs/dashboards/<uid>.png. With FIOPROBE_LIVE_RESULTS=<file> this test
also writes its query results there, so the pictures can be drawn from a test run.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fioprobe import services
from support.fixtures import fuse_unavailable
from support.slowfs import slow_fs

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow

DASHBOARDS_OUT = REPO / "dashboards" / "out"
EXTERNAL = REPO / "dashboards" / "external-metrics.json"

#: What a multi-cluster store (Thanos, Mimir) adds to every series; set here as a scrape
#: target label, because a single Prometheus's external labels are not visible to queries.
CLUSTER = "live-test"
NODE = "cp-0"
PLAIN = "plain-disk"
SLOW = "slow-fuse"
BROKEN = "broken-symlink"
FSYNC_DELAY_MS = 15.0
#: gp2 volume models: baseline 3 IOPS per GiB, burst 3,000 (DESIGN.md, Volume models).
PLAIN_GP2_GIB, SLOW_GP2_GIB = 200, 100
GP2_BURST_IOPS = 3000
#: The recording rules' rate window. The committed 30m spans six 5-minute CronJob runs;
#: here rounds are seconds apart, and 2m holds every round of the test.
LATENCY_WINDOW = "2m"
SCRAPE_INTERVAL_S = 1.0
#: Grafana's maxDataPoints for a panel about 1,000 px wide.
MAX_DATA_POINTS = 1000
#: Bounds on etcd's write load: at most this many puts, for at most this long.
ETCD_PUTS_MAX = 3000
ETCD_PUTS_PER_SECOND = 50.0
ETCD_LOAD_SECONDS = 120.0

#: Short runs, so a round takes seconds; each is well inside the profile's budget. The
#: read profiles lay their file out first, which through the Python FUSE daemon is slow:
#: smaller files there.
PROFILES = [
    {"name": "etcd-fsync", "runtime": 2},
    {"name": "randwrite-iops", "runtime": 1, "size": "16m"},
    {"name": "randread-iops", "runtime": 1, "size": "16m"},
    {"name": "seqwrite-bw", "runtime": 1, "size": "32m"},
    {"name": "seqread-bw", "runtime": 1, "size": "32m"},
    {"name": "burst-ceiling", "runtime": 1, "size": "16m"},
]


# --- the live environment -----------------------------------------------------------------


@dataclass
class LiveStack:
    prometheus_url: str
    pushgateway_url: str
    etcd_url: str
    start: float
    end: float
    etcd_puts: int


def render_recording_rules(path: Path, latency_window: str = LATENCY_WINDOW) -> Path:
    """The mixin's recording rules, rendered now with a short window (JSON is valid YAML).

    Rendered from mixin.libsonnet, not copied from alerts/out/rules.yaml, so the test
    checks the dashboards against the rules as they are in this tree.
    """
    override = json.dumps({"latencyWindow": latency_window})
    code = (
        f"local m = (import 'mixin.libsonnet') + {{ _config+:: {override} }};"
        " { groups: m.prometheusRules.groups }"
    )
    result = subprocess.run(
        ["jsonnet", "-J", str(REPO), "-e", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"rendering the recording rules failed: {result.stderr}"
    path.write_text(result.stdout)
    return path


def label_scrape_targets(prometheus: services.Service, labels: dict[str, str]) -> None:
    """Add target labels to every scrape job of a not yet started Prometheus."""
    (config_arg,) = [a for a in prometheus.command if a.startswith("--config.file=")]
    config_path = Path(config_arg.split("=", 1)[1])
    config = json.loads(config_path.read_text())
    for job in config["scrape_configs"]:
        for static in job["static_configs"]:
            static["labels"] = {**static.get("labels", {}), **labels}
    config_path.write_text(json.dumps(config, indent=2))


def write_configs(workdir: Path, gateway: str, plain: Path, slow: Path, broken: Path) -> dict:
    """One `fioprobe run` config per target, as three CronJobs would have."""
    import yaml

    targets = {
        PLAIN: {
            "name": PLAIN,
            "directory": str(plain),
            # A dedicated gp2 probe volume of a StorageClass (a PVC: no node), the case only
            # the Overview's burst panels show.
            "volume": {
                "type": "gp2",
                "size": f"{PLAIN_GP2_GIB}Gi",
                "provisioner": "ebs.csi.aws.com",
                "dedicated": True,
            },
            "profiles": PROFILES,
        },
        SLOW: {
            "name": SLOW,
            "directory": str(slow),
            "node_local": True,
            # Dedicated, so the exporter models its gp2 credit balance.
            "volume": {
                "type": "gp2",
                "size": f"{SLOW_GP2_GIB}Gi",
                "provisioner": "ebs.csi.aws.com",
                "dedicated": True,
            },
            "profiles": PROFILES,
        },
        BROKEN: {"name": BROKEN, "directory": str(broken), "profiles": ["etcd-fsync"]},
    }
    paths = {}
    for name, target in targets.items():
        target["state_dir"] = str(workdir / "state" / name)  # never through the symlink
        config = {"pushgateway": {"url": gateway, "timeout_seconds": 5}, "targets": [target]}
        paths[name] = workdir / f"{name}.yaml"
        paths[name].write_text(yaml.safe_dump(config, sort_keys=False))
    return paths


def run_round(configs: dict[str, Path], timeout: float = 90.0) -> dict[str, tuple[int, str]]:
    """`fioprobe run --config` for every target at once; returns {target: (status, stderr)}."""
    processes = {}
    for name, path in configs.items():
        command = [sys.executable, "-m", "fioprobe", "run", "--config", str(path)]
        if name == SLOW:
            command += ["--node", NODE]
        processes[name] = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO
        )
    results = {}
    deadline = time.monotonic() + timeout
    for name, process in processes.items():
        try:
            _, stderr = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for other in processes.values():
                other.kill()
                other.wait()
            raise AssertionError(
                f"fioprobe run --config {configs[name]} took over {timeout}s"
            ) from None
        results[name] = (process.returncode, stderr.decode(errors="replace"))
    return results


def _values(prometheus: str, promql: str) -> list[float]:
    return [float(s["value"][1]) for s in services.query(prometheus, promql)]


@contextlib.contextmanager
def live_stack(
    workdir: Path, rounds: int = 3, log: Callable[[str], None] = print
) -> Iterator[LiveStack]:
    """Pushgateway, etcd on slowfs, Prometheus with the rules; `rounds` probe rounds done.

    Everything is stopped by PID and unmounted on exit, also when the body raises.
    """
    with contextlib.ExitStack() as stack:
        backing, mount = workdir / "slowfs-backing", workdir / "slowfs"
        plain = workdir / "plain"
        real, broken = workdir / "broken-real", workdir / "broken"
        for path in (backing, mount, plain, real):
            path.mkdir(parents=True)
        broken.symlink_to(real)  # the runner refuses symlinks: unsafe_target
        slow = stack.enter_context(slow_fs(backing, mount, FSYNC_DELAY_MS))
        slow_probe = slow.mountpoint / "probe"
        slow_probe.mkdir()
        (slow.mountpoint / "etcd").mkdir(mode=0o700)

        gateway = services.pushgateway(workdir / "pushgateway").start()
        stack.callback(gateway.stop)
        etcd = services.etcd(workdir / "etcd-run", slow.mountpoint / "etcd").start(timeout=60)
        stack.callback(etcd.stop)
        rules = render_recording_rules(workdir / "recording-rules.json")
        prometheus = services.prometheus(
            workdir / "prometheus",
            {"pushgateway": f"127.0.0.1:{gateway.port}", "etcd": f"127.0.0.1:{etcd.port}"},
            scrape_interval=f"{SCRAPE_INTERVAL_S:g}s",
            rule_files=[rules],
        )
        label_scrape_targets(prometheus, {"cluster": CLUSTER})
        prometheus.start()
        stack.callback(prometheus.stop)
        configs = write_configs(workdir, gateway.url, plain, slow_probe, broken)
        log(f"prometheus {prometheus.url}, pushgateway {gateway.url}, etcd {etcd.url}")

        start = time.time()
        load = stack.enter_context(
            services.EtcdWriteLoad(etcd.url, rate=ETCD_PUTS_PER_SECOND,
                                   max_seconds=ETCD_LOAD_SECONDS, max_puts=ETCD_PUTS_MAX)
        )  # fmt: skip
        groups = 2 * len(PROFILES) + 1
        for number in range(1, rounds + 1):
            began = time.monotonic()
            results = run_round(configs)
            assert results[PLAIN][0] == 0, results[PLAIN][1]
            assert results[SLOW][0] == 0, results[SLOW][1]
            assert results[BROKEN][0] == 2, results[BROKEN][1]
            assert "unsafe_target" in results[BROKEN][1] or "symlink" in results[BROKEN][1]
            services.wait_for(
                lambda n=number: (
                    sum(v >= n for v in _values(prometheus.url, "fioprobe_runs_total")) == groups
                ),
                timeout=20,
                what=f"Prometheus to scrape round {number} of {groups} probe groups",
            )
            log(f"round {number}/{rounds} in {time.monotonic() - began:.1f}s")
        services.wait_for(
            lambda: (
                len(_values(prometheus.url, "probe:fioprobe_sync_latency_seconds:p99 >= 0")) >= 2
            ),
            timeout=20,
            what="the recording rules to record fsync p99 of both targets",
        )
        services.wait_for(
            lambda: _values(
                prometheus.url, "sum(rate(etcd_disk_wal_fsync_duration_seconds_count[1m])) > 0"
            ),
            timeout=20,
            what="etcd's WAL fsync histogram to grow in Prometheus",
        )
        load.__exit__()
        assert load.puts > 0, f"no etcd put succeeded: {load.errors[:3]}"
        yield LiveStack(prometheus.url, gateway.url, etcd.url, start, time.time(), load.puts)


# --- Grafana's side: variables, intervals, queries ----------------------------------------


def dashboards() -> dict[str, dict[str, Any]]:
    return {p.name: json.loads(p.read_text()) for p in sorted(DASHBOARDS_OUT.glob("*.json"))}


def needs_external_data() -> dict[str, dict[str, str]]:
    return json.loads(EXTERNAL.read_text())["needs_external_data"]


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, rows' nested (collapsed) panels included, in layout order."""
    found = []
    for panel in dashboard["panels"]:
        found.append(panel)
        found.extend(panel.get("panels", []))
    return found


def api(prometheus: str, path: str, params: dict[str, Any] | list[tuple[str, str]]) -> Any:
    """GET a Prometheus HTTP API endpoint (`fioprobe.services.prometheus_api`)."""
    return services.prometheus_api(prometheus, path, params)


_LABEL_VALUES = re.compile(r"^\s*label_values\((?:(?P<match>.+),\s*)?(?P<label>\w+)\s*\)\s*$")
_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]|\$(\w+)")


def duration(seconds: float) -> str:
    """A PromQL duration in whole milliseconds, as Grafana writes its interval variables."""
    return f"{max(1, round(seconds * 1000))}ms"


def parse_duration(text: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
    total = 0.0
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)", text):
        total += float(number) * units[unit]
    assert total > 0, f"not a duration: {text!r}"
    return total


def substitute(text: str, values: dict[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        name = next(g for g in match.groups() if g)
        assert name in values, f"variable ${name} has no value (in {text!r})"
        return values[name]

    return _VARIABLE.sub(replace, text)


def interval_variables(panel: dict[str, Any], start: float, end: float) -> dict[str, str]:
    """$__interval etc. as Grafana computes them for this panel and time range."""
    span = end - start
    minimum = parse_duration(panel["interval"]) if panel.get("interval") else SCRAPE_INTERVAL_S
    interval = max(minimum, span / panel.get("maxDataPoints", MAX_DATA_POINTS))
    rate_interval = max(interval + SCRAPE_INTERVAL_S, 4 * SCRAPE_INTERVAL_S)
    return {
        "__interval": duration(interval),
        "__interval_ms": str(round(interval * 1000)),
        "__rate_interval": duration(rate_interval),
        "__range": duration(span),
        "__range_s": str(round(span)),
        "__range_ms": str(round(span * 1000)),
    }


def resolve_variables(
    dashboard: dict[str, Any], prometheus: str, start: float, end: float, prefer: dict[str, str]
) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Values for every template variable, in order, as Grafana would set them.

    A query variable's own query must return values; "All" (the default where offered)
    becomes the variable's allValue, otherwise the preferred value (which must be among
    the returned ones), the saved current value, or the first returned value.
    """
    values: dict[str, str] = {}
    options: dict[str, list[str]] = {}
    for variable in dashboard["templating"]["list"]:
        name, kind = variable["name"], variable["type"]
        current = (variable.get("current") or {}).get("value")
        if kind == "datasource":
            values[name] = "prometheus"
            continue
        if kind == "custom":
            choices = [c.split(" : ")[-1].strip() for c in variable["query"].split(",")]
            options[name] = choices
            values[name] = prefer.get(name, current if isinstance(current, str) else choices[0])
            assert values[name] in choices, f"{name}={values[name]!r} is not one of {choices}"
            continue
        if kind in ("interval", "constant", "textbox"):
            values[name] = prefer.get(name, current or variable["query"].split(",")[0])
            continue
        assert kind == "query", f"unhandled variable type {kind} of ${name}"
        query = variable["query"]
        query = query.get("query", "") if isinstance(query, dict) else query
        match = _LABEL_VALUES.match(substitute(query, values))
        assert match, f"${name}: only label_values(...) queries are handled: {query!r}"
        params: list[tuple[str, str]] = [("start", f"{start:.3f}"), ("end", f"{end:.3f}")]
        if match["match"]:
            params.append(("match[]", match["match"]))
        found = api(prometheus, f"/api/v1/label/{match['label']}/values", params)
        options[name] = found
        assert found, f"{dashboard['uid']}: variable ${name} query {match.group(0)!r} is empty"
        if name in prefer:
            assert prefer[name] in found, f"${name}: {prefer[name]!r} not in {found}"
            values[name] = prefer[name]
        elif variable.get("includeAll") and current in (["$__all"], "$__all"):
            values[name] = variable.get("allValue") or "(" + "|".join(map(re.escape, found)) + ")"
        elif isinstance(current, str) and current in found:
            values[name] = current
        else:
            values[name] = found[0]
    return values, options


def run_target(
    prometheus: str, expr: str, instant: bool, start: float, end: float, step: float
) -> list[dict[str, Any]]:
    """The series a panel target gets: an instant vector at `end` or a range matrix."""
    if instant:
        data = api(prometheus, "/api/v1/query", {"query": expr, "time": f"{end:.3f}"})
        return [{"metric": s["metric"], "values": [s["value"]]} for s in data["result"]]
    # Grafana aligns the range to the step; aligning on `end` keeps the newest point, which
    # matters when the step (a panel's min interval) is longer than the whole range.
    steps = max(1, math.ceil((end - start) / step))
    data = api(
        prometheus,
        "/api/v1/query_range",
        {"query": expr, "start": f"{end - steps * step:.3f}", "end": f"{end:.3f}", "step": step},
    )
    return data["result"]


def finite_values(series: list[dict[str, Any]]) -> list[float]:
    return [
        float(v)
        for s in series
        for _, v in s["values"]
        if math.isfinite(float(v))  # NaN: a quantile of zero rate; not "data"
    ]


#: Values chosen for the Comparison: the plain directory against the slow FUSE one.
PREFER = {"storageclass_a": PLAIN, "storageclass_b": SLOW, "shift_b": "1ms"}

#: Grafana's grid width and a horizontal repeat's default maxPerRow.
GRID_COLUMNS = 24
DEFAULT_MAX_PER_ROW = 4


def grafana_regex_escape(value: str) -> str:
    """One value of a multi-value variable as Grafana's Prometheus data source writes it.

    Why: a repeated panel's copy sets its variable to one value, which Grafana escapes for a
    regex inside a PromQL string (prometheusSpecialRegexEscape), not to the "All" regex.
    """
    value = value.replace("\\", "\\\\\\\\")
    return re.sub(r"[$^*{}\[\]'+?.()|]", lambda m: "\\\\" + m.group(0), value)


def selected_values(
    variable: dict[str, Any], values: dict[str, str], options: dict[str, list[str]]
) -> list[str]:
    """The values a multi-value variable stands for: every option for "All", else its value."""
    name = variable["name"]
    if variable.get("includeAll") and values[name] == variable.get("allValue"):
        return list(options[name])
    return [values[name]]


def expand_repeats(
    dashboard: dict[str, Any], values: dict[str, str], options: dict[str, list[str]]
) -> list[tuple[dict[str, Any], dict[str, str]]]:
    """Panels as Grafana shows them, each with the variable values its queries see.

    Why: a panel with `repeat` is shown once per selected value of its variable, with that
    single value substituted, laid out as Grafana's DashboardModel.repeatPanel does
    (horizontal copies max(24/n, 24/maxPerRow) wide, wrapping; vertical ones stacked), and
    the panels below move down by the extra lines the copies take.
    """
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    shown: list[tuple[dict[str, Any], dict[str, str]]] = []
    shift = 0
    for panel in panels(dashboard):
        panel = {**panel, "gridPos": {**panel["gridPos"], "y": panel["gridPos"]["y"] + shift}}
        name = panel.get("repeat")
        if not name:
            shown.append((panel, values))
            continue
        assert name in variables, f"{panel['title']!r} repeats for undefined ${name}"
        chosen = selected_values(variables[name], values, options)
        pos = panel["gridPos"]
        x, y = 0.0, pos["y"]
        for index, value in enumerate(chosen):
            copy = {**panel, "gridPos": dict(pos), "repeat_value": {name: value}}
            if panel.get("repeatDirection") == "v":
                copy["gridPos"]["y"] = pos["y"] + index * pos["h"]
            else:
                per_row = panel.get("maxPerRow") or DEFAULT_MAX_PER_ROW
                width = max(GRID_COLUMNS / len(chosen), GRID_COLUMNS / per_row)
                if x + width > GRID_COLUMNS:
                    x, y = 0.0, y + pos["h"]
                copy["gridPos"].update(x=x, y=y, w=width)
                x += width
            copy["title"] = substitute(panel["title"], {**values, name: value})
            shown.append((copy, {**values, name: grafana_regex_escape(value)}))
        last = shown[-1][0]["gridPos"]
        shift += last["y"] + last["h"] - (pos["y"] + pos["h"])
    return shown


def collect_results(prometheus: str, start: float, end: float) -> dict[str, Any]:
    """Every variable and panel query of every dashboard, substituted and run.

    Returns a JSON-serialisable record (also what the pictures are drawn from).
    """
    out: dict[str, Any] = {"start": start, "end": end, "dashboards": {}}
    for file, dashboard in dashboards().items():
        values, options = resolve_variables(dashboard, prometheus, start, end, PREFER)
        record: dict[str, Any] = {
            "uid": dashboard["uid"],
            "title": dashboard["title"],
            "variables": values,
            "options": options,
            "panels": [],
        }
        for panel, scoped in expand_repeats(dashboard, values, options):
            entry = {
                key: panel.get(key)
                for key in (
                    "id",
                    "type",
                    "title",
                    "gridPos",
                    "description",
                    "options",
                    "repeat_value",
                )
            }
            entry["fieldConfig"] = panel.get("fieldConfig", {}).get("defaults", {})
            entry["targets"] = []
            if panel["type"] != "row":
                intervals = interval_variables(panel, start, end)
                step = parse_duration(intervals["__interval"])
                for target in panel.get("targets", []):
                    expr = substitute(target["expr"], {**scoped, **intervals})
                    instant = bool(target.get("instant")) and not target.get("range")
                    entry["targets"].append(
                        {
                            "refId": target.get("refId"),
                            "expr": expr,
                            "instant": instant,
                            "format": target.get("format"),
                            "legendFormat": target.get("legendFormat", ""),
                            "result": run_target(prometheus, expr, instant, start, end, step),
                        }
                    )
            record["panels"].append(entry)
        out["dashboards"][file] = record
    return out


def panel_series(
    results: dict[str, Any], file: str, title: str, ref_id: str | None = None
) -> list[dict[str, Any]]:
    """The series of one panel (of one of its targets, by refId)."""
    (panel,) = [p for p in results["dashboards"][file]["panels"] if p["title"] == title]
    return [s for t in panel["targets"] if ref_id in (None, t["refId"]) for s in t["result"]]


def last_value(series: dict[str, Any]) -> float:
    return float(series["values"][-1][1])


# --- the test -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveStack, dict[str, Any]]]:
    reason = fuse_unavailable()
    if reason:
        pytest.skip(reason)
    workdir = tmp_path_factory.mktemp("dashboards-live")
    with live_stack(workdir, log=lambda line: print(line, file=sys.stderr)) as stack:
        results = collect_results(stack.prometheus_url, stack.start, stack.end)
    target = os.environ.get("FIOPROBE_LIVE_RESULTS")
    if target:
        Path(target).write_text(json.dumps(results))
    yield stack, results


def test_every_variable_query_returns_values(live: tuple[LiveStack, dict[str, Any]]) -> None:
    _, results = live
    assert set(results["dashboards"]) == {p.name for p in DASHBOARDS_OUT.glob("*.json")}
    for file, record in results["dashboards"].items():
        for name, found in record["options"].items():
            assert found, f"{file}: ${name} has no values"
    overview = results["dashboards"]["fioprobe-overview.json"]["options"]
    assert overview["cluster"] == [CLUSTER]
    assert set(overview["storageclass"]) == {PLAIN, SLOW, BROKEN}
    assert overview["node"] == [NODE]
    etcd = results["dashboards"]["fioprobe-etcd-disks.json"]["options"]
    assert etcd["storageclass"] == [SLOW]  # only node-local targets
    assert "etcd-fsync" in etcd["profile"]


#: Copies of repeated panels that must be empty here: the probe of broken-symlink never
#: succeeded, so its StorageClass has no fsync histogram to draw.
EMPTY_BY_DESIGN = {"fioprobe-overview.json": {f"fsync latency distribution: {BROKEN}"}}


def test_every_panel_query_returns_data(live: tuple[LiveStack, dict[str, Any]]) -> None:
    """Each panel target yields a finite value, unless documented as needing external data
    (or, for a repeated panel's copy, listed in EMPTY_BY_DESIGN); those must be empty."""
    _, results = live
    excused = needs_external_data()
    empty, stale_excuses = [], []
    checked = 0
    for file, record in results["dashboards"].items():
        titles = {p["title"] for p in record["panels"]}
        expected_empty = set(excused.get(file, {})) | EMPTY_BY_DESIGN.get(file, set())
        for title in expected_empty:
            assert title in titles, f"a panel expected to be empty is missing: {file}: {title}"
        for panel in record["panels"]:
            if panel["type"] == "row":
                continue
            assert panel["targets"], f"{file}: panel {panel['title']!r} has no query"
            for target in panel["targets"]:
                has_data = bool(finite_values(target["result"]))
                if panel["title"] in expected_empty:
                    if has_data:
                        stale_excuses.append(f"{file}: {panel['title']}")
                    continue
                checked += 1
                if not has_data:
                    empty.append(f"{file}: {panel['title']} [{target['refId']}]: {target['expr']}")
    assert not empty, "panel queries without data:\n" + "\n".join(empty)
    assert not stale_excuses, f"expected to be empty here but have data: {stale_excuses}"
    assert checked >= 50, f"only {checked} queries checked; did the dashboards lose panels?"


def test_panels_show_what_the_disks_did(live: tuple[LiveStack, dict[str, Any]]) -> None:
    """The data says what the setup did: slow fsync is red, plain is green, etc."""
    stack, results = live
    overview, etcd = "fioprobe-overview.json", "fioprobe-etcd-disks.json"

    latest = {
        (s["metric"]["storageclass"], s["metric"]["profile"]): last_value(s)
        for s in panel_series(results, overview, "Latest fsync p99 by StorageClass")
    }
    # Above the red 10 ms line. The plain directory's p99 depends on what else the host
    # disk does (here: the other probes, etcd's backing files), so only "much lower".
    assert latest[(SLOW, "etcd-fsync")] >= FSYNC_DELAY_MS / 1000
    assert latest[(SLOW, "etcd-fsync")] - latest[(PLAIN, "etcd-fsync")] > 0.005

    recorded = {
        s["metric"]["storageclass"]: last_value(s)
        for s in panel_series(results, overview, "fsync p99 over time")
        if s["metric"]["profile"] == "etcd-fsync"
    }
    assert recorded[SLOW] > 0.01  # the recording rule (and so the alert) sees it
    assert recorded[SLOW] > recorded[PLAIN]

    (failing,) = panel_series(results, overview, "Failing probes")
    assert last_value(failing) == 1
    # broken-symlink has run every round and never succeeded: no last-success series.
    (never,) = panel_series(results, overview, "Never succeeded")
    assert last_value(never) == 1
    (oldest,) = panel_series(results, overview, "Oldest last success")
    assert 0 <= last_value(oldest) <= results["end"] - results["start"]
    ages = panel_series(results, overview, "Age of last successful run")
    assert {s["metric"]["storageclass"] for s in ages} == {PLAIN, SLOW}
    (reason,) = panel_series(results, overview, "Failing probes and reasons")
    assert reason["metric"]["storageclass"] == BROKEN
    assert reason["metric"]["reason"] == "unsafe_target"

    # etcd on the slow filesystem sees the slowness as well (its buckets are 8 and 16 ms).
    etcd_lines = [
        s
        for s in panel_series(results, etcd, "Probe fsync p99 vs etcd WAL fsync p99")
        if "instance" in s["metric"]
    ]
    assert etcd_lines and max(finite_values(etcd_lines)) > 0.01, stack.etcd_puts

    # The etcd dashboard: node-local volumes only (slow-fuse on cp-0), per node.
    title = "IOPS ceiling vs baseline and burst"
    (baseline,) = panel_series(results, etcd, title, "B")
    (burst,) = panel_series(results, etcd, title, "C")
    assert (last_value(baseline), last_value(burst)) == (3 * SLOW_GP2_GIB, GP2_BURST_IOPS)
    assert baseline["metric"]["node"] == NODE
    (ceiling,) = panel_series(results, etcd, title, "A")
    assert last_value(ceiling) > 0
    (balance,) = panel_series(results, etcd, "Modelled burst credit balance")
    assert 0.9 < last_value(balance) <= 1.0  # a few short probes cost little of 5.4 M

    # The Overview: every modelled volume per StorageClass, the dedicated gp2 PVC without a
    # node included, each volume once although every profile's group carries its gauges.
    def by_class(ref_id: str | None, panel: str = title) -> dict[str, float]:
        found = panel_series(results, overview, panel, ref_id)
        classes = [s["metric"]["storageclass"] for s in found]
        assert len(classes) == len(set(classes)), f"{panel} [{ref_id}]: {classes}"
        assert all("profile" not in s["metric"] for s in found), found
        return {s["metric"]["storageclass"]: last_value(s) for s in found}

    assert by_class("B") == {PLAIN: 3 * PLAIN_GP2_GIB, SLOW: 3 * SLOW_GP2_GIB}
    assert by_class("C") == {PLAIN: GP2_BURST_IOPS, SLOW: GP2_BURST_IOPS}
    ceilings = by_class("A")
    assert set(ceilings) == {PLAIN, SLOW} and min(ceilings.values()) > 0
    balances = by_class(None, "Modelled burst credit balance")
    assert set(balances) == {PLAIN, SLOW}
    assert all(0.9 < b <= 1.0 for b in balances.values()), balances

    # One heatmap per StorageClass: the slow class's fsyncs sit above 10 ms, the plain
    # class's mostly do not; summed together (the old panel) they could not be told apart.
    def share_above_10ms(storageclass: str) -> float:
        found = panel_series(results, overview, f"fsync latency distribution: {storageclass}")
        total = {float(s["metric"]["le"]): sum(finite_values([s])) for s in found}
        assert total[math.inf] > 0, storageclass
        return 1 - total[0.01] / total[math.inf]

    assert share_above_10ms(SLOW) > 0.9
    assert share_above_10ms(SLOW) - share_above_10ms(PLAIN) > 0.5
    heatmaps = [p for p in results["dashboards"][overview]["panels"] if p["type"] == "heatmap"]
    assert sorted(p["repeat_value"]["storageclass"] for p in heatmaps) == sorted(
        [PLAIN, SLOW, BROKEN]
    )
