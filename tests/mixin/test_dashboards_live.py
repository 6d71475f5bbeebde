"""Every dashboard query against real data: probes -> Pushgateway -> Prometheus (+ etcd).

Why: tests/mixin/test_dashboards.py proves the dashboards are well-formed and only name metrics
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
short latency window, run in the same Prometheus. `fioprobe continuous` streams on the same
three targets (the slow one as node cp-0's etcd disk), scraped by that Prometheus, feed the
stream panels; etcd's series carry the `pod` a static pod's mirror has (etcd-cp-0), which
the etcd disks dashboard joins to the node. Where this tree has no `fioprobe continuous`,
the stream's queries are not checked (STREAM_MISSING).

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
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fioprobe.metrics.histogram import le_label
from fioprobe.preview import evaluate
from fioprobe.provision.steps import STEP_BUCKETS
from support import services
from support.fioservers import fio_servers
from support.fixtures import fuse_unavailable
from support.paths import GO_JSONNET, REPO
from support.promql import instant_values
from support.slowfs import slow_fs

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
#: The schedule the rules are rendered for (the mixin derives every window from it): the
#: recording rules' latency window is then 6 runs = 2 minutes, a few probe rounds here.
PROBE_INTERVAL_S = 20
SCRAPE_INTERVAL_S = 1.0
#: The continuous stream's command line (checked with --help before it is run).
STREAM_COMMAND = [sys.executable, "-m", "fioprobe", "continuous"]
#: Why the stream's queries go unchecked: only while there is no stream to run.
STREAM_MISSING = "no `fioprobe continuous` in this tree"
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
    #: Whether `fioprobe continuous` ran (this tree has it).
    stream: bool


def render_recording_rules(path: Path) -> Path:
    """The mixin's recording rules, rendered now for a short schedule (JSON is valid YAML).

    Rendered from mixin.libsonnet, not copied from alerts/out/rules.yaml, so the test
    checks the dashboards against the rules as they are in this tree.
    """
    override = json.dumps({"probeIntervalSeconds": PROBE_INTERVAL_S})
    code = (
        f"local m = (import 'mixin.libsonnet') + {{ _config+:: {override} }};"
        " { groups: m.prometheusRules.groups }"
    )
    result = subprocess.run(
        [str(GO_JSONNET), "-J", str(REPO), "-e", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"rendering the recording rules failed: {result.stderr}"
    path.write_text(result.stdout)
    return path


def stream_available() -> bool:
    """Whether this tree has `fioprobe continuous` (its command line answers --help)."""
    result = subprocess.run(
        [*STREAM_COMMAND, "--help"], capture_output=True, cwd=REPO, timeout=60, check=False
    )
    return result.returncode == 0


def label_scrape_targets(
    prometheus: services.Service, labels: dict[str, str], jobs: set[str] | None = None
) -> None:
    """Add target labels to the scrape jobs (all, or `jobs`) of a not yet started Prometheus."""
    (config_arg,) = [a for a in prometheus.command if a.startswith("--config.file=")]
    config_path = Path(config_arg.split("=", 1)[1])
    config = json.loads(config_path.read_text())
    for job in config["scrape_configs"]:
        if jobs is not None and job["job_name"] not in jobs:
            continue
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
            "etcd_disk": True,
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


def continuous_stream(workdir: Path, configs: dict[str, Path], port: int) -> services.Service:
    """`fioprobe continuous` over the three targets, as the manifests' streams would run them
    (one process here): node-local ones as node NODE, /metrics on `port`."""
    import yaml

    targets = [t for path in configs.values() for t in yaml.safe_load(path.read_text())["targets"]]
    config = {**yaml.safe_load(configs[PLAIN].read_text()), "targets": targets}
    path = workdir / "continuous.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    command = [*STREAM_COMMAND, "--config", str(path), "--node", NODE]
    command += ["--listen", f"{services.LOCALHOST}:{port}"]
    return services.Service("continuous", command, port, workdir / "continuous", "/metrics")


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
        stream_port = services.free_port() if stream_available() else None
        scrape = {"pushgateway": f"127.0.0.1:{gateway.port}", "etcd": f"127.0.0.1:{etcd.port}"}
        if stream_port:
            scrape["continuous"] = f"127.0.0.1:{stream_port}"
        prometheus = services.prometheus(
            workdir / "prometheus",
            scrape,
            scrape_interval=f"{SCRAPE_INTERVAL_S:g}s",
            rule_files=[rules],
        )
        label_scrape_targets(prometheus, {"cluster": CLUSTER})
        # What a pod-based scrape of a static etcd pod gives: its mirror pod's name.
        label_scrape_targets(prometheus, {"pod": f"etcd-{NODE}"}, jobs={"etcd"})
        prometheus.start()
        stack.callback(prometheus.stop)
        configs = write_configs(workdir, gateway.url, plain, slow_probe, broken)
        log(f"prometheus {prometheus.url}, pushgateway {gateway.url}, etcd {etcd.url}")
        if stream_port:
            stream = continuous_stream(workdir, configs, stream_port)
            stack.callback(stream.stop)
            stream.start(timeout=30)
            log(f"fioprobe continuous {stream.url}")
        else:
            log(f"no stream: {STREAM_MISSING}")

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
                    sum(v >= n for v in instant_values(prometheus.url, "fioprobe_runs_total"))
                    == groups
                ),
                timeout=20,
                what=f"Prometheus to scrape round {number} of {groups} probe groups",
            )
            log(f"round {number}/{rounds} in {time.monotonic() - began:.1f}s")
        services.wait_for(
            lambda: (
                len(instant_values(prometheus.url, "probe:fioprobe_sync_latency_seconds:p99 >= 0"))
                >= 2
            ),
            timeout=20,
            what="the recording rules to record fsync p99 of both targets",
        )
        services.wait_for(
            lambda: instant_values(
                prometheus.url, "sum(rate(etcd_disk_wal_fsync_duration_seconds_count[1m])) > 0"
            ),
            timeout=20,
            what="etcd's WAL fsync histogram to grow in Prometheus",
        )
        if stream_port:
            services.wait_for(
                lambda: (
                    len(
                        instant_values(
                            prometheus.url,
                            "increase(fioprobe_continuous_operations_total[1m]) > 2",
                        )
                    )
                    == 2
                ),
                timeout=30,
                what="both working streams to complete operations",
            )
        load.__exit__()
        assert load.puts > 0, f"no etcd put succeeded: {load.errors[:3]}"
        distributed_benchmark(stack, workdir, gateway.url, prometheus.url)
        log("distributed benchmark pushed and scraped")
        provisioning_groups(gateway.url, prometheus.url)
        log("provisioning groups pushed and scraped")
        yield LiveStack(
            prometheus.url, gateway.url, etcd.url, start, time.time(), load.puts, bool(stream_port)
        )


def distributed_benchmark(
    stack: contextlib.ExitStack, workdir: Path, gateway: str, prometheus: str
) -> None:
    """One `fioprobe distributed` benchmark against two real fio servers, pushed beside the
    probes: the Comparison's benchmark panels read it, and no probe rule takes it."""
    servers = stack.enter_context(fio_servers(workdir / "fio-servers", 2))
    plan = workdir / "benchmark.yaml"
    plan.write_text(
        f"name: live\nstorageclass: {PLAIN}\nservers: 2\njobs_per_server: 1\n"
        "file_size: 4m\nruntime: 1\nprepare_runtime: 10\n"
        "budget: {bytes_per_server: 64m, seconds_per_server: 30}\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "fioprobe", "distributed", "--plan", str(plan),
         "--servers", ",".join(s.address for s in servers), "--gateway", gateway,
         "-o", str(workdir / "benchmark")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr + done.stdout
    services.wait_for(
        lambda: instant_values(prometheus, "fioprobe_distributed_success == 1"),
        timeout=20,
        what="Prometheus to scrape the distributed benchmark",
    )


#: The provisioning groups pushed beside the probes: a class whose runs succeed, and one whose
#: runs fail in `bound` (no provisioner), each with the steps it finishes, in seconds.
PROVISIONED = {
    PLAIN: (True, {"created": 0.2, "scheduled": 0.6, "bound": 7.5, "attached": 11.0,
                   "running": 5.2, "written": 1.1, "pod_deleted": 3.4, "detached": 9.0,
                   "volume_deleted": 4.0}),
    "no-provisioner": (False, {"created": 0.2, "scheduled": 0.7}),
}  # fmt: skip


def provision_body(run: int, success: bool, steps: dict[str, float]) -> str:
    """The text a `fioprobe provision` push of the group's `run`-th run carries
    (metrics/provision.py's families; written here, as no API server here provisions): the
    step histogram, cumulative over the runs, the last run's steps and verdict, its counters."""
    lines = ["# TYPE fioprobe_provision_step_duration_seconds histogram"]
    for step, seconds in steps.items():
        for bound in (*STEP_BUCKETS, math.inf):
            count = run if seconds <= bound else 0
            lines.append(
                f'fioprobe_provision_step_duration_seconds_bucket{{step="{step}",'
                f'le="{le_label(bound)}"}} {count}'
            )
        lines.append(
            f'fioprobe_provision_step_duration_seconds_sum{{step="{step}"}} {run * seconds}'
        )
        lines.append(f'fioprobe_provision_step_duration_seconds_count{{step="{step}"}} {run}')
    lines.append("# TYPE fioprobe_provision_last_step_duration_seconds gauge")
    lines += [
        f'fioprobe_provision_last_step_duration_seconds{{step="{step}"}} {seconds}'
        for step, seconds in steps.items()
    ]
    lines += [
        "# TYPE fioprobe_provision_success gauge",
        f"fioprobe_provision_success {1 if success else 0}",
        "# TYPE fioprobe_provision_runs_total counter",
        f"fioprobe_provision_runs_total {run}",
        "# TYPE fioprobe_provision_failures_total counter",
        f"fioprobe_provision_failures_total {0 if success else run}",
        "# TYPE fioprobe_provision_last_run_timestamp_seconds gauge",
        f"fioprobe_provision_last_run_timestamp_seconds {time.time()}",
        "# TYPE fioprobe_provision_objects_left gauge",
        "fioprobe_provision_objects_left 0",
    ]
    if not success:
        lines += [
            "# TYPE fioprobe_provision_failure_reason_info gauge",
            'fioprobe_provision_failure_reason_info{reason="deadline",step="bound"} 1',
        ]
    return "\n".join(lines) + "\n"


def provisioning_groups(gateway: str, prometheus: str) -> None:
    """Two runs of each provisioning group (job fioprobe_provision, a StorageClass, no
    profile), each scraped before the next, so that the step histogram's rate has an increase:
    the Overview's provisioning row reads them, and no probe rule takes them."""
    for run in (1, 2):
        for storageclass, (success, steps) in PROVISIONED.items():
            request = urllib.request.Request(
                f"{gateway}/metrics/job/fioprobe_provision/storageclass/{storageclass}",
                data=provision_body(run, success, steps).encode(),
                method="PUT",
            )
            with urllib.request.urlopen(request, timeout=10) as response:
                assert response.status in (200, 202)
        services.wait_for(
            lambda n=run: (
                len(instant_values(prometheus, f"fioprobe_provision_runs_total >= {n}"))
                == len(PROVISIONED)
            ),
            timeout=20,
            what=f"Prometheus to scrape provisioning run {run}",
        )


# --- Grafana's side: variables, intervals, queries ----------------------------------------


def needs_external_data() -> dict[str, dict[str, str]]:
    return json.loads(EXTERNAL.read_text())["needs_external_data"]


#: Values chosen for the Comparison: the plain directory against the slow FUSE one.
PREFER = {"storageclass_a": PLAIN, "storageclass_b": SLOW, "shift_b": "1ms"}


def collect_results(prometheus: str, start: float, end: float) -> dict[str, Any]:
    """Every variable and panel query of every dashboard, as Grafana would run them."""
    return evaluate.collect_results(
        prometheus, start, end, prefer=PREFER, scrape_interval_s=SCRAPE_INTERVAL_S
    )


def finite_values(series: list[dict[str, Any]]) -> list[float]:
    return evaluate.finite_values(series)


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
    results["stream"] = stack.stream
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


#: Panels that must be empty here: the probe of broken-symlink never succeeded, so its
#: StorageClass has no fsync histogram to draw; the one failing stream is not an etcd disk's,
#: so the etcd disks dashboard has no stream failing (the Overview's panel shows it).
EMPTY_BY_DESIGN = {
    "fioprobe-overview.json": {f"fsync latency distribution: {BROKEN}"},
    "fioprobe-etcd-disks.json": {"Streams failing for"},
}


def test_every_panel_query_returns_data(live: tuple[LiveStack, dict[str, Any]]) -> None:
    """Each panel target yields a finite value, unless documented as needing external data
    (or, for a repeated panel's copy, listed in EMPTY_BY_DESIGN); those must be empty. The
    stream's targets are not checked while STREAM_MISSING."""
    stack, results = live
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
                if not stack.stream and "fioprobe_continuous_" in target["expr"]:
                    continue  # nothing to check without a stream ("Failing streams" reads 0)
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
    # One copy per StorageClass, of the probes' heatmap and of the streams'.
    for prefix in ("fsync", "Stream fdatasync"):
        heatmaps = [
            p
            for p in results["dashboards"][overview]["panels"]
            if p["type"] == "heatmap" and p["title"].startswith(f"{prefix} latency distribution: ")
        ]
        assert sorted(p["repeat_value"]["storageclass"] for p in heatmaps) == sorted(
            [PLAIN, SLOW, BROKEN]
        ), prefix

    # The distributed benchmark succeeded: both its servers ran every phase, no reason.
    servers = panel_series(
        results,
        "fioprobe-comparison.json",
        "Last benchmark per StorageClass: servers and why it failed",
    )
    assert len(servers) == 2 and all(last_value(s) == 1 for s in servers), servers
    assert not any("reason" in s["metric"] for s in servers), servers

    # The etcd disks dashboard's stream panel: beside the stream, the probe's last run and
    # etcd's own WAL fsync p99, the member joined to its node through its pod (etcd-cp-0).
    title = "Stream fdatasync p99, probe and etcd"
    (last_run,) = panel_series(results, etcd, title, "B")
    assert last_run["metric"]["node"] == NODE
    assert last_value(last_run) >= FSYNC_DELAY_MS / 1000
    (member,) = panel_series(results, etcd, title, "C")
    assert (member["metric"]["node"], member["metric"]["storageclass"]) == (NODE, SLOW)
    assert max(finite_values([member])) > 0.01, stack.etcd_puts
    if stack.stream:
        check_streams(results)


def check_streams(results: dict[str, Any]) -> None:
    """The streams' panels say what the streams saw: the slow disk's fdatasyncs above 10 ms
    and stalling, the plain one's not; the broken target failing with its reason; on the
    etcd disks dashboard only the etcd disk's stream, one heatmap for its node."""
    overview, etcd = "fioprobe-overview.json", "fioprobe-etcd-disks.json"
    p99 = {
        s["metric"]["storageclass"]: last_value(s)
        for s in panel_series(results, overview, "Stream fdatasync p99 and probe", "A")
        if math.isfinite(last_value(s))
    }
    # The plain directory shares the host's disk with the probes' bursts, so its p99 can be
    # high too; its distribution (below) cannot.
    assert p99[SLOW] >= FSYNC_DELAY_MS / 1000, p99

    def share_above_10ms(file: str, copy: str) -> float:
        found = panel_series(results, file, f"Stream fdatasync latency distribution: {copy}")
        total = {float(s["metric"]["le"]): sum(finite_values([s])) for s in found}
        assert total[math.inf] > 0, (file, copy)
        return 1 - total[0.01] / total[math.inf]

    assert share_above_10ms(overview, SLOW) > 0.9
    assert share_above_10ms(overview, SLOW) - share_above_10ms(overview, PLAIN) > 0.5
    (stream,) = panel_series(results, etcd, "Stream fdatasync p99, probe and etcd", "A")
    assert stream["metric"]["node"] == NODE and last_value(stream) >= FSYNC_DELAY_MS / 1000
    stalls = {
        s["metric"]["storageclass"]: max(finite_values([s]))
        for s in panel_series(results, overview, "Stream stall seconds per minute")
    }
    assert stalls[SLOW] > 0, stalls  # every fdatasync takes 15 ms, the threshold is 10 ms
    (failing,) = panel_series(results, overview, "Failing streams")
    assert last_value(failing) == 1
    (failing_for,) = panel_series(results, overview, "Streams failing for")
    assert (failing_for["metric"]["storageclass"], failing_for["metric"]["reason"]) == (
        BROKEN,
        "unsafe_target",
    )
    assert last_value(failing_for) > 0
    reasons = {
        (s["metric"]["storageclass"], s["metric"]["reason"])
        for s in panel_series(results, overview, "Stream errors per hour by reason")
    }
    assert (BROKEN, "unsafe_target") in reasons, reasons
    info = {
        s["metric"]["storageclass"]: s["metric"]
        for s in panel_series(results, overview, "Streams: targets and devices")
    }
    assert set(info) == {PLAIN, SLOW, BROKEN}
    assert info[SLOW]["etcd_disk"] == "true"
    assert "disk" not in info[SLOW] and info[PLAIN]["disk"]  # FUSE has no block device
    heatmaps = [p for p in results["dashboards"][etcd]["panels"] if p["type"] == "heatmap"]
    assert [p["repeat_value"]["etcd_node"] for p in heatmaps] == [NODE]
    assert share_above_10ms(etcd, NODE) > 0.9
