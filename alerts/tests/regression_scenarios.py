"""Scenarios of alerts/regression.libsonnet: FioProbeLatencyRegression."""

from __future__ import annotations

from scenario_builders import check, regression_alert, twins
from scenario_engine import RESTART_KINDS, SCRAPE_S, Probe, Run, Scenario


def regression_scenarios(i: int) -> list[Scenario]:
    """FioProbeLatencyRegression: p99 over the last 6 runs against the median of a day one
    week back. The probe ran for a day a week ago (8 days before "now"), then not at all
    for almost a week (a gap the baseline must survive), then again for the last hours."""
    per_day = 24 * 60 // i
    # Cumulative per-run bucket counts (le -> fsyncs at or below it) of 1,000 fsyncs.
    healthy = {"0.001": 990, "0.002": 1000, "0.004": 1000, "0.008": 1000, "+Inf": 1000}
    slow = {"0.001": 500, "0.002": 500, "0.004": 500, "0.008": 995, "+Inf": 1000}
    # 36 runs now, ending at day 8 (three hours at a 5-minute schedule): half healthy, then
    # 18 slow ones, more than the 12-run hold plus the 6-run window need at any schedule.
    recent = 36
    end = 8 * per_day

    def history(now_runs: list[Run | None], baseline_runs: int) -> list[Run | None]:
        """A baseline day (day 0) holding `baseline_runs` runs, a gap, then `now_runs`."""
        return (
            [None] * (per_day - baseline_runs)
            + [Run(buckets=healthy)] * baseline_runs
            + [None] * (end - recent - per_day)
            + now_runs
        )

    half = recent // 2
    healthy_now = [Run(buckets=healthy)] * recent
    degraded_now = [Run(buckets=healthy)] * half + [Run(buckets=slow)] * (recent - half)
    once_now = (
        [Run(buckets=healthy)] * half
        + [Run(buckets=slow)]
        + [Run(buckets=healthy)] * (recent - half - 1)
    )
    regressed = Probe("gp2", "etcd-fsync", volume_type="gp2", runs=history(degraded_now, per_day))
    quiet = [
        Probe("gp3", "etcd-fsync", volume_type="gp3", runs=history(healthy_now, per_day)),
        # the same degradation without enough baseline: a quarter of the day a week ago
        Probe(
            "gp2-thin", "etcd-fsync", volume_type="gp2", runs=history(degraded_now, per_day // 4)
        ),
        # a new probe: only the last hours
        Probe(
            "gp2-new", "etcd-fsync", volume_type="gp2", runs=[None] * (end - recent) + degraded_now
        ),
        # a single slow run now, on a probe with a full baseline
        Probe("gp2-once", "etcd-fsync", volume_type="gp2", runs=history(once_now, per_day)),
    ]
    first_bad = end - recent + half
    # Alerts are evaluated every 5 minutes here (a week of 30 s evaluations takes promtool
    # minutes); the pushed series still have 30 s samples.
    fire = (first_bad * i * 60 + SCRAPE_S + 299) // 300 * 300 + 12 * i * 60
    scenarios = [
        Scenario(
            "p99 quadruples (1 ms -> 7.96 ms) on a probe with a full baseline day a week ago, "
            "after six days without data: fires after an hour; the same on a probe with a thin "
            "baseline, on a new probe, and a single slow run: never",
            i,
            [regressed, *quiet],
            end * i * 2,
            checks=[
                check("FioProbeLatencyRegression", fire - 300),
                check("FioProbeLatencyRegression", fire, regression_alert(regressed, 0.0079596, i)),
            ],
        ),
    ]
    # The regressed probe alone (a week of samples each), with Pushgateway restarts half an
    # hour into its hold and ten minutes after it fired.
    alone = Scenario("a regressed probe", i, [regressed], end * i * 2)
    restarts = [(fire - 1800) // SCRAPE_S + 3, (fire + 600) // SCRAPE_S + 3]
    # A week of samples per twin: only the harshest kind (every group lost until its next
    # push, a new pod), compared over the last three hours at the rules' 5-minute evaluations.
    return [
        *scenarios,
        *twins(
            alone,
            ["FioProbeLatencyRegression"],
            restarts,
            kinds=RESTART_KINDS[:1],
            span=3 * 3600,
            step=300,
        ),
    ]
