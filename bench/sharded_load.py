"""Per-node probes of a 1,000-node cluster into sharded Pushgateways, and into one for contrast.

Why: a cluster that probes every node on 3 StorageClasses with 2 profiles has 6,000 groups.
One Pushgateway checks every push against everything it holds (docs/SIZING.md), so this
measures N real Pushgateway replicas (each group on the replica fioprobe.gateway.shards picks)
scraped by one real Prometheus, against one Pushgateway holding all of them.

What a round is: every node starts its probes at its own offset inside the interval
(`fioprobe.probe.schedule.spread_offset`, what the per-node DaemonSet uses) and pushes its 6
groups one after the other through `fioprobe.publish.outcome` (merge, state file, PUT), exactly
as `fioprobe run` does. The real probe spends fio's runtime between two pushes; here they follow
at once, which is harder on the Pushgateway. After every round the benchmark checks, in every
replica's API and in Prometheus, that every group is present exactly once (on its own
replica) with exactly the cumulative runs and latency samples of the rounds so far, and
records push latency, Pushgateway RSS per replica and Prometheus' scrape_duration_seconds /
scrape_samples_scraped per replica.

The probes start with state files that already own their groups (a probe that has run
before: the per-node mode keeps its state on the node), so a push is one PUT. The first run
of a probe without a state reads its group back; that costs a download of its replica and
is measured at 500 groups in docs/SIZING.md.

    PYTHONPATH=tests .venv/bin/python bench/sharded_load.py [--nodes 1000] [--shards 6]
        [--interval 300] [--rounds 3] [--contrast-rounds 2] [--write]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from fioprobe.fio.parse import parse_file
from fioprobe.gateway.shards import Shards
from fioprobe.gateway.transport import PushError, Transport
from fioprobe.grouping import JOB
from fioprobe.metrics.collector import ProbeOutcome
from fioprobe.metrics.totals import GroupTotals
from fioprobe.probe.schedule import spread_offset
from fioprobe.publish import state
from fioprobe.publish.outcome import publish
from fioprobe.publish.state import GroupState
from fioprobe.publish.statefile import StateDir, StateFile
from support import services

REPO = Path(__file__).resolve().parents[1]

CORPUS = REPO / "tests" / "data" / "fio-corpus"
SAMPLE = CORPUS / "fio3.39-jsonplus-bins-macos-posixaio-randwrite-extracted.json"
STORAGE_CLASSES = ("gp2", "gp3", "io2")
PROFILES = ("etcd-fsync", "randread-iops")


# --- real components ------------------------------------------------------------------------


class Gateways:
    """N real Pushgateways and one real Prometheus scraping all of them (honor_labels, one
    target label `replica` each, as a ServiceMonitor's `pod` label sets them apart)."""

    def __init__(
        self,
        workdir: Path,
        replicas: int,
        *,
        scrape_interval: str = "30s",
        external_labels: dict[str, str] | None = None,
        remote_write_url: str | None = None,
    ) -> None:
        self.workdir = workdir
        self.gateways = [services.pushgateway(workdir / f"pgw-{i}") for i in range(replicas)]
        self.scrape_interval = scrape_interval
        self.external_labels = external_labels or {}
        self.remote_write_url = remote_write_url
        self.prometheus: services.Service | None = None

    def start(self) -> Gateways:
        try:
            for gateway in self.gateways:
                gateway.start()
            self.prometheus = self._prometheus().start(timeout=60)
        except BaseException:
            self.stop()
            raise
        return self

    def add_replica(self) -> services.Service:
        """One more Pushgateway, scraped too (Prometheus reloads its configuration)."""
        gateway = services.pushgateway(self.workdir / f"pgw-{len(self.gateways)}").start()
        self.gateways.append(gateway)
        assert self.prometheus is not None
        self._write_config()
        request = urllib.request.Request(self.prometheus.url + "/-/reload", method="POST")
        with urllib.request.urlopen(request, timeout=30):
            pass
        return gateway

    def stop(self) -> None:
        if self.prometheus is not None:
            self.prometheus.stop()
        for gateway in self.gateways:
            gateway.stop()

    def __enter__(self) -> Gateways:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    @property
    def urls(self) -> list[str]:
        return [gateway.url for gateway in self.gateways]

    def shards(self, timeout_seconds: float = 30.0) -> Shards:
        return Shards(tuple(Transport(url, timeout_seconds=timeout_seconds) for url in self.urls))

    def _write_config(self) -> Path:
        config: dict[str, object] = {
            "global": {
                "scrape_interval": self.scrape_interval,
                "scrape_timeout": self.scrape_interval,
                "evaluation_interval": self.scrape_interval,
                "external_labels": self.external_labels,
            },
            "scrape_configs": [
                {
                    "job_name": "pushgateway",
                    "honor_labels": True,
                    "static_configs": [
                        {
                            "targets": [f"{services.LOCALHOST}:{g.port}"],
                            "labels": {"replica": str(i)},
                        }
                        for i, g in enumerate(self.gateways)
                    ],
                }
            ],
        }
        if self.remote_write_url:
            config["remote_write"] = [
                {"url": self.remote_write_url, "queue_config": {"batch_send_deadline": "1s"}}
            ]
        path = self.workdir / "prom" / "prometheus.yml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(config, indent=2))
        return path

    def _prometheus(self) -> services.Service:
        port = services.free_port()
        config = self._write_config()
        command = [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={config.parent / 'data'}",
            f"--web.listen-address={services.LOCALHOST}:{port}",
            "--web.enable-lifecycle",
        ]
        return services.Service("prometheus", command, port, config.parent)


def held_groups(url: str) -> list[dict[str, object]]:
    with urllib.request.urlopen(url + "/api/v1/metrics", timeout=120) as response:
        return [g for g in json.load(response)["data"] if g["labels"].get("job") == JOB]


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


# --- checks ---------------------------------------------------------------------------------


def _ident(labels: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in labels.items() if k != "job"))


def check_exactly_once(
    gateways: Gateways, keys: list[dict[str, str]], runs: int, samples_per_run: int
) -> None:
    """Every group on exactly one replica, its own, with `runs` runs and runs x samples."""
    shards = gateways.shards()
    where: dict[tuple[tuple[str, str], ...], list[str]] = {}
    counts = {}
    for url in gateways.urls:
        for group in held_groups(url):
            ident = _ident(group["labels"])
            where.setdefault(ident, []).append(url)
            counts[ident] = (
                float(group["fioprobe_runs_total"]["metrics"][0]["value"]),
                float(group["fioprobe_write_latency_seconds"]["metrics"][0]["count"]),
            )
    problems = []
    for key in keys:
        ident = _ident(key)
        own = shards.for_key(key).url
        if where.get(ident) != [own]:
            problems.append(f"{key}: on {where.get(ident)}, belongs on {own}")
        elif counts[ident] != (runs, runs * samples_per_run):
            problems.append(f"{key}: {counts[ident]}, expected {(runs, runs * samples_per_run)}")
    extra = set(where) - {_ident(k) for k in keys}
    if problems or extra:
        raise AssertionError(
            f"{len(problems)} groups wrong, {len(extra)} unexpected after {runs} runs: "
            f"{problems[:3]} {sorted(extra)[:3]}"
        )


def wait_prometheus(prometheus_url: str, groups: int, runs: int, timeout: float) -> float:
    """Seconds until Prometheus holds every group once, each at `runs` runs."""
    started = time.monotonic()
    at_runs = f'count(fioprobe_runs_total{{job="{JOB}"}} == {runs})'
    once = f'count(count by (storageclass, profile, node) (fioprobe_runs_total{{job="{JOB}"}}))'
    series = f'count(fioprobe_runs_total{{job="{JOB}"}})'
    while time.monotonic() - started < timeout:
        values = [services.query(prometheus_url, q) for q in (at_runs, once, series)]
        if all(v and int(float(v[0]["value"][1])) == groups for v in values):
            return time.monotonic() - started
        time.sleep(1)
    raise AssertionError(f"Prometheus did not hold all {groups} groups once at {runs} runs")


# --- the load -------------------------------------------------------------------------------


def group_keys(nodes: int) -> dict[str, list[dict[str, str]]]:
    """Per node, its 6 grouping keys (3 StorageClasses x 2 profiles, `node` in the key)."""
    return {
        f"node-{n:04d}": [
            {"storageclass": sc, "profile": profile, "node": f"node-{n:04d}"}
            for sc in STORAGE_CLASSES
            for profile in PROFILES
        ]
        for n in range(nodes)
    }


@dataclass
class Round:
    number: int
    seconds: float
    latencies: list[float]
    late_seconds: float
    rss_bytes: list[int]
    scrape_duration_seconds: list[float]
    scrape_samples: list[int]
    prometheus_seconds: float

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


@dataclass
class LoadResult:
    groups: int
    replicas: int
    interval_seconds: float
    rounds: list[Round] = field(default_factory=list)
    per_replica_groups: list[int] = field(default_factory=list)
    #: Set when a round could not push every group (the gateways did not keep up).
    incomplete: str = ""
    #: Groups each replica held at the end, and single pushes timed then.
    held: list[int] = field(default_factory=list)
    solo_seconds: list[float] = field(default_factory=list)


def _prometheus_sees(gateways: Gateways, groups: int, runs: int) -> float:
    """Seconds until Prometheus holds every group once at `runs`. Prometheus is started
    again if something else stopped it (a shared machine), said in its log."""
    for _ in range(3):
        prometheus = gateways.prometheus
        assert prometheus is not None
        if prometheus.process is not None and prometheus.process.poll() is not None:
            print(f"Prometheus had stopped ({prometheus.tail(1)}); starting it again", flush=True)
            prometheus.start(timeout=120)
        try:
            return wait_prometheus(prometheus.url, groups, runs, 600)
        except OSError:
            continue
    raise RuntimeError("Prometheus stopped three times")


def scrape_stats(prometheus_url: str, replicas: int) -> tuple[list[float], list[int]]:
    durations, samples = [0.0] * replicas, [0] * replicas
    for metric, into, kind in (
        ("scrape_duration_seconds", durations, float),
        ("scrape_samples_scraped", samples, lambda v: int(float(v))),
    ):
        for item in services.query(prometheus_url, f'{metric}{{job="pushgateway"}}'):
            into[int(item["metric"]["replica"])] = kind(item["value"][1])
    return durations, samples


def warm_state(file: StateFile, replica_url: str) -> None:
    """A state that already owns its group (it has pushed before, to this replica)."""
    state.save(
        file,
        GroupState(totals=GroupTotals(), claimed=True, last_push_at=time.time(), shard=replica_url),
    )


def run_load(
    workdir: Path,
    *,
    nodes: int,
    replicas: int,
    interval_seconds: float,
    rounds: int,
    workers: int = 64,
    scrape_interval: str = "30s",
    log: bool = True,
) -> LoadResult:
    by_node = group_keys(nodes)
    keys = [key for node_keys in by_node.values() for key in node_keys]
    run = parse_file(SAMPLE)
    samples_per_run = sum(
        job.ops["write"].latency.samples or 0 for job in run.jobs if "write" in job.ops
    )
    outcome = ProbeOutcome(run, success=True, duration_seconds=5.0, volume_type="gp3")
    result = LoadResult(len(keys), replicas, interval_seconds)
    with Gateways(workdir, replicas, scrape_interval=scrape_interval) as gateways:
        shards = gateways.shards()
        files: dict[str, list[StateFile]] = {}
        for node, node_keys in by_node.items():
            directory = StateDir(workdir / "state" / node, create_parents=True)
            files[node] = [directory.group_file(key) for key in node_keys]
            for key, file in zip(node_keys, files[node], strict=True):
                warm_state(file, shards.for_key(key).url)
        result.per_replica_groups = [
            sum(1 for k in keys if shards.for_key(k).url == url) for url in gateways.urls
        ]
        lock = threading.Lock()

        def node_run(
            node: str, start: float, latencies: list[float], late: list[float], lost: list[str]
        ) -> None:
            delay = start - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                late.append(-delay)
            if -delay > interval_seconds:  # as `run --every`: a missed slot is skipped
                with lock:
                    lost.extend(["skipped"] * len(by_node[node]))
                return
            for key, file in zip(by_node[node], files[node], strict=True):
                began = time.perf_counter()
                try:
                    publish(outcome, key, shards, file)
                except PushError:  # kept in the state; pushed by the next run
                    with lock:
                        lost.append("push failed")
                    continue
                with lock:
                    latencies.append(time.perf_counter() - began)

        order = sorted(by_node, key=lambda node: spread_offset(node, interval_seconds))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for number in range(1, rounds + 1):
                latencies: list[float] = []
                late: list[float] = [0.0]
                lost: list[str] = []
                began = time.monotonic() + 1.0
                starts = {node: began + spread_offset(node, interval_seconds) for node in order}
                futures = [
                    pool.submit(node_run, node, starts[node], latencies, late, lost)
                    for node in order
                ]
                for future in futures:
                    future.result()
                seconds = time.monotonic() - began
                if lost:  # the gateway could not keep up: say how far it got, then stop
                    result.incomplete = (
                        f"round {number}: {len(latencies)} of {len(keys)} pushes done in "
                        f"{seconds:.0f} s, {lost.count('push failed')} failed after "
                        f"{shards.transports[0].attempts} attempts of "
                        f"{shards.transports[0].timeout_seconds:g} s, "
                        f"{lost.count('skipped')} skipped (slot missed by a whole interval); "
                        f"push p50 {statistics.median(latencies) * 1000:.0f} ms, p99 "
                        f"{sorted(latencies)[math.ceil(0.99 * len(latencies)) - 1] * 1000:.0f} "
                        f"ms, max {max(latencies) * 1000:.0f} ms"
                    )
                    if log:
                        print(result.incomplete, flush=True)
                    break
                check_exactly_once(gateways, keys, number, samples_per_run)
                rss = [rss_bytes(g.process.pid) for g in gateways.gateways if g.process]
                if log:  # the gateways' side at once; Prometheus' side in the line after
                    ordered = sorted(latencies)
                    print(
                        f"round {number}: exact on every replica, {seconds:.0f} s, push p50 "
                        f"{ordered[len(ordered) // 2] * 1000:.0f} ms, p99 "
                        f"{ordered[math.ceil(0.99 * len(ordered)) - 1] * 1000:.0f} ms",
                        flush=True,
                    )
                seen = _prometheus_sees(gateways, len(keys), number)
                time.sleep(float(scrape_interval.rstrip("s")) + 1)  # one whole scrape after
                durations, scraped = scrape_stats(gateways.prometheus.url, replicas)
                measured = Round(number, seconds, latencies, max(late), rss, durations,
                                 scraped, seen)  # fmt: skip
                result.rounds.append(measured)
                if log:
                    print(round_line(result, measured), flush=True)
        # One push at a time into the filled replicas: the server's own cost per push, which
        # grows with the groups a replica holds (no queue in front of it here).
        result.held = [len(held_groups(url)) for url in gateways.urls]
        for key in keys[:: max(1, len(keys) // 30)][:30]:
            node = key["node"]
            file = files[node][by_node[node].index(key)]
            began = time.perf_counter()
            publish(outcome, key, shards, file)
            result.solo_seconds.append(time.perf_counter() - began)
        if log:
            print(solo_line(result), flush=True)
    return result


def solo_line(result: LoadResult) -> str:
    ordered = sorted(result.solo_seconds)
    return (
        f"- {result.replicas} replica(s) holding {' / '.join(map(str, result.held))} groups: "
        f"one push at a time p50 {statistics.median(ordered) * 1000:.0f} ms, max "
        f"{ordered[-1] * 1000:.0f} ms (n={len(ordered)})"
    )


# --- report ---------------------------------------------------------------------------------


def round_line(result: LoadResult, r: Round) -> str:
    mib = [f"{b / 2**20:.0f}" for b in r.rss_bytes]
    return (
        f"| {result.replicas} | {r.number} | {r.seconds:.0f} | {r.percentile(0.5) * 1000:.0f} "
        f"| {r.percentile(0.99) * 1000:.0f} | {max(r.latencies) * 1000:.0f} "
        f"| {r.late_seconds:.1f} | {' / '.join(mib)} "
        f"| {' / '.join(f'{d * 1000:.0f}' for d in r.scrape_duration_seconds)} "
        f"| {' / '.join(str(s) for s in r.scrape_samples)} |"
    )


HEADER = (
    "| replicas | round | wall s | push p50 ms | push p99 ms | max ms | latest start s "
    "| Pushgateway RSS MiB (per replica) | scrape_duration ms (per replica) "
    "| samples scraped (per replica) |\n|---|---|---|---|---|---|---|---|---|---|"
)


def report(results: list[LoadResult], note: str) -> str:
    lines = [note, "", HEADER]
    for result in results:
        lines += [round_line(result, r) for r in result.rounds]
    lines.append("")
    for result in results:
        if result.incomplete:
            lines.append(f"- {result.replicas} replica(s): {result.incomplete}.")
        if result.solo_seconds:
            lines.append(solo_line(result) + ".")
        every = [x for r in result.rounds for x in r.latencies]
        if not every:
            continue
        lines.append(
            f"- {result.replicas} replica(s), groups per replica "
            f"{' / '.join(map(str, result.per_replica_groups))}: all {len(every)} pushes p50 "
            f"{statistics.median(every) * 1000:.0f} ms, p99 "
            f"{sorted(every)[math.ceil(0.99 * len(every)) - 1] * 1000:.0f} ms, max "
            f"{max(every) * 1000:.0f} ms."
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--shards", type=int, default=6)
    parser.add_argument("--interval", type=float, default=300.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--contrast-rounds", type=int, default=2, help="0: no single replica")
    parser.add_argument("--only-contrast", action="store_true", help="the single replica only")
    parser.add_argument("--scrape-interval", default="30s")
    parser.add_argument("--out", type=Path, help="write the markdown table here too")
    args = parser.parse_args()
    results = []
    load = os.getloadavg()[0]
    plans = [] if args.only_contrast else [(args.shards, args.rounds)]
    if args.contrast_rounds:
        plans.append((1, args.contrast_rounds))
    print(HEADER, flush=True)
    for replicas, rounds in plans:
        with tempfile.TemporaryDirectory(prefix="fioprobe-sharded-") as tmp:
            result = run_load(
                Path(tmp), nodes=args.nodes, replicas=replicas, interval_seconds=args.interval,
                rounds=rounds, scrape_interval=args.scrape_interval,
            )  # fmt: skip
            results.append(result)
    note = (
        f"{args.nodes} nodes x {len(STORAGE_CLASSES) * len(PROFILES)} groups, interval "
        f"{args.interval:g} s, scrape every {args.scrape_interval}; {os.cpu_count()} CPUs, load "
        f"average {load:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    text = report(results, note)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
