// The one configuration object of the fioprobe monitoring mixin.
//
// Override any key the usual mixin way:
//   (import 'mixin.libsonnet') + { _config+:: { clusterLabel: 'k8s_cluster' } }
// or render the rule file with overrides (used by tests and the end-to-end setup):
//   jsonnet -J . --tla-code config='{ latencyWindow: "1m" }' alerts/rules.jsonnet > rules.json
//
// Durations are Prometheus duration strings. Latency thresholds are in seconds (the metric
// contract's base unit). Probes run on a CronJob schedule of a few minutes (think 5m), and a
// Pushgateway only changes its series when a run pushes, so every window below must span
// several runs: a window shorter than two runs sees no increase at all.
{
  _config+:: {
    // --- Identity and selection -------------------------------------------------------------

    // Label that names the cluster. It comes from Prometheus' external labels (one
    // Prometheus per cluster, remote-writing to Thanos/Cortex/Mimir), so in a single
    // Prometheus it is absent from stored series and only added to alerts on their way out;
    // grouping by it is then a no-op, and in a multi-cluster store it keeps clusters apart.
    clusterLabel: 'cluster',

    // Matchers added to every fioprobe_* selector (comma-separated PromQL matchers, without
    // braces; may be empty). Use it to pick one fioprobe deployment out of a shared store,
    // e.g. 'fioprobe_env="prod"'. It must only use labels fioprobe pushes or external labels:
    // never `job` or `instance`, which OpenShift user-workload monitoring renames to
    // exported_job/exported_instance. The default matches every fioprobe series (every
    // pushed group carries a storageclass) and so selects everything.
    fioprobeSelector: 'storageclass!=""',

    // Profile (jobs/<name>.fio) whose fsync latency is the etcd disk's health signal.
    etcdProfile: 'etcd-fsync',

    // Profile (jobs/<name>.fio) that measures the 4 KiB random-write IOPS ceiling the
    // volume delivers right now; a ceiling at the baseline means burst credits are gone.
    burstProfile: 'burst-ceiling',

    // --- Shared recording rules -------------------------------------------------------------

    // Rate window of the latency histograms behind probe:fioprobe_<op>_latency_seconds:p*.
    // 30m holds six 5-minute runs: enough samples for a stable p99 (a single slow run
    // cannot decide it alone), short enough to page within about half an hour.
    latencyWindow: '30m',

    // --- FioProbeEtcdFsyncLatencyHigh -------------------------------------------------------

    // etcd's documented requirement: WAL fsync p99 below 10 ms. 0.01 is a histogram bucket
    // boundary, so "above 10 ms" is exact: it fires iff more than 1% of fsyncs took > 10 ms.
    etcdFsyncP99WarningSeconds: 0.01,
    // Critical: above 32 ms (also a bucket boundary) etcd's commit latency eats a third of
    // its default 100 ms heartbeat interval; leader elections and apiserver timeouts follow.
    etcdFsyncP99CriticalSeconds: 0.032,
    // Held for 10m on top of the 30m window: a burst of noisy-neighbour IO (a backup, a
    // compaction) must not page, a disk that stays slow for two more runs must.
    etcdFsyncWarningFor: '10m',
    etcdFsyncCriticalFor: '10m',

    // --- FioProbeBurstCreditsDepleted -------------------------------------------------------

    // The volume "bursts" only if its modelled burst IOPS exceed baseline by this factor.
    // Below it (gp2 near 1 TiB: 2,970 baseline vs 3,000 burst) fio's run-to-run noise of a
    // few percent cannot tell a depleted volume from a bursting one.
    burstMinBurstToBaselineRatio: 1.2,
    // Depleted when the measured ceiling lies in the lowest quarter of the gap between
    // baseline and burst: EBS gp2 delivers either the burst rate (credits left) or the
    // baseline (credits gone), so a quarter leaves room for noise on both sides.
    burstDepletedGapFraction: 0.25,
    // Volume types that never burst (AWS: gp3, io1, io2 are provisioned; Ceph RBD has no
    // credits). Excluded by fioprobe_info's volume_type even if a misconfigured volume
    // model claims burst IOPS, so these never report depletion.
    burstNonBurstingVolumeTypes: ['gp3', 'io1', 'io2', 'ceph-rbd'],
    // Three consecutive 5-minute measurements at baseline: one throttled run (instance-level
    // EBS burst, a neighbour on the node) does not alert.
    burstDepletedFor: '15m',

    // --- FioProbeLatencyRegression ----------------------------------------------------------

    // Compare with the same probe this long ago. One week compares like with like (same
    // weekday, same hour: backups, batch jobs and traffic peaks are weekly).
    regressionOffset: '1w',
    // "Well above": p99 now more than this many times the old p99 ...
    regressionRatio: 2,
    // ... AND at least this many seconds higher, so quiet disks stay quiet: 0.2 ms -> 0.6 ms
    // is 3x but harmless; 2 ms is a fifth of etcd's 10 ms budget.
    regressionMinIncreaseSeconds: 0.002,
    // A regression is a trend, not an incident: it must hold for an hour.
    regressionFor: '1h',
    // Series excluded from regression alerts (PromQL matchers on the recorded series). The
    // burst-ceiling profile's latency rises whenever credits run out; that has its own
    // alert, so it is excluded by default.
    regressionSelector: 'profile!="%s"' % self.burstProfile,

    // --- FioProbeFailing / FioProbeStale ----------------------------------------------------

    // The last run failed and no run has succeeded for this long: three 5-minute runs in a
    // row, so one transient failure (node drain, image pull) stays silent.
    failingFor: '15m',
    // No successful run for this many seconds while the last run did not fail either: the
    // probe is not running or not pushing (CronJob suspended, pod unschedulable, NetworkPolicy
    // or Pushgateway unreachable). 30 minutes is six missed 5-minute runs.
    // The threshold is itself a duration, so the alert has no `for`.
    staleAfterSeconds: 1800,

    // --- Runbooks ---------------------------------------------------------------------------

    // runbook_url = runbookURLBase + '#' + lower-case alert name (the heading anchors of
    // docs/runbooks.md). Point it at your own copy (wiki, internal Git) to add local steps.
    runbookURLBase: 'https://github.com/fioprobe/fioprobe/blob/main/docs/runbooks.md',
  },
}
