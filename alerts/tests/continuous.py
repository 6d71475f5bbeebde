"""promtool unit tests of the continuous stream's alerts (groups fioprobe-continuous and
fioprobe-continuous-burn), generated from simulated streams.

Why generated: a stream is one write + fdatasync a second, scraped every 15 s, for up to a
day (the longest burn-rate window) - far too long to write by hand - and what an alert should
show (the in-flight age, the stalled seconds, the burn rate) follows from those operations.
So each scenario simulates the writer (`fioprobe continuous`: an operation due every second,
never two at once, the next one due a second after the last was due or when it ended,
whichever is later), scrapes it the way Prometheus does (every 15 s; a staleness marker at
the first failed scrape and when a pod is gone, so a gauge vanishes at once; a new pod with
new `pod`/`instance` labels and counters from 0; a Prometheus that was down leaves no
samples and no markers), and writes the samples in promtool's notation.

What each alert must do is then computed here from the same samples by `Mirror`, a small
re-implementation of the PromQL the rules use (Prometheus 2.42: rate()'s extrapolation,
ranges that include both ends, the 5-minute lookback, staleness, keep_firing_for), and
every scenario states its requirement as an assertion on that result (a 120 s hang pages
before it ends, a 10 s hang never pages, a gap changes nothing, ...). The promtool checks
pin the real rules to the same timeline: each alert silent one evaluation before it fires,
firing with its exact labels and annotations, still firing and resolved where the timeline
says so, and, per scenario, the complete set of stream alerts that were ever pending or
firing (from the ALERTS series), so "nothing else fired, at any evaluation" is checked too.

`python alerts/tests/continuous.py [outdir]` writes alerts/tests/continuous.yaml and
continuous-burn.yaml, one per alert group (scripts/generate.d/15-alert-tests.sh). Times are
seconds from the start of each test.
"""

from __future__ import annotations

import bisect
import itertools
import math
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from fioprobe import __version__
from fioprobe.metrics.table import LATENCY_BUCKETS_SECONDS
from scenario_engine import OPERATOR_LABELS, POD, RUNBOOKS
from scenarios import DEPLOYMENTS, GROUP_ORDER

SCRAPE_S = 15
#: What the committed rules use (config.libsonnet's defaults; the manifests' continuous.*).
OBJECTIVE_RATIO = 0.99
BUDGET = 0.01  # 1 - OBJECTIVE_RATIO as the rules print it
ETCD_THRESHOLD_S = 0.01
TYPE_THRESHOLDS_S = {
    "io1": 0.005,
    "io2": 0.005,
    "gp2": 0.02,
    "gp3": 0.02,
    "ceph-rbd": 0.032,
    "st1": 0.256,
    "sc1": 0.256,
}
DEFAULT_THRESHOLD_S = 0.064
#: (long, short, factor, severity on etcd disks), continuousBurnRates.
BURN_RATES = [
    ("1h", "5m", 14.4, "critical"),
    ("6h", "30m", 6.0, "critical"),
    ("1d", "2h", 3.0, "warning"),
]
HANG_CRITICAL_S = 30
HANG_WARNING_S = 60
#: continuousBurnMinSyncs: fdatasyncs the long window must hold before a burn rate counts.
BURN_MIN_SYNCS = 300
STALL_WINDOW_S = 60
STALL_SYNCS = 5
STALL_SECONDS = 5
GAP_TOLERANCE_S = 120  # keep_firing_for, and how long a stream's info is remembered
MISSING_AFTER_S = 300
ROLE_MEMORY_S = 1050  # etcdRoleMemoryRuns (3) x 5 min + half an interval
LOOKBACK_S = 300
#: The writer (manifests' continuous.*: intervalSeconds, writeSize, stallThresholdSeconds).
INTERVAL_US = 1_000_000
WRITE_SIZE = 2300
STALL_THRESHOLD_US = 10_000
#: The default configuration's expected streams (manifests/config.libsonnet).
ETCD_SC, ETCD_NODES = "etcd-disk", ["control-plane-0", "control-plane-1", "control-plane-2"]
EXPECTED = [(ETCD_SC, n) for n in ETCD_NODES] + [("gp2", None), ("gp3", None)]

US = 1_000_000
MS = 1000
LE = [*LATENCY_BUCKETS_SECONDS, math.inf]
DURATION_S = {"m": 60, "h": 3600, "d": 86400}


def seconds(duration: str) -> int:
    return int(duration[:-1]) * DURATION_S[duration[-1]]


# --- latency patterns: the fdatasync latency (µs) of an operation that starts at `t` (µs) ----

HEALTHY_US = 1800


def healthy(_t: int) -> int:
    return HEALTHY_US


def busy_host(t: int) -> int:
    """A busy but healthy host: one fdatasync in 200 (0.5 %) takes 12, 30 or 48 ms, the rest
    1.8 ms. Operations start about once a second, so this is one slow fsync every ~200 s."""
    k = t // INTERVAL_US
    if k % 200 != 100:
        return HEALTHY_US
    return (12_000, 30_000, 48_000)[k // 200 % 3]


def then(
    before: Callable[[int], int], at_s: float, after: Callable[[int], int]
) -> Callable[[int], int]:
    return lambda t: after(t) if t >= at_s * US else before(t)


def slow_fraction(fraction: float, latency_us: int) -> Callable[[int], int]:
    """This fraction of operations (evenly spread) at latency_us, the rest healthy."""
    period = round(1 / fraction)

    def pattern(t: int) -> int:
        k = t // INTERVAL_US
        if fraction >= 1 or k % period < round(fraction * period):
            return latency_us
        return HEALTHY_US

    return pattern


def once(
    at_s: float, latencies_us: list[int], base: Callable[[int], int] = healthy
) -> Callable[[int], int]:
    """Operations due from at_s on take the given latencies, one each, then `base` again."""
    state: dict[str, int] = {}

    def pattern(t: int) -> int:
        if t >= at_s * US:
            i = state.setdefault("next", 0)
            if i < len(latencies_us):
                state["next"] = i + 1
                return latencies_us[i]
        return base(t)

    return pattern


# --- how the rules are evaluated --------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    """How a Prometheus evaluates the rules: every `eval_s`, and the recording groups before
    the alert groups (promtool's group_eval_order, what the committed files use) or after
    them. A real Prometheus evaluates groups independently, so an alert may read what the
    recording groups wrote one evaluation earlier; `records_after_alerts` is that worst case:
    every record an alert reads is one evaluation old."""

    eval_s: int = SCRAPE_S
    records_after_alerts: bool = False

    @property
    def lag_ms(self) -> int:
        return self.eval_s * MS if self.records_after_alerts else 0

    def group_eval_order(self) -> list[str]:
        recording = [g for g in GROUP_ORDER if "." in g]
        alerting = [g for g in GROUP_ORDER if "." not in g]
        return alerting + recording if self.records_after_alerts else recording + alerting


IN_ORDER = Timing()


# --- streams, as the writer runs them and Prometheus scrapes them ----------------------------


@dataclass
class Stream:
    storageclass: str
    node: str | None = None
    etcd_disk: bool = True
    volume_type: str = "unknown"
    cluster: str | None = None
    latency: Callable[[int], int] = healthy
    #: The pod started this long before the test (its first samples are at time 0).
    start_s: int = -60
    #: The stream's pod is gone for good from here (not replaced).
    end_s: int | None = None
    #: A new pod replaces the old one here (new pod/instance labels, counters from 0); it is
    #: scraped RESTART_DELAY_S later.
    restarts: list[int] = field(default_factory=list)
    #: The same pod's counters start again from 0 here (its container restarted).
    resets: list[int] = field(default_factory=list)
    #: Failed scrapes in [start, end): a staleness marker at the first one.
    scrape_gaps: list[tuple[int, int]] = field(default_factory=list)
    #: The new pod started at this restart says this role (etcd_disk) from then on: the
    #: deployment was reconfigured.
    roles: dict[int, bool] = field(default_factory=dict)
    #: The role the scheduled probe of the same target pushes (fioprobe_info{etcd_disk}, a push
    #: every PUSH_EVERY_S), if it has one.
    pushed_role: bool | None = None
    #: The probe pushes no more from here; its group stays on the Pushgateway.
    pushes_end_s: int | None = None
    #: Operations due in [start, end) fail at once with this reason (the writer's FAIL).
    failures: list[tuple[int, int, str]] = field(default_factory=list)

    def failure_at(self, due_us: int) -> str | None:
        for start, end, reason in self.failures:
            if start * US <= due_us < end * US:
                return reason
        return None

    @property
    def key(self) -> tuple[str | None, str, str | None]:
        return (self.cluster, self.storageclass, self.node)

    def threshold_s(self, etcd: bool) -> float:
        """The objective's threshold of the stream while its role is `etcd`."""
        if etcd:
            return ETCD_THRESHOLD_S
        return TYPE_THRESHOLDS_S.get(self.volume_type, DEFAULT_THRESHOLD_S)

    def possible_roles(self) -> list[bool]:
        """Every role the stream says or is pushed to have at some time."""
        said = {self.etcd_disk, *self.roles.values()}
        if self.pushed_role is not None:
            said.add(self.pushed_role)
        return sorted(said, reverse=True)

    def identity(self) -> dict[str, str]:
        out = {"storageclass": self.storageclass}
        if self.node:
            out["node"] = self.node
        if self.cluster:
            out["cluster"] = self.cluster
        return out

    def text(self) -> str:
        out = f"the continuous stream of storageclass {self.storageclass}"
        if self.node:
            out += f" on node {self.node}"
        if self.cluster:
            out += f" in cluster {self.cluster}"
        return out


RESTART_DELAY_S = 20
RESET_DELAY_S = 5


@dataclass
class Pod:
    """One run of the stream's process: its operations, and the series it is scraped as."""

    name: str
    instance: str
    start_us: int
    end_us: int
    #: Continues the previous pod's series (a container restart in the same pod).
    same_series: bool = False
    #: The role this pod's configuration gives the target (etcd_disk).
    etcd_disk: bool = True


def pods_of(s: Stream, horizon_s: int) -> list[Pod]:
    """The stream's pods: a DaemonSet's (node-local targets: a new name each) or a
    StatefulSet's (`<name>-0` again after a restart); every new pod has a new address."""
    cuts = sorted([(t, "restart") for t in s.restarts] + [(t, "reset") for t in s.resets])
    end = (s.end_s if s.end_s is not None else horizon_s + SCRAPE_S) * US
    host = sum(map(ord, "/".join(filter(None, s.key)))) % 200 + 10

    def name(n: int) -> str:
        if s.node:
            return f"fioprobe-continuous-{('x7k2p', 'q8zr4', 'm3vt9')[n % 3]}{host}"
        return f"fioprobe-continuous-{s.storageclass}-0"

    assert set(s.roles) <= set(s.restarts), "a new role comes with a new pod"
    out = [Pod(name(0), f"10.0.3.{host}:9436", s.start_s * US, end, etcd_disk=s.etcd_disk)]
    for n, (t, kind) in enumerate(cuts, start=1):
        out[-1].end_us = t * US
        role = s.roles.get(t, out[-1].etcd_disk)
        if kind == "restart":
            pod = Pod(
                name(n), f"10.0.{3 + n}.{host}:9436", (t + RESTART_DELAY_S) * US, end, False, role
            )
        else:
            pod = Pod(out[-1].name, out[-1].instance, (t + RESET_DELAY_S) * US, end, True, role)
        out.append(pod)
    return out


STALE = "stale"


@dataclass
class SeriesData:
    metric: str
    labels: dict[str, str]
    #: Scrape slot -> value or STALE; absent slots are missing samples.
    slots: dict[int, float | str] = field(default_factory=dict)
    exact: bool = True  # a rule reads it: no expanding notation for non-integer steps

    def finish(self) -> None:
        """Arrays for the mirror: real samples (t in ms) and staleness markers."""
        self.times = [k * SCRAPE_S * MS for k, v in sorted(self.slots.items()) if v != STALE]
        self.values = [float(v) for _, v in sorted(self.slots.items()) if v != STALE]
        self.stale = [k * SCRAPE_S * MS for k, v in sorted(self.slots.items()) if v == STALE]
        corr = [0.0]
        for i in range(1, len(self.values)):
            drop = self.values[i] < self.values[i - 1]
            corr.append(corr[-1] + (self.values[i - 1] if drop else 0.0))
        self.resets_prefix = corr


def scrape(s: Stream, horizon_s: int, prometheus_gaps: list[tuple[int, int]]) -> list[SeriesData]:
    """Every series of the stream, scraped every SCRAPE_S from 0 to horizon_s."""
    base = {
        "job": "fioprobe-etcd/fioprobe-continuous"
        if s.node
        else f"fioprobe/fioprobe-continuous-{s.storageclass}",
        "namespace": "fioprobe-etcd" if s.node else "fioprobe",
        "container": "fioprobe",
        "endpoint": "metrics",
    }
    series: dict[tuple[str, str], SeriesData] = {}
    slots = horizon_s // SCRAPE_S + 1
    down = {k for k in range(slots) for a, b in prometheus_gaps if a <= k * SCRAPE_S < b}
    failed = {k for k in range(slots) for a, b in s.scrape_gaps if a <= k * SCRAPE_S < b}
    pods = pods_of(s, horizon_s)
    for index, pod in enumerate(pods):
        labels = {**base, "instance": pod.instance, "pod": pod.name, **s.identity()}
        ops = operations(s, pod)
        ends = [start + lat for start, lat in ops]
        bucket_of = [bisect.bisect_left(LE, lat / US) for _, lat in ops]
        reason_of = [s.failure_at(start) for start, _ in ops]
        # Scraped from a second after the process started until it ends.
        first = max(0, -(-(pod.start_us + US) // (SCRAPE_S * US)))
        last = min(slots - 1, (pod.end_us - 1) // (SCRAPE_S * US))
        done, counts, total_us, stall_done_us = 0, [0] * len(LE), 0, 0
        completed, errors, reason, failing_since = 0, {}, "", None
        exposed: set[tuple[str, str]] = set()
        keys: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[tuple[str, str], dict[str, str]]]
        keys = {}
        for k in range(first, last + 1):
            t = k * SCRAPE_S * US
            while done < len(ops) and ends[done] <= t:
                failure = reason_of[done]
                if failure is None:
                    counts[bucket_of[done]] += 1
                    total_us += ops[done][1]
                    stall_done_us += max(0, ops[done][1] - STALL_THRESHOLD_US)
                    completed += 1
                    reason, failing_since = "", None
                else:
                    errors[failure] = errors.get(failure, 0) + 1
                    reason = failure
                    failing_since = ends[done] if failing_since is None else failing_since
                done += 1
            if k in down:
                continue
            inflight_us, stall_us = 0, stall_done_us
            if done < len(ops) and ops[done][0] <= t:
                inflight_us = t - ops[done][0]
                stall_us += max(0, inflight_us - STALL_THRESHOLD_US)
            cumulative = list(itertools.accumulate(counts))
            values: list[tuple[str, dict[str, str], float, bool]] = [
                *[
                    (
                        "fioprobe_continuous_sync_latency_seconds_bucket",
                        {"le": "+Inf" if le == math.inf else f"{le:g}"},
                        n,
                        True,
                    )
                    for le, n in zip(LE, cumulative, strict=True)
                ],
                ("fioprobe_continuous_sync_latency_seconds_count", {}, completed, True),
                ("fioprobe_continuous_sync_latency_seconds_sum", {}, total_us / US, False),
                ("fioprobe_continuous_inflight_seconds", {}, inflight_us / US, True),
                ("fioprobe_continuous_stall_seconds_total", {}, stall_us / US, True),
                ("fioprobe_continuous_operations_total", {}, completed, True),
                ("fioprobe_continuous_written_bytes_total", {}, completed * WRITE_SIZE, True),
                ("fioprobe_continuous_success", {}, 0 if reason else 1, True),
                *[
                    ("fioprobe_continuous_errors_total", {"reason": r}, n, True)
                    for r, n in sorted(errors.items())
                ],
                (
                    "fioprobe_continuous_failing_seconds",
                    {"reason": reason} if reason else {},
                    0 if failing_since is None else (t - failing_since) / US,
                    True,
                ),
                (
                    "fioprobe_continuous_info",
                    {
                        "etcd_disk": "true" if pod.etcd_disk else "false",
                        "ran_on_node": s.node or "worker-1",
                        "volume_type": s.volume_type,
                        "device": "nvme1n1" if s.node else "nvme2n1",
                        "disk": "nvme1n1" if s.node else "nvme2n1",
                        "major_minor": "259:1" if s.node else "259:4",
                        "version": __version__,
                    },
                    1,
                    True,
                ),
            ]
            now: set[tuple[str, str]] = set()
            for metric, extra, value, exact in values:
                # A series' key, made once per pod and label set (the loop's hot spot).
                cached = (metric, tuple(extra.items()))
                if cached not in keys:
                    full = {**labels, **extra}
                    keys[cached] = ((metric, str(sorted(full.items()))), full)
                key, full = keys[cached]
                now.add(key)
                data = series.get(key) or series.setdefault(
                    key, SeriesData(metric, full, exact=exact)
                )
                data.slots[k] = STALE if k in failed and k - 1 not in failed else value
                if k in failed and k - 1 in failed:
                    del data.slots[k]
            # A series the target no longer exposes (a label that changed) is marked stale.
            for key in exposed - now:
                series[key].slots.setdefault(k, STALE)
            exposed = now
        gone = pod.end_us < horizon_s * US and not (
            index + 1 < len(pods) and pods[index + 1].same_series
        )
        if gone:
            # Prometheus marks the series stale when the pod's target disappears.
            k = -(-pod.end_us // (SCRAPE_S * US))
            if k < slots and k not in down:
                for data in series.values():
                    if data.labels["instance"] == pod.instance:
                        data.slots.setdefault(k, STALE)
    if s.pushed_role is not None:
        series.update(pushed(s, slots, down))
    for data in series.values():
        data.finish()
    return list(series.values())


#: The scheduled probe's schedule, where a scenario has one (Stream.pushed_role): it pushes
#: 20 s into each slot, and the Pushgateway is scraped every SCRAPE_S.
PUSH_EVERY_S = 300


def pushed(s: Stream, slots: int, down: set[int]) -> dict[tuple[str, str], SeriesData]:
    """The probe's group on the Pushgateway, as Prometheus scrapes it: its fioprobe_info
    with the role it pushes, and its push time (the last push at or before the scrape)."""
    labels = {**OPERATOR_LABELS, "pod": POD, **s.identity(), "profile": "etcd-fsync"}
    info = SeriesData(
        "fioprobe_info",
        {**labels, "etcd_disk": "true" if s.pushed_role else "false", "volume_type": s.volume_type},
    )
    push_time = SeriesData("push_time_seconds", labels)
    for k in range(slots):
        t = k * SCRAPE_S
        if k in down:
            continue
        if s.pushes_end_s is not None:
            t = min(t, s.pushes_end_s - 1)
        info.slots[k] = 1
        push_time.slots[k] = (t - 20) // PUSH_EVERY_S * PUSH_EVERY_S + 20
    return {("fioprobe_info", "pushed"): info, ("push_time_seconds", "pushed"): push_time}


#: A failed operation returns at once (EIO, a refused directory).
FAILED_US = 1000


def operations(s: Stream, pod: Pod) -> list[tuple[int, int]]:
    """(start, latency) in µs of each operation of the pod: the first due half a second
    after it started, each next one a second after the last was due, or when it ended."""
    out = []
    due = pod.start_us + US // 2
    while due < pod.end_us:
        latency = FAILED_US if s.failure_at(due) else s.latency(due)
        out.append((due, latency))
        due = max(due + INTERVAL_US, due + latency)
    return out


# --- the rules, mirrored ----------------------------------------------------------------------


class Mirror:
    """What the rules compute at an evaluation time, from the scraped samples."""

    def __init__(
        self, streams: list[Stream], series: dict[tuple, list[SeriesData]], timing: Timing
    ) -> None:
        self.streams = streams
        self.series = series  # by stream key
        self.eval_s = timing.eval_s
        #: How old the records an alert reads are (0: written earlier in the same evaluation).
        self.lag = timing.lag_ms
        self._of: dict[tuple, list[SeriesData]] = {}
        self._roles: dict[tuple, bool] = {}

    @staticmethod
    def window(d: SeriesData, t: int, w: int) -> tuple[int, int]:
        return bisect.bisect_left(d.times, t - w), bisect.bisect_right(d.times, t) - 1

    def instant(self, d: SeriesData, t: int) -> float | None:
        i = bisect.bisect_right(d.times, t) - 1
        if i < 0 or t - d.times[i] > LOOKBACK_S * MS:
            return None
        j = bisect.bisect_right(d.stale, t) - 1
        if j >= 0 and d.stale[j] > d.times[i]:
            return None
        return d.values[i]

    def rate(self, d: SeriesData, t: int, w: int, is_rate: bool = True) -> float | None:
        """Prometheus 2.42's extrapolatedRate for a counter."""
        lo, hi = self.window(d, t, w)
        if hi - lo + 1 < 2:
            return None
        first, last = d.values[lo], d.values[hi]
        result = last - first + (d.resets_prefix[hi] - d.resets_prefix[lo])
        to_start = (d.times[lo] - (t - w)) / 1000
        to_end = (t - d.times[hi]) / 1000
        sampled = (d.times[hi] - d.times[lo]) / 1000
        average = sampled / (hi - lo)
        if result > 0 and first >= 0:
            to_zero = sampled * (first / result)
            if to_zero < to_start:
                to_start = to_zero
        threshold = average * 1.1
        extrapolate = sampled
        extrapolate += to_start if to_start < threshold else average / 2
        extrapolate += to_end if to_end < threshold else average / 2
        factor = extrapolate / sampled
        if is_rate:
            factor /= w / 1000
        return result * factor

    def increase_exact(self, d: SeriesData, t: int, w: int) -> float | None:
        """The rules' increase: highest minus lowest sample, or increase() after a reset."""
        lo, hi = self.window(d, t, w)
        if hi < lo:
            return None
        values = d.values[lo : hi + 1]
        if not any(b < a for a, b in itertools.pairwise(values)):
            return max(values) - min(values)
        return self.rate(d, t, w, is_rate=False)

    def of(self, s: Stream, metric: str, le: str | None = None) -> list[SeriesData]:
        key = (s.key, metric, le)
        if key not in self._of:
            self._of[key] = [
                d for d in self.series[s.key] if d.metric == metric and d.labels.get("le") == le
            ]
        return self._of[key]

    @staticmethod
    def total(values: Iterable[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        if not present:
            return None
        out = present[0]
        for v in present[1:]:
            out += v
        return out

    def info_within(self, s: Stream, t: int, w: int) -> bool:
        return any(
            lo <= hi
            for d in self.of(s, "fioprobe_continuous_info")
            for lo, hi in [self.window(d, t, w)]
        )

    def _stated(self, stated: Callable[[int], dict[bool, float]], t: int) -> dict[bool, float]:
        """The latest time each role was stated within the role's memory: the record's
        max_over_time, whose values only grow, so its last evaluation with a value."""
        out: dict[bool, float] = {}
        step = self.eval_s * MS
        e = t
        while e > t - ROLE_MEMORY_S * MS and len(out) < 2:
            for role, when in stated(e).items():
                if role not in out and when > (t - ROLE_MEMORY_S * MS) / 1000:
                    out[role] = when
            e -= step
        return out

    def _scraped_at(self, s: Stream, e: int) -> dict[bool, float]:
        """stream:fioprobe_etcd_disk_stated:scrape_time_seconds at e: per role, the newest
        timestamp of an info sample still visible."""
        out: dict[bool, float] = {}
        for d in self.of(s, "fioprobe_continuous_info"):
            if self.instant(d, e) is None:
                continue
            role = d.labels["etcd_disk"] == "true"
            when = d.times[bisect.bisect_right(d.times, e) - 1] / 1000
            out[role] = max(out.get(role, when), when)
        return out

    def _pushed_at(self, s: Stream, e: int) -> dict[bool, float]:
        """probe:fioprobe_etcd_disk_stated:push_time_seconds at e: the pushed role and when."""
        info, push_time = self.of(s, "fioprobe_info"), self.of(s, "push_time_seconds")
        if not info or self.instant(info[0], e) is None:
            return {}
        when = self.instant(push_time[0], e)
        assert when is not None
        return {info[0].labels["etcd_disk"] == "true": when}

    def etcd_role(self, s: Stream, t: int) -> bool:
        """probe:fioprobe_etcd_disk:info: the latest statement of each source wins for that
        source, "false" from any source wins over "true" from another, and so does any pod
        that says "false" right now."""
        key = (s.key, t)
        if key not in self._roles:
            says_true, says_false = False, False
            for source in (self._scraped_at, self._pushed_at):
                latest = self._stated(lambda e, source=source: source(s, e), t)
                if True in latest and latest[True] > latest.get(False, -math.inf):
                    says_true = True
                if False in latest and latest[False] >= latest.get(True, -math.inf):
                    says_false = True
            false_now = any(
                self.instant(d, t) is not None
                for d in self.of(s, "fioprobe_continuous_info")
                if d.labels["etcd_disk"] == "false"
            )
            self._roles[key] = says_true and not says_false and not false_now
        return self._roles[key]

    def threshold_s(self, s: Stream, t: int) -> float:
        return s.threshold_s(self.etcd_role(s, t))

    def objective(self, s: Stream, t: int) -> bool:
        return self.info_within(s, t, GAP_TOLERANCE_S * MS)

    def le(self, s: Stream, t: int) -> str:
        return f"{self.threshold_s(s, t):g}"

    def slow_ratio(self, s: Stream, t: int, window: str) -> float | None:
        if not self.objective(s, t):
            return None
        w = seconds(window) * MS
        bucket = "fioprobe_continuous_sync_latency_seconds_bucket"
        good = self.total(self.rate(d, t, w) for d in self.of(s, bucket, self.le(s, t)))
        total = self.total(self.rate(d, t, w) for d in self.of(s, bucket[:-7] + "_count"))
        if good is None or total is None or not total > 0:
            return None
        return 1 - good / total

    def burn(self, s: Stream, t: int, window: str) -> float | None:
        ratio = self.slow_ratio(s, t, window)
        return None if ratio is None else ratio / BUDGET

    def slow_count(self, s: Stream, t: int) -> float | None:
        if not self.objective(s, t):
            return None
        w = STALL_WINDOW_S * MS
        bucket = "fioprobe_continuous_sync_latency_seconds_bucket"
        good = self.total(self.increase_exact(d, t, w) for d in self.of(s, bucket, self.le(s, t)))
        total = self.total(self.increase_exact(d, t, w) for d in self.of(s, bucket[:-7] + "_count"))
        if good is None or total is None:
            return None
        return total - good

    def stall(self, s: Stream, t: int) -> float | None:
        w = STALL_WINDOW_S * MS
        return self.total(
            self.increase_exact(d, t, w)
            for d in self.of(s, "fioprobe_continuous_stall_seconds_total")
        )

    def failing(self, s: Stream, t: int) -> dict[str, float]:
        """max by (stream, reason) of fioprobe_continuous_failing_seconds with a reason."""
        out: dict[str, float] = {}
        for d in self.of(s, "fioprobe_continuous_failing_seconds"):
            reason, v = d.labels.get("reason"), self.instant(d, t)
            if reason and v is not None:
                out[reason] = max(out.get(reason, v), v)
        return out

    def inflight(self, s: Stream, t: int) -> float | None:
        values = [self.instant(d, t) for d in self.of(s, "fioprobe_continuous_inflight_seconds")]
        present = [v for v in values if v is not None]
        return max(present) if present else None


# --- alerts: labels, annotations, and their timeline -----------------------------------------


def go_float(v: float) -> str:
    """A float as Go's text/template prints it (%v)."""
    return str(int(v)) if v == int(v) and abs(v) < 1e21 else repr(v)


def humanize_duration(v: float) -> str:
    """Prometheus' humanizeDuration."""
    if v == 0:
        return "0s"
    if abs(v) >= 1:
        whole = int(v)
        days, hours, minutes, secs = (
            whole // 86400,
            whole // 3600 % 24,
            whole // 60 % 60,
            whole % 60,
        )
        if days:
            return f"{days}d {hours}h {minutes}m {secs}s"
        if hours:
            return f"{hours}h {minutes}m {secs}s"
        if minutes:
            return f"{minutes}m {secs}s"
        return f"{v:.4g}s"
    for prefix in ("m", "u", "n", "p"):
        v *= 1000
        if abs(v) >= 1:
            return f"{v:.4g}{prefix}s"
    return f"{v:.4g}s"


def num(x: float) -> str:
    return f"{x:.10g}"


@dataclass
class Alert:
    """One alerting rule of the group, for one stream: when its expression holds, its value,
    and what its labels and annotations then say."""

    name: str
    labels: dict[str, str]
    #: (t in ms) -> $value while the expression holds, else None.
    condition: Callable[[int], float | None]
    annotations: Callable[[int, float], dict[str, str]]
    keep_firing_for_s: int = GAP_TOLERANCE_S
    for_s: int = 0


def hang_alert(m: Mirror, s: Stream, etcd: bool) -> Alert:
    """The rule for etcd disks (`etcd`: critical) or the one for every other stream."""
    seconds_ = HANG_CRITICAL_S if etcd else HANG_WARNING_S
    consequence = (
        "etcd on this disk cannot commit: its leader steps down or the member falls behind, "
        "and API requests time out."
        if etcd
        else "Applications that sync their writes on this StorageClass hang with it."
    )

    def condition(t: int) -> float | None:
        v = m.inflight(s, t)
        if v is None or v < seconds_ or m.etcd_role(s, t - m.lag) != etcd:
            return None
        return v

    return Alert(
        "FioProbeContinuousSyncHang",
        {"severity": "critical" if etcd else "warning", **s.identity()},
        condition,
        lambda _t, v: {
            "summary": (
                "An fdatasync on a disk that holds etcd has not completed for tens of seconds."
                if etcd
                else "An fdatasync on a volume has not completed for a minute or more."
            ),
            "description": f"An operation (a small write and its fdatasync) of {s.text()} has "
            f"been outstanding for {humanize_duration(v)} (alert from {seconds_} s): the disk "
            f"does not complete it. {consequence}",
        },
    )


def burn_alerts(m: Mirror, s: Stream, etcd: bool) -> list[Alert]:
    """The rows that apply to the stream while its role is `etcd`: its critical rows' rule
    for etcd disks or the one for other streams, and (with etcd) the warning row every
    stream has."""
    out = []
    for long, short, factor, severity in BURN_RATES:
        scope = "all" if severity == "warning" else ("etcd" if etcd else "other")
        if scope == "all" and etcd != s.possible_roles()[0]:
            continue  # one rule for every role: built once

        def condition(
            t: int, long: str = long, short: str = short, factor: float = factor, scope: str = scope
        ) -> float | None:
            if scope != "all" and m.etcd_role(s, t - m.lag) != (scope == "etcd"):
                return None
            long_burn, short_burn = m.burn(s, t - m.lag, long), m.burn(s, t - m.lag, short)
            syncs = m.total(
                m.rate(d, t, seconds(long) * MS, is_rate=False)
                for d in m.of(s, "fioprobe_continuous_sync_latency_seconds_count")
            )
            if syncs is None or syncs < BURN_MIN_SYNCS:
                return None
            if (
                long_burn is None
                or short_burn is None
                or not (long_burn > factor and short_burn > factor)
            ):
                return None
            return long_burn

        hours = math.floor(720 / factor + 0.5)
        lasts = f"{hours // 24} days" if hours % 24 == 0 else f"{hours} hours"
        summary = {
            "etcd": "The disk that holds etcd misses its fsync latency objective fast enough to "
            "spend its error budget early.",
            "other": "A volume misses its fsync latency objective fast enough to spend its error "
            "budget early.",
            "all": "A disk misses its fsync latency objective fast enough to spend its error "
            "budget early.",
        }[scope]
        consequence = {
            "etcd": "etcd commits slower than it should on this disk: slow API requests, and "
            "leader elections if it gets worse.",
            "other": "Applications that sync their writes on this StorageClass wait that long.",
            "all": "On a disk that holds etcd, etcd commits that slowly; elsewhere applications "
            "that sync their writes wait that long.",
        }[scope]

        def annotations(
            t: int,
            v: float,
            long: str = long,
            short: str = short,
            factor: float = factor,
            summary: str = summary,
            consequence: str = consequence,
            lasts: str = lasts,
        ) -> dict[str, str]:
            return {
                "summary": summary,
                "description": f"Over the last {long}, {s.text()} had {v:.1f} times as many "
                f"fdatasyncs slower than {humanize_duration(m.threshold_s(s, t - m.lag))} as its "
                f"objective allows ({num(OBJECTIVE_RATIO * 100)}% within it, {num(BUDGET * 100)}% "
                f"slower), and still has over the last {short}: at {num(factor)}x, a 30-day "
                f"error budget is gone in {lasts}. {consequence}",
            }

        sev = severity if scope == "etcd" else "warning"
        out.append(
            Alert(
                "FioProbeContinuousErrorBudgetBurn",
                {"severity": sev, "long": long, "short": short, **s.identity()},
                condition,
                annotations,
            )
        )
    return out


def stall_alert(m: Mirror, s: Stream) -> Alert:
    def condition(t: int) -> float | None:
        stalled, slow = m.stall(s, t - m.lag), m.slow_count(s, t - m.lag)
        if stalled is None or not m.etcd_role(s, t - m.lag):
            return None
        if (slow is not None and slow >= STALL_SYNCS) or stalled >= STALL_SECONDS:
            return stalled
        return None

    def annotations(t: int, v: float) -> dict[str, str]:
        slow = m.slow_count(s, t - m.lag)
        return {
            "summary": "The disk that holds etcd stalled for seconds.",
            "description": f"Within 1m, {s.text()} was stalled (an operation outstanding "
            f"beyond its stall threshold) for {humanize_duration(v)}, and "
            f"{go_float(slow) if slow is not None else ''} of its fdatasyncs took longer than "
            f"{humanize_duration(ETCD_THRESHOLD_S)} (alert from {STALL_SECONDS} s or "
            f"{STALL_SYNCS} slow fdatasyncs). etcd on this disk waited as long to commit; a "
            "stall near its election timeout (1 s by default) costs it its leader.",
        }

    return Alert(
        "FioProbeContinuousStall", {"severity": "warning", **s.identity()}, condition, annotations
    )


FAILING_AFTER_S = 120
#: What FioProbeContinuousFailing's description says about each reason.
FAILING_REASONS = {
    "unsafe_target": "the stream refuses its directory (a symlink, or a file or directory it "
    "did not create: planted by someone else or left by another tool); the disk may be fine, "
    "the directory is not",
    "no_directory": "its directory does not exist",
    "io_error": "the disk returns I/O errors",
    "no_space": "the filesystem is full",
    "read_only": "the filesystem is read-only",
}


def failing_alert(m: Mirror, s: Stream, etcd: bool, reason: str) -> Alert:
    """The rule for etcd disks (critical) or the one for every other stream, for one reason."""

    def condition(t: int) -> float | None:
        v = m.failing(s, t).get(reason)
        if v is None or v < FAILING_AFTER_S or m.etcd_role(s, t - m.lag) != etcd:
            return None
        return v

    return Alert(
        "FioProbeContinuousFailing",
        {"severity": "critical" if etcd else "warning", "reason": reason, **s.identity()},
        condition,
        lambda _t, v: {
            "summary": "The continuous stream of a disk that holds etcd fails every operation."
            if etcd
            else "A continuous fsync stream fails every operation.",
            "description": "Every operation (a small write and its fdatasync, or its set-up) of "
            f"{s.text()} has failed for {humanize_duration(v)} (alert from 2m), the latest with "
            f"reason {reason}: {FAILING_REASONS.get(reason, 'its log says why')}. The stream "
            "measures nothing meanwhile: hangs, stalls and slow fsyncs of that disk go unseen.",
        },
    )


def missing_alert(m: Mirror, storageclass: str, node: str | None) -> Alert:
    ident = {"storageclass": storageclass, **({"node": node} if node else {})}
    present = [s for s in m.streams if (s.storageclass, s.node) == (storageclass, node)]

    def condition(t: int) -> float | None:
        if t - m.lag < 0:
            return None  # the expected streams' record is not written yet
        if t < MISSING_AFTER_S * MS:
            # Its sample of MISSING_AFTER_S ago (`offset`) is not there yet; the record's first
            # sample is at 0 whichever order the groups run in.
            return None
        seen = any(m.info_within(s, t, MISSING_AFTER_S * MS) for s in present)
        return None if seen else 1.0

    text = f"The continuous stream of storageclass {storageclass}" + (
        f" on node {node}" if node else ""
    )
    return Alert(
        "FioProbeContinuousMissing",
        {"severity": "warning", **ident},
        condition,
        lambda _t, _v: {
            "summary": "A deployed continuous fsync stream has no data in Prometheus.",
            "description": f"{text} is deployed but Prometheus has scraped none of its series "
            "for 5m and 2m more: its pod does not run (not scheduled, crashing, its volume not "
            "mounted) or is not scraped (PodMonitor, NetworkPolicy). Hangs and stalls of that "
            "disk go unseen meanwhile.",
        },
        keep_firing_for_s=0,
        for_s=GAP_TOLERANCE_S,
    )


@dataclass
class Timeline:
    """An alert's state at every evaluation (every eval_s), as Prometheus 2.42's rule
    manager keeps it: pending while `for` has not passed, firing, kept firing for
    keep_firing_for after the expression stops holding; with the annotations of its last
    evaluation that held."""

    alert: Alert
    states: list[str]
    notes: list[dict[str, str] | None]

    @classmethod
    def of(cls, alert: Alert, evaluations: int, eval_s: int) -> Timeline:
        states, notes = [], []
        state, active_at, keep_since, note = "inactive", 0, None, None
        for k in range(evaluations):
            t = k * eval_s * MS
            value = alert.condition(t)
            if value is not None:
                if state == "inactive":
                    active_at = t
                state = "firing" if t - active_at >= alert.for_s * MS else "pending"
                keep_since = None
                note = alert.annotations(t, value)
            elif state == "firing" and alert.keep_firing_for_s:
                keep_since = t if keep_since is None else keep_since
                if t - keep_since >= alert.keep_firing_for_s * MS:
                    state = "inactive"
            else:
                state = "inactive"
            states.append(state)
            notes.append(note if state == "firing" else None)
        return cls(alert, states, notes)

    def firing(self) -> list[int]:
        return [k for k, s in enumerate(self.states) if s == "firing"]

    def episodes(self) -> list[tuple[int, int]]:
        """(first, last) evaluation of each uninterrupted firing."""
        out: list[tuple[int, int]] = []
        for k in self.firing():
            if out and out[-1][1] == k - 1:
                out[-1] = (out[-1][0], k)
            else:
                out.append((k, k))
        return out

    def ever_active(self) -> bool:
        return any(s != "inactive" for s in self.states)


# --- promtool notation ------------------------------------------------------------------------


def fmt_value(v: float) -> str:
    return str(int(v)) if v == int(v) else repr(v)


def compress(d: SeriesData, slots: int) -> str:
    """promtool's notation: `_xN` N missing samples, `vxN` N+1 samples of v, `a+bxN` a, a+b,
    ... a+N*b. Steps are only used where promtool computes them exactly (integers) unless
    no rule reads the series."""
    values: list[float | str | None] = [d.slots.get(k) for k in range(slots)]
    out: list[str] = []
    i = 0
    while i < len(values):
        v = values[i]
        if v is None:
            j = i
            while j + 1 < len(values) and values[j + 1] is None:
                j += 1
            out.append("_" if j == i else f"_x{j - i + 1}")
            i = j + 1
            continue
        if v == STALE:
            out.append("stale")
            i += 1
            continue
        j = i
        step = None
        while (
            j + 1 < len(values)
            and isinstance(values[j + 1], float | int)
            and values[j + 1] != STALE
        ):
            nxt = values[j + 1]
            assert isinstance(nxt, float | int)
            diff = nxt - values[j]  # type: ignore[operator]
            if step is None:
                ok = diff == 0 or not d.exact or (diff == int(diff) and v == int(v))
                if not ok:
                    break
                step = diff
            elif diff != step:
                break
            j += 1
        n = j - i
        if n == 0:
            out.append(fmt_value(float(v)))
        elif step == 0:
            out.append(f"{fmt_value(float(v))}x{n}")
        else:
            assert step is not None
            sign = "+" if step > 0 else "-"
            out.append(f"{fmt_value(float(v))}{sign}{fmt_value(abs(step))}x{n}")
        i = j + 1
    return " ".join(out)


def fmt_labels(labels: dict[str, str]) -> str:
    return "{" + ", ".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


# --- scenarios --------------------------------------------------------------------------------


@dataclass
class Scenario:
    name: str
    horizon_s: int
    streams: list[Stream]
    #: Prometheus was down: no samples of any series, no staleness markers.
    prometheus_gaps: list[tuple[int, int]] = field(default_factory=list)
    #: How the scenario's test file evaluates the rules.
    timing: Timing = IN_ORDER

    def __post_init__(self) -> None:
        self.eval_s = self.timing.eval_s
        self.evaluations = self.horizon_s // self.eval_s + 1
        self.data = {s.key: scrape(s, self.horizon_s, self.prometheus_gaps) for s in self.streams}
        self.mirror = Mirror(self.streams, self.data, self.timing)
        alerts: list[Alert] = []
        for s in self.streams:
            for etcd in s.possible_roles():
                alerts += [hang_alert(self.mirror, s, etcd), *burn_alerts(self.mirror, s, etcd)]
                alerts += [
                    failing_alert(self.mirror, s, etcd, reason)
                    for reason in sorted({r for _, _, r in s.failures})
                ]
            alerts.append(stall_alert(self.mirror, s))
        alerts += [missing_alert(self.mirror, sc, node) for sc, node in EXPECTED]
        self.timelines = [Timeline.of(a, self.evaluations, self.eval_s) for a in alerts]
        self.checks: list[dict[str, Any]] = []
        self.expr_checks: list[dict[str, Any]] = []
        self._checked: set[tuple[str, int]] = set()

    def k(self, t_s: float) -> int:
        """The first evaluation at or after t_s."""
        return math.ceil(t_s / self.eval_s)

    def t(self, k: int) -> int:
        """Seconds of evaluation k."""
        return k * self.eval_s

    def timeline(self, name: str, **labels: str) -> Timeline:
        found = [
            tl
            for tl in self.timelines
            if tl.alert.name == name and all(tl.alert.labels.get(k) == v for k, v in labels.items())
        ]
        assert len(found) == 1, (name, labels, len(found))
        return found[0]

    def _expected(self, tl: Timeline, k: int) -> dict[str, Any]:
        note = tl.notes[k]
        assert note is not None
        return {
            "exp_labels": dict(tl.alert.labels),
            "exp_annotations": {**note, "runbook_url": f"{RUNBOOKS}#{tl.alert.name.lower()}"},
        }

    def check(self, name: str, k: int) -> None:
        """All alerts of `name` firing at evaluation k, exactly as the timelines say."""
        if (name, k) in self._checked:
            return
        self._checked.add((name, k))
        firing = [tl for tl in self.timelines if tl.alert.name == name and tl.states[k] == "firing"]
        self.checks.append(
            {
                "eval_time": f"{self.t(k)}s",
                "alertname": name,
                **({"exp_alerts": [self._expected(tl, k) for tl in firing]} if firing else {}),
            }
        )

    def fires(self, tl: Timeline, *, also_at: Iterable[int] = ()) -> None:
        """Silent one evaluation before each firing episode starts, firing when it does, at
        `also_at`, and resolved after it ends."""
        assert tl.firing(), tl.alert.labels
        for first, last in tl.episodes():
            for k in (first - 1, first, last, last + 1):
                if 0 <= k < self.evaluations:
                    self.check(tl.alert.name, k)
        for k in also_at:
            self.check(tl.alert.name, k)

    def role(self, s: Stream, *at: int) -> None:
        """The stream's target is an etcd disk at these evaluations exactly when the mirror
        says so (probe:fioprobe_etcd_disk:info)."""
        selector = ", ".join(f'{k}="{v}"' for k, v in s.identity().items())
        for k in at:
            held = self.mirror.etcd_role(s, self.t(k) * MS)
            self.expr_checks.append(
                {
                    "expr": f"probe:fioprobe_etcd_disk:info{{{selector}}}",
                    "eval_time": f"{self.t(k)}s",
                    "exp_samples": [{"labels": "probe:fioprobe_etcd_disk:info"
                                     + fmt_labels(s.identity()), "value": 1}] if held else [],
                }
            )  # fmt: skip

    def never(self, name: str, *at: int) -> None:
        """No alert of `name` firing at these evaluations."""
        for k in at:
            assert not any(
                tl.states[k] == "firing" for tl in self.timelines if tl.alert.name == name
            )
            self.check(name, k)

    def test(self) -> dict[str, Any]:
        slots = self.horizon_s // SCRAPE_S + 1
        series = [
            {"series": d.metric + fmt_labels(d.labels), "values": compress(d, slots)}
            for s in self.streams
            for d in self.data[s.key]
        ]
        ever = sorted(
            {
                tuple(sorted({"alertname": tl.alert.name, **tl.alert.labels}.items()))
                for tl in self.timelines
                if tl.ever_active()
            }
        )
        # Every stream alert that was pending or firing at any evaluation of the scenario.
        ever_check = {
            "expr": "group by (alertname, severity, cluster, storageclass, node, long, short, "
            'reason) (last_over_time(ALERTS{alertname=~"FioProbeContinuous.*"}'
            f"[{self.horizon_s}s]))",
            "eval_time": f"{self.horizon_s}s",
            "exp_samples": [{"labels": fmt_labels(dict(labels)), "value": 1} for labels in ever],
        }
        return {
            "name": self.name,
            "interval": f"{SCRAPE_S}s",
            "input_series": series,
            "alert_rule_test": self.checks,
            "promql_expr_test": [*self.expr_checks, ever_check],
        }


def all_expected(latency: Callable[[int], int] = healthy, **kw: Any) -> list[Stream]:
    """The five streams the default configuration deploys."""
    return [Stream(ETCD_SC, n, latency=latency, **kw) for n in ETCD_NODES] + [
        Stream("gp2", volume_type="gp2", etcd_disk=False, latency=latency, **kw),
        Stream("gp3", volume_type="gp3", etcd_disk=False, latency=latency, **kw),
    ]


FAILING = "FioProbeContinuousFailing"
HANG = "FioProbeContinuousSyncHang"
BURN = "FioProbeContinuousErrorBudgetBurn"
STALL = "FioProbeContinuousStall"
MISSING = "FioProbeContinuousMissing"


# ---- group fioprobe-continuous: evaluated every 15 s -----------------------------------------


def hang_scenario(timing: Timing = IN_ORDER) -> Scenario:
    at = 1200  # the hangs start with the first operation due at or after 20 minutes
    cp0, cp1, cp2 = (Stream(ETCD_SC, n) for n in ETCD_NODES)
    cp0.latency = once(at, [120 * US])
    cp1.latency = once(at, [10 * US])
    # The same 120 s hang with a minute of failed scrapes in the middle of it.
    cp2.latency = once(at, [120 * US])
    cp2.scrape_gaps = [(1260, 1320)]
    gp2 = Stream("gp2", volume_type="gp2", etcd_disk=False, latency=once(at, [120 * US]))
    gp3 = Stream("gp3", volume_type="gp3", etcd_disk=False)
    # A worker's per-node StorageClass volume: a node label, but not an etcd disk.
    worker = Stream(
        "gp3", "worker-3", etcd_disk=False, volume_type="gp3", latency=once(at, [120 * US])
    )
    sc = Scenario(
        "continuous: hangs of 120 s and 10 s, on etcd disks and elsewhere",
        40 * 60,
        [cp0, cp1, cp2, gp2, gp3, worker],
        timing=timing,
    )

    page = sc.timeline(HANG, node="control-plane-0")
    ((first, _last),) = page.episodes()
    hang_start = at + 0.5
    assert sc.t(first) < hang_start + 120, "a 120 s hang pages before it ends"
    assert sc.t(first) - hang_start <= HANG_CRITICAL_S + max(SCRAPE_S, sc.eval_s)
    # A minute of failed scrapes in the middle of the hang neither resolves nor re-fires the
    # page. It delays it only where the page had not fired yet when the gap began (at 30 s
    # evaluations the hang is first seen past 30 s at the gap's first scrape): then the page
    # fires at the first scrape after the gap, still before the hang ends.
    gap_start, gap_end = cp2.scrape_gaps[0]
    gapped = sc.timeline(HANG, node="control-plane-2")
    g_first = gapped.firing()[0]
    assert gapped.states[g_first:] == page.states[g_first:], "a scrape gap changed the page"
    if sc.t(first) < gap_start:
        assert g_first == first or sc.t(g_first) == sc.t(sc.k(gap_end)), "the gap delayed it"
    assert sc.t(g_first) < hang_start + 120
    assert not sc.timeline(HANG, node="control-plane-1").ever_active(), "a 10 s hang paged"
    # StorageClass volumes, a worker's per-node one too: a warning after a minute, no page,
    # no stall warning (etcd disks only).
    for labels in ({"storageclass": "gp2"}, {"storageclass": "gp3", "node": "worker-3"}):
        warn = sc.timeline(HANG, **labels)
        assert warn.alert.labels["severity"] == "warning" and warn.ever_active()
        assert not sc.timeline(STALL, **labels).ever_active()
    assert not any(tl.ever_active() for tl in sc.timelines if tl.alert.name in (BURN, MISSING))

    sc.fires(page, also_at=[sc.k(1260), sc.k(1290), sc.k(hang_start + 119)])
    for labels in ({"storageclass": "gp2"}, {"storageclass": "gp3", "node": "worker-3"}):
        sc.fires(sc.timeline(HANG, **labels))
    sc.never(HANG, sc.k(hang_start + 14), sc.k(hang_start + 29))
    # A hang of 5 s or more is also a stall on an etcd disk.
    for node in ETCD_NODES:
        sc.fires(sc.timeline(STALL, node=node))
    sc.never(MISSING, sc.evaluations - 1)
    return sc


def stall_scenario(timing: Timing = IN_ORDER) -> Scenario:
    at = 600
    cp0, cp1, cp2 = (Stream(ETCD_SC, n) for n in ETCD_NODES)
    # Five fdatasyncs of 200 ms in a row: 5 s of slow fsyncs at one a second.
    cp0.latency = once(at, [200 * MS] * 5)
    # One fdatasync stuck 5.01 s: 5 s beyond the stall threshold.
    cp1.latency = once(at, [5010 * MS])
    # Not a stall: four slow fdatasyncs; later one stuck 4 s; later three slow ones within a
    # minute (a busy host's worst minute).
    cp2.latency = once(
        at, [200 * MS] * 4, once(1200, [4 * US], once(1500, [12 * MS, 30 * MS, 48 * MS]))
    )
    gp2 = Stream("gp2", volume_type="gp2", etcd_disk=False, latency=once(at, [100 * MS] * 10))
    gp3 = Stream("gp3", volume_type="gp3", etcd_disk=False)
    sc = Scenario(
        "continuous: stalls of 5 s warn, shorter ones do not, on etcd disks only",
        30 * 60,
        [cp0, cp1, cp2, gp2, gp3],
        timing=timing,
    )
    by_count = sc.timeline(STALL, node="control-plane-0")
    by_seconds = sc.timeline(STALL, node="control-plane-1")
    assert not sc.timeline(STALL, node="control-plane-2").ever_active()
    assert not sc.timeline(STALL, storageclass="gp2").ever_active()
    assert not any(tl.ever_active() for tl in sc.timelines if tl.alert.name != STALL)
    sc.fires(by_count)
    sc.fires(by_seconds)
    sc.never(STALL, sc.k(1215), sc.k(1230), sc.k(1245), sc.k(1530))
    sc.never(HANG, sc.k(606))
    return sc


def missing_scenario(timing: Timing = IN_ORDER) -> Scenario:
    cp0, cp1, _cp2, gp2, gp3 = all_expected()
    gp2.end_s = 600  # its pod is deleted and not replaced
    gp3.scrape_gaps = [(1200, 1260)]  # a minute of failed scrapes
    cp1.restarts = [1500]  # a new pod, scraped 20 s later
    # control-plane-0's pod starts 4m40s after the rules loaded (an image pull, a volume
    # attached on a new install): not missing meanwhile. control-plane-2's stream never ran.
    cp0.start_s = 280
    sc = Scenario(
        "continuous: expected streams that are missing, and ones that are not",
        40 * 60,
        [cp0, cp1, gp2, gp3],
        timing=timing,
    )
    never_ran = sc.timeline(MISSING, node="control-plane-2")
    gone = sc.timeline(MISSING, storageclass="gp2")
    # No series at all since the stream was deployed (the rules loaded): Missing once it has
    # been expected for MISSING_AFTER_S, firing after the gap tolerance more, as one that stopped.
    assert sc.t(never_ran.firing()[0]) == MISSING_AFTER_S + GAP_TOLERANCE_S
    # Gone at 600 s (last sample at 585 s): missing after MISSING_AFTER_S, firing after the
    # gap tolerance more.
    assert sc.t(gone.firing()[0]) == sc.t(sc.k(585 + MISSING_AFTER_S + SCRAPE_S)) + GAP_TOLERANCE_S
    for labels in (
        {"storageclass": "gp3"},
        {"node": "control-plane-1"},
        {"node": "control-plane-0"},
    ):
        assert not sc.timeline(MISSING, **labels).ever_active(), labels
    sc.fires(never_ran, also_at=[sc.k(1800)])
    sc.fires(gone, also_at=[sc.k(1800)])
    sc.never(HANG, sc.k(1230), sc.k(1515))
    sc.never(MISSING, sc.k(270), sc.k(MISSING_AFTER_S + GAP_TOLERANCE_S) - 1)
    return sc


def role_scenario(timing: Timing = IN_ORDER) -> Scenario:
    """A target's role as its configuration says it, latest statement first: the stream's
    new pod says "false" (then a minute of failed scrapes), a stream that is paged on is
    reconfigured, a stream that says "false" while the probe of its disk pushes "true", and a
    node whose probes stop (it lost its control-plane label). All at 15 ms: within gp3's
    20 ms objective, far beyond etcd's 10 ms."""
    reconfigured, gap = 600, (900, 960)

    def slow(_t: int) -> int:
        return 15 * MS

    # A disk that no longer holds etcd: healthy until a new pod says "false", then busy with
    # other work; a minute of failed scrapes after that.
    cp0 = Stream(ETCD_SC, "control-plane-0", volume_type="gp3", latency=then(healthy, 600, slow))
    cp0.restarts, cp0.roles, cp0.scrape_gaps = [reconfigured], {reconfigured: False}, [gap]
    # An etcd disk at 15 ms pages (the same gap changes nothing), until it is reconfigured.
    cp1 = Stream(ETCD_SC, "control-plane-1", volume_type="gp3", latency=slow, scrape_gaps=[gap])
    cp1.restarts, cp1.roles = [1200], {1200: False}
    # The stream says "false", the probe of the same disk pushes "true": "false" wins.
    cp2 = Stream(ETCD_SC, "control-plane-2", volume_type="gp3", latency=slow, etcd_disk=False)
    cp2.pushed_role, cp2.scrape_gaps = True, [gap]
    # A node that lost its control-plane label: its stream's pod and its probes are gone at
    # 600 s, its probe's group stays on the Pushgateway.
    lost = Stream(ETCD_SC, "control-plane-3", end_s=600, pushed_role=True, pushes_end_s=600)
    _, _, _, gp2, gp3 = all_expected()
    sc = Scenario(
        "continuous: a disk's role, latest statement first, through failed scrapes",
        40 * 60,
        [cp0, cp1, cp2, lost, gp2, gp3],
        timing=timing,
    )
    m = sc.mirror
    etcd_alerts = (HANG, BURN, STALL)
    for stream in (cp0, cp2):
        assert not any(
            tl.ever_active()
            for tl in sc.timelines
            if tl.alert.name in etcd_alerts and tl.alert.labels.get("node") == stream.node
        ), f"{stream.node}: a disk that is not etcd's raised an alert"
    # The paged disk: the critical burn rows and the stall fire through the gap and stay
    # firing keep_firing_for (2 minutes) after the new pod says "false", then resolve.
    # The new pod's first scrape, and the first evaluation whose role record sees it.
    flipped = 1200 + RESTART_DELAY_S + SCRAPE_S - (1200 + RESTART_DELAY_S) % SCRAPE_S
    k_flip = sc.k(flipped)
    assert m.etcd_role(cp1, sc.t(k_flip - 1) * MS) and not m.etcd_role(cp1, sc.t(k_flip) * MS)
    paged = [
        tl
        for tl in sc.timelines
        if tl.alert.labels.get("node") == "control-plane-1" and tl.ever_active()
    ]
    assert {tl.alert.name for tl in paged} == {BURN, STALL}, [tl.alert.labels for tl in paged]
    for tl in paged:
        ((first, last),) = tl.episodes()
        resolved_at = sc.t(k_flip) + timing.lag_ms // MS + GAP_TOLERANCE_S
        assert sc.t(first) < gap[0] and sc.t(last) == resolved_at - sc.eval_s
        sc.fires(tl, also_at=[sc.k(gap[0] + 30)])
    # The lost node keeps its role for the role's memory after its last statement, no longer.
    # The last evaluation that saw its stream's info (its last scrape is at 585 s, its last
    # push at 320 s): the last statement the role record holds.
    last_said = (600 - SCRAPE_S) // sc.eval_s * sc.eval_s
    k_forgotten = sc.k(last_said + ROLE_MEMORY_S)
    assert m.etcd_role(lost, sc.t(k_forgotten - 1) * MS)
    assert not m.etcd_role(lost, sc.t(k_forgotten) * MS)
    sc.role(lost, k_forgotten - 1, k_forgotten)
    for stream in (cp0, cp2):
        sc.role(stream, sc.k(300), sc.k(gap[0] + 30), sc.k(1800))
    sc.role(cp1, sc.k(gap[0] + 30), k_flip - 1, k_flip)
    # Exactly the paged disk's alerts in the gap (promtool compares the whole list).
    for name in (BURN, STALL, HANG):
        sc.check(name, sc.k(gap[0] + 30))
    sc.never(BURN, sc.k(1800))
    return sc


def failing_scenario(timing: Timing = IN_ORDER) -> Scenario:
    """Streams that fail every operation page (etcd disks) or warn, naming the reason; one
    failed operation, a minute and a half of failures, or a restart do not."""
    cp0, cp1, cp2, gp2, gp3 = all_expected()
    cp0.failures = [(600, 3600, "io_error")]  # the disk returns EIO from 10 minutes on
    cp1.failures = [(900, 901, "io_error"), (1200, 1290, "io_error")]  # one, then 90 s
    cp2.restarts = [1200]
    # A tenant planted .fioprobe-continuous: the stream refuses its directory from the start.
    gp3.failures = [(0, 3600, "unsafe_target")]
    sc = Scenario(
        "continuous: streams that fail every operation, and ones that fail for a moment",
        40 * 60,
        [cp0, cp1, cp2, gp2, gp3],
        timing=timing,
    )
    page = sc.timeline(FAILING, node="control-plane-0", reason="io_error", severity="critical")
    planted = sc.timeline(FAILING, storageclass="gp3", reason="unsafe_target")
    assert planted.alert.labels["severity"] == "warning"
    # From the first failed operation, firing at the first evaluation that sees 2 minutes of it.
    first_failure = 600.5 + FAILED_US / US
    assert 0 <= sc.t(page.firing()[0]) - first_failure - FAILING_AFTER_S <= SCRAPE_S + sc.eval_s
    assert page.firing()[-1] == sc.evaluations - 1
    assert sc.t(planted.firing()[0]) <= 0.5 + FAILING_AFTER_S + SCRAPE_S + sc.eval_s
    active = {tl.alert.name for tl in sc.timelines if tl.ever_active()}
    assert active == {FAILING}, active
    assert [tl for tl in sc.timelines if tl.alert.name == FAILING and tl.ever_active()] == [
        page,
        planted,
    ]
    sc.fires(page, also_at=[sc.k(1800)])
    sc.fires(planted)
    # Exactly those two at every check (promtool compares the whole list): control-plane-1's
    # single failure and its 90 s of failures, and control-plane-2's restart, raise nothing.
    for t in (905, 1215, 1290, 1300):
        sc.check(FAILING, sc.k(t))
    return sc


#: What happens to the busy streams, at these seconds (after an offset).
BUSY_EVENTS = {
    "a new pod for control-plane-1's stream": 1200,
    "control-plane-2's counters restart from 0 in the same pod": 1800,
    "a minute of failed scrapes of control-plane-0": 2400,
    "Prometheus down for 3 minutes": 3000,
}


def busy_streams(offset: int) -> tuple[list[Stream], list[tuple[int, int]]]:
    """The five expected streams on busy but healthy disks, with BUSY_EVENTS `offset`
    seconds later (and a new pod for gp2's stream 5 minutes after control-plane-1's); and the
    time Prometheus was down."""
    cp0, cp1, cp2, gp2, _gp3 = streams = all_expected(busy_host)
    restart, reset, failed, down = (offset + t for t in BUSY_EVENTS.values())
    cp1.restarts = [restart]
    gp2.restarts = [restart + 300]
    cp2.resets = [reset]
    cp0.scrape_gaps = [(failed, failed + 60)]
    return streams, [(down, down + 180)]


def busy_hour_scenario(timing: Timing = IN_ORDER) -> Scenario:
    streams, down = busy_streams(0)
    sc = Scenario(
        "continuous: a busy but healthy hour through a new pod, a counter reset, "
        "failed scrapes and a Prometheus restart raises nothing",
        3600,
        streams,
        prometheus_gaps=down,
        timing=timing,
    )
    assert not any(tl.ever_active() for tl in sc.timelines)
    times = [*BUSY_EVENTS.values(), 1500]
    at = sorted({sc.k(t + d) for t in times for d in (0, 15, 30, 60, 90, 180, 240)})
    for name in (HANG, STALL, MISSING):
        sc.never(name, *at)
    return sc


# ---- group fioprobe-continuous-burn: evaluated every 5 minutes -------------------------------

#: A day of data is what these scenarios need, and promtool evaluates every rule of the file
#: at every step: at 15 s that is minutes per run. Every 5 minutes (the shortest window)
#: times to fire are known to 5 minutes, the bound the checks assert; the scrapes stay 15 s.
BURN_EVAL_S = 300


def burn_scenario() -> Scenario:
    """Streams of cluster b, healthy for 6 hours, then this fraction of their fdatasyncs
    slow for an hour."""
    start = 6 * 3600 + 15 * 60
    b = {"cluster": "b"}

    def burning(fraction: float, latency_us: int) -> Callable[[int], int]:
        return then(healthy, start, slow_fraction(fraction, latency_us))

    cp0 = Stream(ETCD_SC, "control-plane-0", latency=burning(1, 15 * MS), **b)
    cp1 = Stream(ETCD_SC, "control-plane-1", latency=burning(0.2, 15 * MS), **b)
    cp2 = Stream(ETCD_SC, "control-plane-2", latency=burning(0.05, 15 * MS), **b)
    gp2 = Stream("gp2", volume_type="gp2", etcd_disk=False, latency=burning(1, 60 * MS), **b)
    # gp3 at 16 ms meets its 20 ms objective.
    gp3 = Stream("gp3", volume_type="gp3", etcd_disk=False, latency=burning(1, 16 * MS), **b)
    worker = Stream(
        "gp3", "worker-3", etcd_disk=False, volume_type="gp3", latency=burning(1, 48 * MS), **b
    )
    # A new stream, 30 s before an evaluation, whose 10th fdatasync is slow: 1 of its first
    # 30 (3 %) is a 3x burn of every window it has; too few fdatasyncs to count.
    fresh_at = start - 30

    def one_slow_early(t: int) -> int:
        k = (t - fresh_at * US) // INTERVAL_US
        return 15 * MS if k == 10 else HEALTHY_US

    fresh = Stream(ETCD_SC, "control-plane-9", start_s=fresh_at, latency=one_slow_early, **b)
    # A page that fires is not resolved by a new pod, nor by a minute of failed scrapes.
    cp0.restarts = [start + 45 * 60]
    cp0.scrape_gaps = [(start + 50 * 60, start + 51 * 60)]
    # A minute of failed scrapes before the page does not delay it.
    cp1.scrape_gaps = [(start + 10 * 60, start + 11 * 60)]
    horizon = start + 60 * 60
    sc = Scenario(
        "continuous: 100 %, 20 % and 5 % of fdatasyncs slow after 6 healthy hours",
        horizon,
        [cp0, cp1, cp2, gp2, gp3, worker, fresh],
        timing=Timing(BURN_EVAL_S),
    )

    def fired_after(tl: Timeline) -> float:
        return sc.t(tl.episodes()[0][0]) - start

    def expect(fraction: float, long: str, factor: float) -> float:
        """When the long window's slow fraction passes factor x budget (the short one, a
        twelfth as long, passes it sooner)."""
        return factor * BUDGET * seconds(long) / fraction

    # 100 % slow on an etcd disk: the 1h/5m page, then the 6h/30m page; the 1d/2h ticket too,
    # sooner than after a day of health (its window holds the stream's 6 hours only).
    restart = [sc.k(start + m * 60) for m in (45, 46, 50, 51, 52)]
    for long, _short, factor, severity in BURN_RATES:
        tl = sc.timeline(BURN, node="control-plane-0", long=long)
        assert tl.alert.labels["severity"] == severity
        if seconds(long) <= start:
            late = fired_after(tl) - expect(1, long, factor)
            assert 0 <= late <= BURN_EVAL_S, (long, late)
        ((_first, last),) = tl.episodes()
        assert last == sc.evaluations - 1, f"the {long} alert resolved: restart or gap"
        sc.fires(tl, also_at=restart)
    # 20 %: the 1h/5m page after 43 minutes, as early with a minute of failed scrapes.
    page = sc.timeline(BURN, node="control-plane-1", long="1h")
    late = fired_after(page) - expect(0.2, "1h", 14.4)
    assert 0 <= late <= BURN_EVAL_S, late
    without = Stream(ETCD_SC, "control-plane-1", latency=burning(0.2, 15 * MS), **b)
    twin = Scenario("(without failed scrapes)", horizon, [without], timing=Timing(BURN_EVAL_S))
    assert twin.timeline(BURN, node="control-plane-1", long="1h").states == page.states
    sc.fires(page)
    # The new stream's early slow fdatasync raises nothing.
    assert not any(
        tl.ever_active() for tl in sc.timelines if tl.alert.labels.get("node") == "control-plane-9"
    )
    # 5 %: never pages (below both page rates).
    assert not any(
        tl.ever_active()
        for tl in sc.timelines
        if tl.alert.labels.get("node") == "control-plane-2"
        and tl.alert.labels["severity"] == "critical"
    )
    # StorageClass volumes, a worker's per-node one too: every row a warning, never a page,
    # no stall warning.
    for labels in ({"storageclass": "gp2"}, {"storageclass": "gp3", "node": "worker-3"}):
        for long, *_ in BURN_RATES:
            tl = sc.timeline(BURN, long=long, **labels)
            assert tl.alert.labels["severity"] == "warning", (labels, long)
            sc.fires(tl)
        assert not sc.timeline(STALL, **labels).ever_active()
    assert not any(
        tl.ever_active()
        for tl in sc.timelines
        if tl.alert.labels.get("storageclass") == "gp3" and "node" not in tl.alert.labels
    )
    sc.never(HANG, sc.evaluations - 1)
    sc.never(MISSING, sc.evaluations - 1)
    return sc


def busy_day_scenario() -> Scenario:
    """25 hours of busy but healthy disks: the longest window, 1d, is full for the last
    hour; the events of the busy hour happen 12 hours in."""
    streams, down = busy_streams(12 * 3600)
    sc = Scenario(
        "continuous: a busy but healthy day (0.5 % of fdatasyncs at 12-48 ms) raises nothing",
        25 * 3600,
        streams,
        prometheus_gaps=down,
        timing=Timing(BURN_EVAL_S),
    )
    assert not any(tl.ever_active() for tl in sc.timelines)
    events = [12 * 3600 + t + d for t in BUSY_EVENTS.values() for d in (0, 60, 180, 300)]
    sc.never(BURN, *sorted({sc.k(t) for t in events} | {sc.k(h * 3600) for h in range(1, 26)}))
    return sc


GROUPS: dict[str, tuple[int, list[Callable[[], Scenario]]]] = {
    "continuous": (
        SCRAPE_S,
        [
            hang_scenario,
            stall_scenario,
            missing_scenario,
            role_scenario,
            failing_scenario,
            busy_hour_scenario,
        ],
    ),
    "continuous-burn": (BURN_EVAL_S, [burn_scenario, busy_day_scenario]),
}


def document(group: str, timing: Timing | None = None) -> dict[str, Any]:
    """The promtool test file of `group`, evaluated as its scenarios are (every eval_s, the
    recording groups first) or with `timing` (the "continuous" group's scenarios only)."""
    eval_s, scenarios = GROUPS[group]
    if timing is None:
        timing = Timing(eval_s)
        made = [scenario() for scenario in scenarios]
    else:
        assert group == "continuous", "only the continuous group's scenarios take a timing"
        made = [scenario(timing) for scenario in scenarios]  # type: ignore[call-arg]
    return {
        "rule_files": DEPLOYMENTS["named-etcd"],
        "evaluation_interval": f"{timing.eval_s}s",
        "group_eval_order": timing.group_eval_order(),
        "tests": [sc.test() for sc in made],
    }


def main(argv: list[str]) -> None:
    out = Path(argv[1]) if len(argv) > 1 else Path(__file__).parent
    for group, (eval_s, _) in GROUPS.items():
        head = (
            f"# Generated by alerts/tests/continuous.py ({group}): simulated continuous streams,\n"
            f"# 15 s scrapes, rules evaluated every {eval_s} s. Do not edit: change the scenarios\n"
            f"# and run scripts/generate.sh.\n# promtool test rules alerts/tests/{group}.yaml\n"
        )
        text = yaml.safe_dump(document(group), sort_keys=False, width=100000)
        (out / f"{group}.yaml").write_text(head + text)


if __name__ == "__main__":
    main(sys.argv)
