"""`fioprobe demo`: the whole chain on this machine, up to an alert firing on a slow disk.

Starts a real Pushgateway, Alertmanager and Prometheus on 127.0.0.1 (free ports), with the
mixin's recording and alerting rules rendered for the demo's short rounds through the
mixin's own configuration (`probeIntervalSeconds`: every window follows from it). Probes
three etcd-like disks of this machine with the etcd-fsync profile every round: a directory
on the work directory's disk, one in memory (/dev/shm), and a simulated slow disk (a FUSE
filesystem adding 15 ms to every fsync, `fioprobe.demo.slowdisk`). Each round prints, per disk,
the last run's fsync p99 and the state of FioProbeEtcdFsyncLatencyHigh as Prometheus and
Alertmanager see it; every few rounds it draws the three dashboards from the live data.

Beside the scheduled probes, each disk has its continuous stream (`fioprobe continuous`, a
write + fdatasync every second, scraped by the same Prometheus). After round 2 the slow
disk stalls for about 3 s, between two of its scheduled runs: the stream catches it (the
"stream" column shows the longest wait it saw in the round), the scheduled probe does not.

Ctrl-C, SIGTERM and SIGHUP stop everything it started (processes by PID, the FUSE mount)
and remove every file it made.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from fioprobe.errors import FioprobeError, Interrupted
from fioprobe.gateway.transport import Transport
from fioprobe.grouping import PROBE_LABELS
from fioprobe.probe.model import ProbeTarget
from fioprobe.probe.prober import run_and_publish
from fioprobe.services import servers
from fioprobe.thresholds import ETCD_FSYNC_P99_SECONDS

if TYPE_CHECKING:
    from fioprobe.demo.slowdisk import SlowFs

PROFILE = "etcd-fsync"
ALERT = "FioProbeEtcdFsyncLatencyHigh"


#: The node label of a demo disk's probe (one simulated control-plane node per disk). Each
#: demo disk is declared an etcd disk (fioprobe_info{etcd_disk="true"}), so the etcd alert
#: applies to them, and the etcd dashboard shows one line per disk.
def node_of(disk: str) -> str:
    return f"demo-{disk}"


#: fsync delay of the simulated slow disk: above etcd's 10 ms p99 requirement
#: (`ETCD_FSYNC_P99_SECONDS`, the alert's threshold).
SLOW_FSYNC_MS = 15.0
#: A short etcd-fsync run (within the profile's budget): a round stays well inside a minute.
RUN_SECONDS = 3
#: Seconds between the Prometheus scrapes and rule evaluations of the demo.
SCRAPE_SECONDS = 1.0
#: The short stall shown on the slow disk: after this round's probes, one fdatasync of the
#: slow disk takes STALL_SECONDS, while no scheduled run is on it.
STALL_ROUND = 2
STALL_SECONDS = 3.0
REPO = Path(__file__).resolve().parents[3]
#: The cluster label of the demo's series, as a multi-cluster setup has (the dashboards'
#: cluster variable selects on it).
CLUSTER = "demo"


@dataclass
class DemoTarget:
    """One probed disk of the demo and what the summary says about it."""

    name: str
    what: str
    probe: ProbeTarget


@dataclass
class Stack:
    """Everything the demo started, for the summary and for the cleanup."""

    root: Path
    services: list[servers.Service] = field(default_factory=list)
    targets: list[DemoTarget] = field(default_factory=list)
    prometheus_url: str = ""
    alertmanager_url: str = ""
    gateway_url: str = ""
    #: The slow disk's control (None where FUSE is unavailable).
    slow: SlowFs | None = None


# --- signals --------------------------------------------------------------------------------


def _stop(signum: int, _frame: FrameType | None) -> None:
    # Further signals must not cut the cleanup that this one starts.
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    raise Interrupted(signum, signal.Signals(signum).name, "the demo stops")


@contextlib.contextmanager
def _stop_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP (a `kill`, a closed terminal) end the demo like Ctrl-C does."""
    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# --- set-up ---------------------------------------------------------------------------------


def render_rules(path: Path, interval_seconds: float, targets: list[DemoTarget]) -> Path:
    """The mixin's rule file for the demo's schedule: windows follow from the interval."""
    config = {
        "probeIntervalSeconds": interval_seconds,
        "expectedProbes": [
            dict(zip(PROBE_LABELS, (t.probe.storageclass, PROFILE, t.probe.node), strict=True))
            for t in targets
        ],
    }
    result = subprocess.run(
        ["jsonnet", "-J", str(REPO), "--tla-code", f"config={json.dumps(config)}",
         str(REPO / "alerts" / "rules.jsonnet")],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    if result.returncode != 0:
        raise servers.ServiceError(f"rendering the mixin's rules failed: {result.stderr}")
    path.write_text(result.stdout)
    return path


def _probe(name: str, directory: Path, root: Path) -> ProbeTarget:
    return ProbeTarget(
        storageclass=name,
        directory=directory,
        profile=PROFILE,
        node=node_of(name),
        overrides={"runtime": str(RUN_SECONDS)},
        state_dir=root / "state" / name,
        etcd_disk=True,
    )


def _targets(
    root: Path, stack: contextlib.ExitStack
) -> tuple[list[DemoTarget], SlowFs | None, str | None]:
    """The three disks; the slow one only where FUSE works (else the reason it does not)."""
    disk = root / "local-disk"
    disk.mkdir()
    targets = [
        DemoTarget("local-disk", f"a directory on {root}'s disk", _probe("local-disk", disk, root))
    ]
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        memory = Path(tempfile.mkdtemp(prefix="fioprobe-demo-", dir=shm))
        stack.callback(shutil.rmtree, memory, ignore_errors=True)
        targets.append(DemoTarget("memory", "tmpfs (/dev/shm)", _probe("memory", memory, root)))
    reason = _fuse_unavailable()
    slow = None
    if reason is None:
        from fioprobe.demo.slowdisk import slow_fs  # needs fusepy: imported only where FUSE works

        backing, mountpoint = root / "slow-backing", root / "slow-disk"
        backing.mkdir()
        mountpoint.mkdir()
        try:
            slow = stack.enter_context(slow_fs(backing, mountpoint, SLOW_FSYNC_MS))
        except (OSError, RuntimeError, TimeoutError) as exc:
            slow, reason = None, f"the FUSE mount failed: {exc}"
        else:
            targets.append(DemoTarget(
                "slow-disk", f"FUSE, +{SLOW_FSYNC_MS:g} ms per fsync",
                _probe("slow-disk", slow.mountpoint, root),
            ))  # fmt: skip
    return targets, slow, reason


def stream_service(target: DemoTarget, workdir: Path) -> servers.Service:
    """The disk's continuous stream, labelled as its probe (storageclass, node, etcd role)."""
    port = servers.free_port()
    probe = target.probe
    command = [
        sys.executable, "-m", "fioprobe", "continuous",
        "--dir", str(probe.directory), "--storageclass", probe.storageclass,
        "--node", str(probe.node), "--etcd-disk",
        "--listen", f"{servers.LOCALHOST}:{port}",
    ]  # fmt: skip
    return servers.Service(
        f"continuous-{target.name}", command, port, workdir, ready_path="/metrics"
    )


def _fuse_unavailable() -> str | None:
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse does not exist here"
    if shutil.which("fusermount") is None and os.geteuid() != 0:
        return "fusermount is not installed"
    try:
        import fuse  # noqa: F401
    except (ImportError, OSError) as exc:
        return f"fusepy/libfuse2 is missing ({exc})"
    return None


# --- the summary ------------------------------------------------------------------------------


def _get_json(url: str) -> Any:
    """The parsed JSON answer: its shape is the endpoint's, as the caller knows it."""
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.load(answer)


def alert_states(stack: Stack) -> dict[str, str]:
    """storageclass -> the etcd alert's state: inactive, pending, firing, or "at Alertmanager"."""
    states: dict[str, str] = {}
    with contextlib.suppress(OSError, ValueError):
        answer = _get_json(f"{stack.prometheus_url}/api/v1/alerts")
        for alert in answer["data"]["alerts"]:
            if alert["labels"].get("alertname") == ALERT:
                name = alert["labels"].get("storageclass", "")
                if states.get(name) != "firing":
                    states[name] = alert["state"]
    with contextlib.suppress(OSError, ValueError):
        for alert in _get_json(f"{stack.alertmanager_url}/api/v2/alerts"):
            if alert["labels"].get("alertname") == ALERT:
                name = alert["labels"].get("storageclass", "")
                states[name] = f"FIRING at Alertmanager ({alert['labels'].get('severity', '?')})"
    return states


def _last_p99(stack: Stack) -> dict[str, float]:
    try:
        result = servers.query(
            stack.prometheus_url,
            f'fioprobe_last_sync_latency_seconds{{profile="{PROFILE}",quantile="0.99"}}',
        )
    except servers.ServiceError:
        return {}
    return {r["metric"].get("storageclass", ""): float(r["value"][1]) for r in result}


def _stream_worst_wait(stack: Stack, seconds: float) -> dict[str, float]:
    """storageclass -> the longest wait of its stream the scrapes saw in the last `seconds`
    (the in-flight age of an operation still outstanding at a scrape)."""
    window = f"{max(2, round(seconds))}s"
    inflight = f"max_over_time(fioprobe_continuous_inflight_seconds[{window}])"
    try:
        result = servers.query(stack.prometheus_url, f"max by (storageclass) ({inflight})")
    except servers.ServiceError:
        return {}
    return {r["metric"].get("storageclass", ""): float(r["value"][1]) for r in result}


def summary(stack: Stack, round_seconds: float) -> str:
    p99 = _last_p99(stack)
    waits = _stream_worst_wait(stack, round_seconds)
    states = alert_states(stack)
    limit_ms = ETCD_FSYNC_P99_SECONDS * 1e3
    lines = [
        f"  {'disk':<11} {'last run fsync p99':>18}  {'verdict':<16} {'stream: longest wait':>20}"
        f"  {ALERT}"
    ]
    for target in stack.targets:
        value = p99.get(target.name)
        if value is None:
            shown, verdict = "waiting", ""
        else:
            shown = f"{value * 1000:8.2f} ms"
            slow = value > ETCD_FSYNC_P99_SECONDS
            verdict = f"SLOW (>{limit_ms:g} ms)" if slow else f"ok (<={limit_ms:g} ms)"
        wait = waits.get(target.name)
        stream = "waiting" if wait is None else f"{wait:7.2f} s"
        state = states.get(target.name, "inactive")
        lines.append(f"  {target.name:<11} {shown:>18}  {verdict:<16} {stream:>20}  {state}")
    return "\n".join(lines)


# --- previews and Grafana ------------------------------------------------------------------


def draw_previews(stack: Stack, out: Path, started: float) -> list[Path]:
    """The three dashboards drawn from the live Prometheus (matplotlib, no Grafana)."""
    from fioprobe.preview.draw import save_pictures
    from fioprobe.preview.evaluate import collect_results

    names = [t.name for t in stack.targets]
    prefer = {"storageclass_a": names[0], "storageclass_b": names[-1], "shift_b": "1ms"}
    results = collect_results(
        stack.prometheus_url, started, time.time(), prefer=prefer,
        scrape_interval_s=SCRAPE_SECONDS,
    )  # fmt: skip
    note = "fioprobe demo: " + ", ".join(f"{t.name} ({t.what})" for t in stack.targets)
    return save_pictures(results, out, note)


def provision_grafana(url: str, token: str | None, prometheus_url: str) -> list[str]:
    """A Prometheus datasource and the three dashboards, through Grafana's HTTP API."""
    from fioprobe.preview.evaluate import dashboards

    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"

    def post(path: str, body: dict[str, object]) -> None:
        request = urllib.request.Request(
            url.rstrip("/") + path, data=json.dumps(body).encode(), headers=headers, method="POST"
        )
        try:  # the token is never sent on to wherever a redirect points
            servers.open_without_redirects(request, timeout=10).close()
        except urllib.error.HTTPError as exc:
            if exc.code != 409:  # the datasource exists already: a second demo run
                raise

    post("/api/datasources", {"name": "fioprobe-demo", "type": "prometheus", "access": "proxy",
                              "url": prometheus_url, "uid": "fioprobe-demo"})  # fmt: skip
    done = []
    for dashboard in dashboards().values():
        post("/api/dashboards/db", {"dashboard": {**dashboard, "id": None}, "overwrite": True})
        done.append(dashboard["title"])
    return done


# --- the demo -------------------------------------------------------------------------------


def run_demo(
    interval: float,
    iterations: int,
    workdir: str | None,
    previews: str | None = None,
    preview_every: int = 3,
) -> int:
    """Run until interrupted (or `iterations` rounds); 0 on a clean stop."""
    root = Path(tempfile.mkdtemp(prefix="fioprobe-demo-", dir=workdir))
    stack = Stack(root)
    try:
        with _stop_signals(), contextlib.ExitStack() as cleanup:
            cleanup.callback(shutil.rmtree, root, ignore_errors=True)
            return _run(stack, cleanup, interval, iterations, previews, preview_every)
    except (KeyboardInterrupt, Interrupted):
        print("\nfioprobe demo: stopped; every process, mount and file it made is gone",
              flush=True)  # fmt: skip
        return 0
    except (servers.ServiceError, FioprobeError, OSError) as exc:
        print(f"fioprobe demo: {exc}", file=sys.stderr)
        return 1


def _run(
    stack: Stack,
    cleanup: contextlib.ExitStack,
    interval: float,
    iterations: int,
    previews: str | None,
    preview_every: int,
) -> int:
    root = stack.root

    def start(service: servers.Service) -> servers.Service:
        service.start()
        cleanup.callback(service.stop)
        return service

    targets, stack.slow, no_fuse = _targets(root, cleanup)
    stack.targets = targets
    rules = render_rules(root / "rules.json", interval, targets)
    gateway = start(servers.pushgateway(root / "pushgateway"))
    alertmanager = start(servers.alertmanager(root / "alertmanager"))
    streams = [start(stream_service(t, root / "continuous")) for t in targets]
    scraped = {"pushgateway": f"{servers.LOCALHOST}:{gateway.port}"}
    scraped |= {s.name: f"{servers.LOCALHOST}:{s.port}" for s in streams}
    prometheus = start(servers.prometheus(
        root / "prometheus", scraped,
        scrape_interval=f"{SCRAPE_SECONDS:g}s", evaluation_interval=f"{SCRAPE_SECONDS:g}s",
        rule_files=[rules], alertmanager_url=alertmanager.url,
        target_labels={"cluster": CLUSTER},
    ))  # fmt: skip
    stack.gateway_url, stack.prometheus_url = gateway.url, prometheus.url
    stack.alertmanager_url = alertmanager.url
    out = Path(previews) if previews else root / "dashboards"

    print(f"fioprobe demo: Pushgateway {gateway.url}  Prometheus {prometheus.url}  "
          f"Alertmanager {alertmanager.url}")  # fmt: skip
    print(f"  alerts:     {prometheus.url}/alerts   and   {alertmanager.url}/#/alerts")
    print(f"  dashboards: {out}/*.png (drawn every {preview_every} rounds)")
    for target in targets:
        print(f"  probing {target.name:<11} {target.probe.directory}  ({target.what})")
    print("  streams: a write + fdatasync every second on each disk, scraped by Prometheus")
    if no_fuse:
        print(f"  no slow disk: {no_fuse}; going on with {len(targets)} disks")
    print(f"  rules: the mixin's, rendered for one probe run every {interval:g}s; "
          "Ctrl-C stops and cleans up\n", flush=True)  # fmt: skip
    grafana = os.environ.get("GRAFANA_URL")

    transport = Transport(gateway.url)
    started = time.time()
    count = 0
    while iterations <= 0 or count < iterations:
        count += 1
        cycle_start = time.monotonic()
        for target in targets:
            try:  # state in root/state/<disk>/: the probe's state_dir
                run_and_publish(target.probe, transport)
            except Interrupted:
                raise
            except FioprobeError as exc:
                print(f"  {target.name}: {exc}", file=sys.stderr)
        if count == STALL_ROUND and stack.slow is not None:
            # Between two scheduled runs of the slow disk: only its stream is writing there.
            print(f"  now: slow-disk stalls for {STALL_SECONDS:g} s ({time.strftime('%H:%M:%S')}),"
                  " between two of its scheduled runs", flush=True)  # fmt: skip
            stack.slow.set_delays(STALL_SECONDS * 1000, settle_s=STALL_SECONDS)
            stack.slow.set_delays(SLOW_FSYNC_MS, settle_s=0)
        time.sleep(2.5 * SCRAPE_SECONDS)  # scraped, and the rules evaluated on it
        print(f"--- round {count} ({time.strftime('%H:%M:%S')}, {time.time() - started:.0f}s)")
        print(summary(stack, time.monotonic() - cycle_start), flush=True)
        if count % preview_every == 0:
            try:
                written = draw_previews(stack, out, started)
                print(f"  dashboards drawn: {', '.join(p.name for p in written)} in {out}")
            except Exception as exc:
                print(f"  dashboards not drawn: {exc}", file=sys.stderr)
            if grafana and count == preview_every:
                try:
                    titles = provision_grafana(grafana, os.environ.get("GRAFANA_TOKEN"),
                                               prometheus.url)  # fmt: skip
                    print(f"  provisioned into {grafana}: {', '.join(titles)}")
                except (OSError, ValueError) as exc:
                    print(f"  Grafana at {grafana} not provisioned: {exc}", file=sys.stderr)
        if iterations <= 0 or count < iterations:
            time.sleep(max(0.0, interval - (time.monotonic() - cycle_start)))
    return 0
