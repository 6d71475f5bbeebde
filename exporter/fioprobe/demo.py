"""`fioprobe demo`: the whole pipeline on this machine, in one command.

Starts a real Pushgateway and Prometheus on 127.0.0.1 (free ports), probes two local
directories with the etcd-fsync profile every few seconds (one on the work directory's disk,
one in /dev/shm for contrast), and prints a live summary read back from Prometheus. Ctrl-C
stops everything it started and removes every file it made.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

from . import services
from .errors import FioprobeError, Interrupted
from .probe import ProbeTarget, run_and_publish
from .pushgateway import Transport
from .statefile import StateDir

PROFILE = "etcd-fsync"
THRESHOLD_SECONDS = 0.010


def _targets(workdir: Path) -> list[ProbeTarget]:
    disk = workdir / "probe-local-disk"
    disk.mkdir(parents=True, exist_ok=True)
    targets = [ProbeTarget(storageclass="local-disk", directory=disk, profile=PROFILE)]
    shm = Path("/dev/shm")
    if shm.is_dir():
        memory = Path(tempfile.mkdtemp(prefix="fioprobe-demo-", dir=shm))
        targets.append(ProbeTarget(storageclass="memory", directory=memory, profile=PROFILE))
    return targets


def _ms(value: float | None) -> str:
    return "    n/a" if value is None else f"{value * 1000:7.3f}"


def _value(prometheus_url: str, promql: str) -> dict[str, float]:
    try:
        result = services.query(prometheus_url, promql)
    except services.ServiceError:
        return {}
    return {r["metric"].get("storageclass", ""): float(r["value"][1]) for r in result}


def summary(prometheus_url: str, targets: list[ProbeTarget]) -> str:
    """Per target: fsync p50/p99/p99.9 over all runs so far, IOPS, cost, from Prometheus."""
    sel = f'profile="{PROFILE}"'
    quantiles = {
        q: _value(
            prometheus_url,
            f"histogram_quantile({q}, sum by (storageclass, le) "
            f"(fioprobe_sync_latency_seconds_bucket{{{sel}}}))",
        )
        for q in ("0.5", "0.99", "0.999")
    }
    iops = _value(prometheus_url, f"sum by (storageclass) (fioprobe_sync_iops{{{sel}}})")
    runs = _value(prometheus_url, f"fioprobe_runs_total{{{sel}}}")
    written = _value(prometheus_url, f"fioprobe_written_bytes_total{{{sel}}}")
    lines = [
        f"{'target':<12} {'fsync p50':>9} {'p99':>9} {'p99.9':>9} (ms)  {'verdict':<16}"
        f" {'fsync/s':>8} {'runs':>5} {'written':>10}",
    ]
    for target in targets:
        name = target.storageclass
        p99 = quantiles["0.99"].get(name)
        if p99 is None:
            verdict = "waiting for data"
        elif p99 > THRESHOLD_SECONDS:
            verdict = "SLOW (p99>10ms)"
        else:
            verdict = "ok (p99<=10ms)"
        lines.append(
            f"{name:<12} {_ms(quantiles['0.5'].get(name)):>9} {_ms(p99):>9} "
            f"{_ms(quantiles['0.999'].get(name)):>9}       {verdict:<16}"
            f" {iops.get(name, 0):8.0f} {runs.get(name, 0):5.0f} "
            f"{written.get(name, 0) / 1048576:8.1f}Mi"
        )
    return "\n".join(lines)


def run_demo(interval: float, iterations: int, workdir: str | None) -> int:
    own_workdir = workdir is None
    root = Path(tempfile.mkdtemp(prefix="fioprobe-demo-")) if own_workdir else Path(workdir)
    root.mkdir(parents=True, exist_ok=True)
    started: list[services.Service] = []
    targets: list[ProbeTarget] = []
    try:
        gateway = services.pushgateway(root / "pushgateway").start()
        started.append(gateway)
        prometheus = services.prometheus(
            root / "prometheus", {"pushgateway": f"{services.LOCALHOST}:{gateway.port}"}
        ).start()
        started.append(prometheus)
        targets = _targets(root)
        transport = Transport(gateway.url)
        print(f"fioprobe demo: Pushgateway {gateway.url}  Prometheus {prometheus.url}")
        print(f"  try: {prometheus.url}/graph?g0.expr=fioprobe_last_sync_latency_seconds")
        print(
            f"  probing {', '.join(str(t.directory) for t in targets)} every {interval:g}s;"
            " Ctrl-C stops and cleans up\n"
        )
        count = 0
        while iterations <= 0 or count < iterations:
            count += 1
            cycle_start = time.monotonic()
            for target in targets:
                state = StateDir(root / "state", create_parents=True).file(
                    f"{target.storageclass}.json"
                )
                try:
                    run_and_publish(target, transport, state_file=state)
                except FioprobeError as exc:
                    print(f"  {target.storageclass}: {exc}", file=sys.stderr)
            time.sleep(2.5)  # two scrapes at the default interval
            print(f"--- probe round {count} ({time.strftime('%H:%M:%S')})")
            print(summary(prometheus.url, targets), flush=True)
            if iterations <= 0 or count < iterations:
                time.sleep(max(0.0, interval - (time.monotonic() - cycle_start)))
    except (KeyboardInterrupt, Interrupted):
        print("\nfioprobe demo: stopping")
    except services.ServiceError as exc:
        print(f"fioprobe demo: {exc}", file=sys.stderr)
        return 1
    finally:
        for service in reversed(started):
            service.stop()
        for target in targets:
            if str(target.directory).startswith("/dev/shm/"):
                shutil.rmtree(target.directory, ignore_errors=True)
        if own_workdir:
            shutil.rmtree(root, ignore_errors=True)
    return 0
