"""What fioprobe shows when a real Ceph cluster fails under it, scenario by scenario.

One cluster for this module (tests/ceph/conftest.py): three OSDs, pool `rbd` of size 3
and min_size 2, one image with ext4 on it holding the probe directory and the continuous
stream's directory. The probe is `fioprobe run` of the etcd-fsync profile, as the CronJob
runs it, pushing to a real Pushgateway; the stream writes and fdatasyncs once a second and
a real Prometheus scrapes both and evaluates the mixin's rules. The scenarios run in order
and each leaves the cluster as the next expects (all OSDs up, active+clean) unless it says
otherwise; a failing scenario's teardown is the module's, which starts the OSDs again.

Each scenario records what the disk did and what each metric and alert showed, and when
(FIOPROBE_CEPH_RESULTS), for docs/CEPH.md.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from conftest import REPO, STORAGECLASS, Bed, wait_until

#: Wall-clock limit of a probe run in the configuration (timeout_seconds).
PROBE_TIMEOUT_S = 30
#: What a run on a hung volume may take, its push included: the deadline, the grace the
#: volume worker gets to end (25 s), the push (2 attempts of at most 10 s) and a margin for
#: a loaded 2-core machine.
RETURNS_WITHIN_S = PROBE_TIMEOUT_S + 25 + 2 * 10 + 20
#: The stream's hang alert on a volume not etcd's (continuousStorageClassHangWarningSeconds).
HANG_WARNING_S = 60
#: A stall, not load: an fsync slower than this bucket (seconds, the histogram's `le`). The
#: healthy runs' slowest fsync stays below it even on a loaded 2-core machine.
STALL_BUCKET = "0.256"


def run_probe(bed: Bed) -> tuple[subprocess.CompletedProcess[bytes], float]:
    """`fioprobe run` once, as the CronJob runs it; (result, seconds it took)."""
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "fioprobe", "run", "--config", str(bed.config), "--quiet"],
        capture_output=True, timeout=300, cwd=REPO, check=False,
    )  # fmt: skip
    return result, time.monotonic() - started


def all_osds_up_and_clean(bed: Bed) -> None:
    for osd_id in bed.cluster.osd_ids():
        bed.cluster.start_osd(osd_id)
    bed.cluster.wait_until("active+clean", bed.cluster.pgs_active_clean, 300)


def stream_object_primary(bed: Bed) -> int:
    """The primary OSD of the placement group holding the stream's file (its first block):
    killing it lands the peering stall on the writes the stream and the probe make."""
    return bed.cluster.primary_of(bed.volume.object_of(bed.stream_file()))


def pushed_p99(bed: Bed) -> float:
    return bed.last_quantile("0.99")


def test_healthy(bed: Bed) -> None:
    """A healthy cluster: the run succeeds, its slowest fsync is far below a second, the
    stream completes its operations, and no alert fires."""
    wait_until("the stream has completed operations", lambda: bed.stream_value(
        "fioprobe_continuous_operations_total") >= 5, 60)  # fmt: skip
    result, took = run_probe(bed)
    assert result.returncode == 0, result.stderr.decode()
    assert bed.gauge("fioprobe_success") == 1
    worst = bed.gauge("fioprobe_last_sync_latency_max_seconds")
    assert bed.slow_fsyncs_pushed(STALL_BUCKET) == 0
    bed.record("healthy", run_s=round(took, 1), p50_s=bed.last_quantile("0.5"),
               p99_s=pushed_p99(bed), max_s=worst, health=bed.cluster.health())  # fmt: skip
    assert worst < 1.0
    wait_until("Prometheus has the pushed run", lambda: bed.query(
        f'fioprobe_success{{storageclass="{STORAGECLASS}"}} == 1'), 60)  # fmt: skip
    assert "firing" not in bed.alerts().values(), bed.alerts()


def test_one_osd_killed_during_a_run(bed: Bed) -> None:
    """The primary of the stream's placement group is killed two seconds into a run. The
    pool keeps min_size, so the run succeeds; the peering stall (writes held until the OSD
    is marked down and the groups have peered again) lands on it: fio's max latency and the
    count of fsyncs above 10 ms show it, the stream's slow count too, whatever the p99 of
    thousands of fsyncs says."""
    victim = stream_object_primary(bed)
    slow_pushed_before = bed.slow_fsyncs_pushed()
    stalled_before = bed.slow_fsyncs_pushed(STALL_BUCKET)
    slow_stream_before = bed.stream_slow_syncs()
    outcome: dict[str, object] = {}

    def probe() -> None:
        outcome["result"], outcome["took"] = run_probe(bed)

    runner = threading.Thread(target=probe)
    runner.start()
    time.sleep(2)
    killed_at = time.monotonic()
    bed.cluster.kill_osd(victim)
    # The stream, sampled while the run goes on: when its slow count first rises.
    stream_seen_s = None
    deadline = killed_at + RETURNS_WITHIN_S + 60
    while runner.is_alive() and time.monotonic() < deadline:
        if stream_seen_s is None and bed.stream_slow_syncs() > slow_stream_before:
            stream_seen_s = round(time.monotonic() - killed_at, 1)
        time.sleep(0.5)
    runner.join(timeout=max(1.0, deadline - time.monotonic()))
    assert not runner.is_alive(), "the run did not return"
    result = outcome["result"]
    assert isinstance(result, subprocess.CompletedProcess)
    assert result.returncode == 0, result.stderr.decode()
    assert bed.gauge("fioprobe_success") == 1
    worst = bed.gauge("fioprobe_last_sync_latency_max_seconds")
    slow_pushed = bed.slow_fsyncs_pushed() - slow_pushed_before
    stalled = bed.slow_fsyncs_pushed(STALL_BUCKET) - stalled_before
    wait_until("the stream's slow count rises", lambda: bed.stream_slow_syncs()
               > slow_stream_before, 60)  # fmt: skip
    slow_in_prometheus = (
        "sum(increase(fioprobe_continuous_sync_latency_seconds_count[2m]))"
        ' - sum(increase(fioprobe_continuous_sync_latency_seconds_bucket{le="0.01"}[2m])) > 0'
    )
    wait_until("Prometheus sees the stream's slow fdatasync",
               lambda: bed.query(slow_in_prometheus), 90,
               explain=lambda: bed.scrape_report(
                   "fioprobe_continuous_sync_latency_seconds_count",
                   'fioprobe_continuous_sync_latency_seconds_bucket{le="0.01"}'))  # fmt: skip
    took = outcome["took"]
    assert isinstance(took, float)
    bed.record("osd_killed", victim=victim, run_s=round(took, 1),
               p50_s=bed.last_quantile("0.5"), p99_s=pushed_p99(bed), max_s=worst,
               slow_fsyncs_in_run=slow_pushed, stalled_fsyncs_in_run=stalled,
               stream_slow_seen_after_kill_s=stream_seen_s,
               prometheus_slow_seen_after_kill_s=round(time.monotonic() - killed_at, 1),
               stream_slow_syncs=bed.stream_slow_syncs() - slow_stream_before,
               health=bed.cluster.health())  # fmt: skip
    assert worst >= 0.5, f"no stall in the run: max {worst * 1000:.1f} ms"
    assert stalled >= 1, "the pushed histogram shows no fsync above 256 ms"


def test_degraded(bed: Bed) -> None:
    """One OSD still down, min_size met: writes go to two replicas, no stall; the run
    succeeds and nothing stalls (fio's max stays far below the peering stall)."""
    status, checks = bed.cluster.health()
    assert status == "HEALTH_WARN" and "OSD_DOWN" in checks, checks
    result, took = run_probe(bed)
    assert result.returncode == 0, result.stderr.decode()
    worst = bed.gauge("fioprobe_last_sync_latency_max_seconds")
    bed.record("degraded", run_s=round(took, 1), p50_s=bed.last_quantile("0.5"),
               p99_s=pushed_p99(bed), max_s=worst, health=[status, checks])  # fmt: skip
    assert worst < 0.5
    started = time.monotonic()
    all_osds_up_and_clean(bed)
    bed.record("degraded", recovered_s=round(time.monotonic() - started, 1))


def hang_alert_state(bed: Bed) -> str | None:
    return bed.alerts().get("FioProbeContinuousSyncHang")


def hung_run(bed: Bed, scenario: str, started: float) -> None:
    """Two runs on the hung volume, one after the other, as the CronJob would start them:
    each pushes `timeout` within its deadline; the second says the first's worker is still
    stuck instead of piling up behind it."""
    for attempt, expected in ((1, "stuck in the kernel"), (2, "previous run is still stuck")):
        result, took = run_probe(bed)
        stderr = result.stderr.decode()
        assert result.returncode == 1, stderr
        assert "Traceback" not in stderr
        assert "FAILED (timeout)" in stderr and expected in stderr, stderr
        assert took < RETURNS_WITHIN_S, (took, stderr)
        assert bed.gauge("fioprobe_success") == 0
        assert bed.reason() == "timeout"
        bed.record(
            scenario,
            **{
                f"run{attempt}_s": round(took, 1),
                f"run{attempt}_pushed_at_s": round(time.monotonic() - started, 1),
            },
        )


def hang_seen(bed: Bed, scenario: str, started: float) -> None:
    """The stream's operation outstanding, and the hang alert firing in Prometheus."""
    inflight = bed.stream_value("fioprobe_continuous_inflight_seconds")
    assert inflight > 0, "the stream shows no outstanding operation"
    wait_until("FioProbeContinuousSyncHang fires", lambda: hang_alert_state(bed) == "firing",
               HANG_WARNING_S + 90)  # fmt: skip
    bed.record(
        scenario,
        hang_alert_firing_at_s=round(time.monotonic() - started, 1),
        inflight_at_alert_s=bed.stream_value("fioprobe_continuous_inflight_seconds"),
    )


def recovered(bed: Bed, scenario: str, started: float) -> None:
    """The held writes complete, the stream's operation ends, the next run succeeds and
    the hang alert resolves (after its keep_firing_for, continuousGapTolerance)."""
    back = time.monotonic()
    wait_until("the stream's held operation completes", lambda: bed.stream_value(
        "fioprobe_continuous_inflight_seconds") < 5, 120)  # fmt: skip
    bed.record(scenario, stream_released_after_s=round(time.monotonic() - back, 1))
    result, took = run_probe(bed)
    stderr = result.stderr.decode()
    assert result.returncode == 0, stderr
    assert bed.gauge("fioprobe_success") == 1
    bed.record(scenario, next_run_s=round(took, 1), next_run_max_s=bed.gauge(
        "fioprobe_last_sync_latency_max_seconds"))  # fmt: skip
    wait_until("the hang alert resolves", lambda: hang_alert_state(bed) is None, 300)
    bed.record(scenario, hang_alert_resolved_at_s=round(time.monotonic() - started, 1))
    assert not list((bed.probe_dir).iterdir()), "the stuck run's files are left"


def test_below_min_size(bed: Bed) -> None:
    """Two of three OSDs killed: every write to the pool is held (never refused) until they
    return; a process waiting on one cannot be killed. The probe pushes `timeout` within its
    deadline, the next run does not pile up behind the stuck one, the stream shows the
    operation outstanding and its hang alert fires; when the OSDs return everything
    recovers."""
    all_osds_up_and_clean(bed)
    victims = bed.cluster.osd_ids()[:2]
    started = time.monotonic()
    for osd_id in victims:
        bed.cluster.kill_osd(osd_id)
    bed.record("below_min_size", killed=victims)
    hung_run(bed, "below_min_size", started)
    hang_seen(bed, "below_min_size", started)
    for osd_id in victims:
        bed.cluster.start_osd(osd_id)
    bed.record("below_min_size", osds_started_at_s=round(time.monotonic() - started, 1))
    bed.cluster.wait_until("active+clean", bed.cluster.pgs_active_clean, 300)
    recovered(bed, "below_min_size", started)


def test_cluster_full(bed: Bed) -> None:
    """The full ratio lowered under what the OSDs hold: the cluster is full and holds every
    client write (the client sees a hang, nothing else); `timeout` is pushed on time and the
    stream's hang alert fires; writes resume once the ratio is restored."""
    started = time.monotonic()
    bed.cluster.set_full(True)
    wait_until("the cluster is full", lambda: "OSD_FULL" in bed.cluster.health()[1], 60)
    bed.record("full", full_at_s=round(time.monotonic() - started, 1),
               health=bed.cluster.health())  # fmt: skip
    hung_run(bed, "full", started)
    hang_seen(bed, "full", started)
    bed.cluster.set_full(False)
    bed.record("full", ratios_restored_at_s=round(time.monotonic() - started, 1))
    recovered(bed, "full", started)


def test_recovery(bed: Bed) -> None:
    """After every fault: the cluster healthy, a run succeeds and no alert is pending or
    firing (the stream's hang alerts resolved after their keep_firing_for)."""
    all_osds_up_and_clean(bed)
    wait_until("HEALTH_OK", lambda: bed.cluster.health()[0] == "HEALTH_OK", 120)
    result, took = run_probe(bed)
    assert result.returncode == 0, result.stderr.decode()
    assert bed.gauge("fioprobe_success") == 1 and bed.reason() == ""
    started = time.monotonic()
    wait_until("every alert resolved", lambda: bed.alerts() == {}, 300)
    bed.record("recovery", run_s=round(took, 1), max_s=bed.gauge(
        "fioprobe_last_sync_latency_max_seconds"), alerts_clear_after_s=round(
        time.monotonic() - started, 1), failures_total=bed.gauge("fioprobe_failures_total"),
        runs_total=bed.gauge("fioprobe_runs_total"))  # fmt: skip
