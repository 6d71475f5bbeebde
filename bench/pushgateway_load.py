"""Load on one real Pushgateway scraped by one real Prometheus: many probe groups at once.

Why: every probe group (StorageClass x profile, and node x profile for etcd disks) is one
Pushgateway group that Prometheus scrapes in full at every interval. A big cluster has
hundreds; this measures what one Pushgateway holds, to say when to shard (docs/SIZING.md).

Each group pushes what a real probe pushes: a json+ fio result (cumulative histograms with
bins, last-run summaries, health, cost) merged into its own state file and PUT, through
`fioprobe.publish.outcome` exactly as `fioprobe probe` does. Groups push concurrently from a bounded
thread pool, several rounds. After every round the benchmark checks that every group is
present with the right cumulative counts, in the Pushgateway's API and in Prometheus, and
records push latency (merge + state save + PUT, p50/p99), the Pushgateway's RSS, the size of
its /metrics page and Prometheus' scrape_duration_seconds / scrape_samples_scraped.

    PYTHONPATH=tests .venv/bin/python bench/pushgateway_load.py [--nodes 100] [--profiles 5]
        [--rounds 4]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from fioprobe.fio.parse import parse_file
from fioprobe.gateway.transport import Transport
from fioprobe.grouping import JOB
from fioprobe.metrics.collector import ProbeOutcome
from fioprobe.publish.outcome import publish
from fioprobe.publish.statefile import StateDir
from support import services

REPO = Path(__file__).resolve().parents[1]

CORPUS = REPO / "tests" / "data" / "fio-corpus"
#: A json+ result with bins: the realistic (largest) payload of a probe.
SAMPLE = CORPUS / "fio3.39-jsonplus-bins-macos-posixaio-randwrite-extracted.json"
PROFILES = ["etcd-fsync", "randread-iops", "randwrite-iops", "seqread-bw", "seqwrite-bw",
            "burst-ceiling"]  # fmt: skip


@dataclass
class Round:
    number: int
    seconds: float
    latencies: list[float]
    rss_bytes: int
    scrape_bytes: int
    scrape_duration_seconds: float
    scrape_samples: int
    prometheus_seconds: float

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class LoadResult:
    groups: int
    workers: int
    rounds: list[Round] = field(default_factory=list)
    #: One push at a time into the full gateway (no client contention): the server's cost.
    solo_push_seconds: list[float] = field(default_factory=list)
    #: What a probe without a state file downloads to read its totals back.
    readback_bytes: int = 0
    readback_seconds: float = 0.0


def group_keys(nodes: int, profiles: int) -> list[dict[str, str]]:
    """node-local groups, as the etcd-disk probes of `nodes` nodes would push them."""
    return [
        {"storageclass": "etcd-disk", "profile": profile, "node": f"node-{n:03d}"}
        for n in range(nodes)
        for profile in PROFILES[:profiles]
    ]


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def check_gateway(gateway: services.Service, keys: list[dict[str, str]], runs: int, n: int):
    """Every group present with `runs` runs and runs x n latency samples, per the API."""
    with urllib.request.urlopen(gateway.url + "/api/v1/metrics", timeout=60) as response:
        data = json.load(response)["data"]
    found = {}
    for group in data:
        labels = group["labels"]
        if labels.get("job") != JOB:
            continue
        found[(labels["storageclass"], labels["profile"], labels.get("node"))] = (
            float(group["fioprobe_runs_total"]["metrics"][0]["value"]),
            float(group["fioprobe_write_latency_seconds"]["metrics"][0]["count"]),
        )
    wanted = {(k["storageclass"], k["profile"], k.get("node")): (runs, runs * n) for k in keys}
    if found != wanted:
        wrong = [k for k in wanted if found.get(k) != wanted[k]]
        raise AssertionError(f"{len(wrong)} groups wrong after round {runs}, e.g. {wrong[:3]}")


def wait_prometheus(prometheus: services.Service, groups: int, runs: int, timeout: float) -> float:
    """Seconds until Prometheus has scraped every group at `runs` runs."""
    started = time.monotonic()
    promql = f'count(fioprobe_runs_total{{job="{JOB}"}} == {runs})'
    while time.monotonic() - started < timeout:
        result = services.query(prometheus.url, promql)
        if result and int(float(result[0]["value"][1])) == groups:
            # The histogram's count agrees too (one query over all groups).
            return time.monotonic() - started
        time.sleep(0.2)
    raise AssertionError(f"Prometheus did not see all {groups} groups at {runs} runs")


def scrape_stats(prometheus: services.Service) -> tuple[float, int]:
    duration = services.query(prometheus.url, 'scrape_duration_seconds{job="pushgateway"}')
    samples = services.query(prometheus.url, 'scrape_samples_scraped{job="pushgateway"}')
    return float(duration[0]["value"][1]), int(float(samples[0]["value"][1]))


def run_load(
    workdir: Path,
    *,
    nodes: int,
    profiles: int,
    rounds: int,
    workers: int = 32,
    scrape_interval: str = "5s",
) -> LoadResult:
    keys = group_keys(nodes, profiles)
    run = parse_file(SAMPLE)
    samples_per_run = sum(
        job.ops["write"].latency.samples or 0 for job in run.jobs if "write" in job.ops
    )
    outcome = ProbeOutcome(run, success=True, duration_seconds=5.0, volume_type="gp3")
    gateway = services.pushgateway(workdir / "pgw").start()
    prometheus = services.prometheus(
        workdir / "prom", {"pushgateway": f"127.0.0.1:{gateway.port}"},
        scrape_interval=scrape_interval,
    )  # fmt: skip
    result = LoadResult(groups=len(keys), workers=workers)
    try:
        prometheus.start()
        transport = Transport(gateway.url, timeout_seconds=30, attempts=3)

        def one(index: int) -> float:
            key = keys[index]
            state = StateDir(workdir / "state" / str(index), create_parents=True).file(
                "state.json"
            )  # one volume per probe
            started = time.perf_counter()
            publish(outcome, key, transport, state)
            return time.perf_counter() - started

        with ThreadPoolExecutor(max_workers=workers) as pool:
            for number in range(1, rounds + 1):
                started = time.monotonic()
                latencies = list(pool.map(one, range(len(keys))))
                seconds = time.monotonic() - started
                check_gateway(gateway, keys, number, samples_per_run)
                seen_after = wait_prometheus(prometheus, len(keys), number, timeout=120)
                time.sleep(float(scrape_interval.rstrip("s")) + 0.5)  # one full scrape after
                with urllib.request.urlopen(gateway.url + "/metrics", timeout=60) as response:
                    scrape_bytes = len(response.read())
                duration, scraped = scrape_stats(prometheus)
                assert gateway.process is not None
                result.rounds.append(
                    Round(number, seconds, latencies, rss_bytes(gateway.process.pid),
                          scrape_bytes, duration, scraped, seen_after)
                )  # fmt: skip
        for index in range(min(20, len(keys))):
            result.solo_push_seconds.append(one(index))
        started = time.perf_counter()
        with urllib.request.urlopen(gateway.url + "/api/v1/metrics", timeout=60) as response:
            result.readback_bytes = len(response.read())
        result.readback_seconds = time.perf_counter() - started
    finally:
        prometheus.stop()
        gateway.stop()
    return result


def report(result: LoadResult) -> str:
    lines = [
        f"{result.groups} groups, {result.workers} concurrent pushers",
        "",
        "| round | wall s | push p50 ms | push p99 ms | max ms | Pushgateway RSS MiB "
        "| /metrics KiB | scrape_duration ms | samples scraped |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result.rounds:
        lines.append(
            f"| {r.number} | {r.seconds:.1f} | {r.percentile(0.5) * 1000:.1f} "
            f"| {r.percentile(0.99) * 1000:.1f} | {max(r.latencies) * 1000:.1f} "
            f"| {r.rss_bytes / 2**20:.1f} | {r.scrape_bytes / 1024:.0f} "
            f"| {r.scrape_duration_seconds * 1000:.1f} | {r.scrape_samples} |"
        )
    all_latencies = [x for r in result.rounds for x in r.latencies]
    lines += [
        "",
        f"all pushes: p50 {statistics.median(all_latencies) * 1000:.1f} ms, "
        f"p99 {sorted(all_latencies)[int(0.99 * len(all_latencies))] * 1000:.1f} ms, "
        f"n={len(all_latencies)}",
        f"one push at a time into the full gateway: p50 "
        f"{statistics.median(result.solo_push_seconds) * 1000:.1f} ms, max "
        f"{max(result.solo_push_seconds) * 1000:.1f} ms (n={len(result.solo_push_seconds)})",
        f"read-back (GET /api/v1/metrics, what a probe without state file downloads): "
        f"{result.readback_bytes / 2**20:.1f} MiB in {result.readback_seconds * 1000:.0f} ms",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--profiles", type=int, default=5, choices=range(1, len(PROFILES) + 1))
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument("--scrape-interval", default="5s")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fioprobe-load-") as tmp:
        result = run_load(
            Path(tmp), nodes=args.nodes, profiles=args.profiles, rounds=args.rounds,
            workers=args.workers, scrape_interval=args.scrape_interval,
        )  # fmt: skip
    print(report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
