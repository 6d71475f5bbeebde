// The one configuration object of the fioprobe monitoring mixin: one line per key, what it is
// and its unit. What each key does, why its default is what it is and how the keys work
// together: docs/MIXIN.md, "Configuration keys". Windows count probe runs of
// probeIntervalSeconds each; latency thresholds are in seconds. Override a key the mixin way:
//   (import 'mixin.libsonnet') + { _config+:: { clusterLabel: 'k8s_cluster' } }

{
  _config+:: {
    // --- The schedule and the probes that should exist -----------------------------------

    // Seconds between two runs of a probe: the CronJobs' schedule (the manifests' everyMinutes).
    probeIntervalSeconds: 300,
    // How late a run may push, a fraction of the interval, before the rules treat it as missed.
    pushMarginFraction: 0.5,
    // Probes that should push, {storageclass, profile, node (node-local only)}; empty alone.
    expectedProbes: [],
    // Per-node probes, {storageclass, profile}, expected on every node that runs per-node probes.
    expectedPerNodeProbes: [],
    // etcd probes found by role, {storageclass, profile}, expected on every etcd node.
    expectedEtcdProbes: [],
    // etcd streams found by role, {storageclass}, expected on every etcd node.
    expectedEtcdStreams: [],
    // kube-state-metrics' roles (kube_node_role{role}) of the nodes that hold etcd.
    etcdNodeRoles: ['control-plane', 'master'],

    // --- Identity and selection -------------------------------------------------------------

    // Label that names the cluster (a Prometheus external label).
    clusterLabel: 'cluster',
    // PromQL matchers added to every fioprobe_* selector, comma-separated, no braces; may be empty.
    fioprobeSelector: 'storageclass!=""',
    // Probe intervals a statement of a disk's etcd role (etcd_disk) counts for after it was made.
    etcdRoleMemoryRuns: self.staleAfterRuns,
    // Profile (jobs/<name>.fio) whose fsync latency is the etcd disk's health signal.
    etcdProfile: 'etcd-fsync',
    // Profile (jobs/<name>.fio) that measures the volume's 4 KiB random-write IOPS ceiling.
    burstProfile: 'burst-ceiling',

    // --- Shared recording rules -------------------------------------------------------------

    // Runs in the rate window of probe:fioprobe_<op>_latency_seconds:p* (dashboards, regression).
    latencyWindowRuns: 6,

    // --- FioProbeEtcdFsyncLatencyHigh -------------------------------------------------------

    // Warning threshold of each run's fsync p99 on etcd disks, seconds (etcd's 10 ms).
    etcdFsyncP99WarningSeconds: 0.01,
    // Critical threshold of each run's fsync p99 on etcd disks, seconds.
    etcdFsyncP99CriticalSeconds: 0.032,
    // Slow runs, among the last etcdFsyncOfRuns, that fire the alert.
    etcdFsyncSlowRuns: 2,
    // Runs in which etcdFsyncSlowRuns are counted.
    etcdFsyncOfRuns: 3,
    // Slow runs, among the last intermittentOfRuns, that fire pattern="intermittent" (both alerts).
    intermittentSlowRuns: 6,
    // Runs in which intermittentSlowRuns are counted.
    intermittentOfRuns: 24,

    // --- FioProbeStorageClassLatencyHigh ----------------------------------------------------

    // Profile whose fsync p99 is judged on volumes that do not hold etcd.
    storageClassLatencyProfile: 'etcd-fsync',
    // Warning threshold of each run's fsync p99 by volume type (fioprobe_info's volume_type), s.
    storageClassFsyncP99WarningSeconds: {
      io1: 0.005,
      io2: 0.005,
      gp2: 0.02,
      gp3: 0.02,
      'ceph-rbd': 0.032,
      st1: 0.256,
      sc1: 0.256,
    },
    // Warning threshold for every volume type not in the table above, seconds.
    storageClassFsyncP99DefaultWarningSeconds: 0.064,
    // Slow runs, among the last storageClassOfRuns, that fire the alert.
    storageClassSlowRuns: 3,
    // Runs in which storageClassSlowRuns are counted.
    storageClassOfRuns: 4,

    // --- FioProbeBurstCreditsDepleted -------------------------------------------------------

    // Least ratio of modelled burst to baseline IOPS for a volume to count as bursting.
    burstMinBurstToBaselineRatio: 1.2,
    // Depleted: the measured ceiling in this lowest fraction of the gap from baseline to burst.
    burstDepletedGapFraction: 0.25,
    // Volume types that never burst (fioprobe_info's volume_type): never reported depleted.
    burstNonBurstingVolumeTypes: ['gp3', 'io1', 'io2', 'ceph-rbd'],
    // Runs in a row at the baseline that fire the alert.
    burstDepletedRuns: 3,

    // --- FioProbeLatencyRegression ----------------------------------------------------------

    // How long ago the baseline window ends, a Prometheus duration.
    regressionOffset: '1w',
    // Window whose median p99 is the baseline, a Prometheus duration.
    regressionBaselineWindow: '1d',
    // Least fraction of its runs the baseline window must hold.
    regressionMinBaselineFraction: 0.5,
    // p99 now more than this many times the baseline ...
    regressionRatio: 2,
    // ... and at least this many seconds above it.
    regressionMinIncreaseSeconds: 0.002,
    // Runs the regression must hold before it fires.
    regressionForRuns: 12,
    // PromQL matchers of the recorded series the alert judges (default: all but burstProfile).
    regressionSelector: 'profile!="%s"' % self.burstProfile,

    // --- FioProbeLatencyOutlier ------------------------------------------------------------

    // A probe's fsync p99 at this many times the median of its siblings ...
    outlierRatio: 3,
    // ... and this many seconds above it ...
    outlierMinIncreaseSeconds: 0.002,
    // ... in this many runs in a row ...
    outlierRuns: 3,
    // ... among at least this many probes sharing the median (itself included).
    outlierMinSiblings: 3,
    // PromQL matchers of the probes compared with their siblings (as regressionSelector).
    outlierSelector: self.regressionSelector,

    // --- FioProbeFailing / FioProbeStale / FioProbeMissing ----------------------------------

    // Failed runs in a row, while the probe still pushes, that fire FioProbeFailing.
    failingRuns: 3,
    // Intervals without any push before a probe is Stale or Missing; older data never alerts.
    staleAfterRuns: 3,
    // How long a group gone from the Pushgateway is remembered, a Prometheus duration.
    lostGroupMemory: '1d',
    // Take the nodes that should run the per-node probes from kube-state-metrics.
    perNodeInventory: false,
    // How long the node inventory is remembered through a kube-state-metrics gap, a duration.
    kubeStateMetricsGapTolerance: '10m',
    // The per-node DaemonSet's tolerations (Kubernetes objects), passed by the manifests.
    perNodeTolerations: [],
    // PromQL, one series per node (`node`) that should run the per-node probes (perNodeInventory).
    perNodeInventorySelector:
      local tolerations = self.perNodeTolerations;
      local everything = [
        t
        for t in tolerations
        if std.get(t, 'operator', 'Equal') == 'Exists' && std.get(t, 'key', '') == ''
      ];
      local keys = std.set([t.key for t in tolerations if std.get(t, 'key', '') != '']);
      if std.length(everything) > 0 then 'kube_node_info'
      else
        'kube_node_info unless on (%s, node) kube_node_spec_taint{effect=~"NoSchedule|NoExecute", key!~"%s"}' % [
          self.clusterLabel,
          std.join('|', ['node[.]kubernetes[.]io/.+'] + [std.strReplace(k, '.', '[.]') for k in keys]),
        ],

    // --- The provisioning probe (`fioprobe provision`; alerts/provisioning.libsonnet) -------

    // Seconds between two provisioning runs of a class: the provisioning CronJob's schedule.
    provisionIntervalSeconds: 600,
    // Provisioning groups that should push, {storageclass, node (node-bound classes only)}.
    expectedProvisioning: [],
    // Failed runs, among the last provisionOfRuns, that fire FioProbeProvisioningFailing.
    provisionFailingRuns: 2,
    // Runs in which provisionFailingRuns are counted.
    provisionOfRuns: 3,
    // Runs with one step above its warning threshold, among the last provisionSlowOfRuns, that fire.
    provisionSlowRuns: 2,
    // Runs in which provisionSlowRuns are counted (per step).
    provisionSlowOfRuns: 3,
    // Warning threshold of each step, seconds, by volume type; `default` (every step) for the rest.
    provisionStepWarningSeconds: {
      default: {
        created: 15,
        scheduled: 60,
        bound: 120,
        attached: 120,
        running: 120,
        written: 30,
        pod_deleted: 60,
        detached: 180,
        volume_deleted: 180,
      },
      gp2: { bound: 60, attached: 60 },
      gp3: { bound: 60, attached: 60 },
      io1: { bound: 60, attached: 60 },
      io2: { bound: 60, attached: 60 },
      st1: { bound: 60, attached: 60 },
      sc1: { bound: 60, attached: 60 },
    },
    // Runs in a row whose objects were left after their deadlines that fire ObjectsLeft.
    provisionObjectsLeftRuns: 2,
    // Provisioning intervals without a run before a class is Stale or Missing (> longest run).
    provisionStaleAfterRuns: 4,

    // === Continuous stream ===================================================================
    // `fioprobe continuous`, scraped: durations are Prometheus durations, latencies seconds.

    // Streams that should be scraped, {storageclass, node (node-local only)}; empty alone.
    expectedStreams: [],
    // Fraction of a stream's completed fdatasyncs that must meet its latency threshold.
    continuousObjectiveRatio: 0.99,
    // Latency threshold of streams on etcd disks, seconds: a bucket boundary of the histogram.
    continuousEtcdObjectiveSeconds: 0.01,
    // Burn-rate alerts: {long, short window; factor x error budget; severity on etcd disks}.
    continuousBurnRates: [
      { long: '1h', short: '5m', factor: 14.4, severity: 'critical' },
      { long: '6h', short: '30m', factor: 6, severity: 'critical' },
      { long: '1d', short: '2h', factor: 3, severity: 'warning' },
    ],
    // Least fdatasyncs in a burn rate's long window for it to count.
    continuousBurnMinSyncs: 300,
    // Seconds an operation may be outstanding at a scrape on an etcd disk before it pages.
    continuousHangCriticalSeconds: 30,
    // Seconds an operation may be outstanding on other volumes before a warning.
    continuousStorageClassHangWarningSeconds: 60,
    // Window of the stall warning on etcd disks, a Prometheus duration.
    continuousStallWindow: '1m',
    // fdatasyncs slower than the etcd threshold within the window that make a stall ...
    continuousStallSlowSyncs: 5,
    // ... or seconds with an operation outstanding beyond the stall threshold within it.
    continuousStallSeconds: 5,
    // Longest gap in a stream's series that changes no alert (keep_firing_for), a duration.
    continuousGapTolerance: '2m',
    // How long an expected stream may go without a sample before it is Missing, a duration.
    continuousMissingAfter: '5m',
    // How long every operation of a stream must fail before FioProbeContinuousFailing, a duration.
    continuousFailingAfter: '2m',

    // --- Runbooks ---------------------------------------------------------------------------

    // runbook_url is this + '#' + the lower-case alert name (docs/runbooks.md's anchors).
    runbookURLBase: (import 'publish.json').runbookUrlBase,

    // --- Dashboards --------------------------------------------------------------------------

    // What only the dashboards read (dashboards/*.libsonnet); the shared keys are above.
    dashboards+: {
      // Stable dashboard uids.
      uids: {
        overview: 'fioprobe-overview',
        comparison: 'fioprobe-comparison',
        etcd: 'fioprobe-etcd-disks',
      },
      // Tags of every dashboard.
      tags: ['fioprobe', 'storage'],
      // Tag the dashboards' links select (the "fioprobe" dropdown).
      linkTag: 'fioprobe',
      // Show the cluster variable (false hides it).
      showClusterVariable: true,
      // Time zone of the dashboards.
      timezone: 'utc',
      // Refresh interval.
      refresh: '1m',
      // Start of the default time range.
      timeFrom: 'now-24h',
      // Benchmark tables: yellow from this latency, seconds ...
      latencyYellowSeconds: 0.005,
      // ... red from this one (the etcd warning threshold), seconds.
      latencyRedSeconds: $._config.etcdFsyncP99WarningSeconds,
      // Longest gap lines bridge, milliseconds.
      spanNulls: 3600000,
      // Least heatmap cell width: the probe interval (derived).
      heatmapMinInterval: $._config.windows.interval,
      // Window of the probe-cost panels (bytes per day).
      costWindow: '1d',
      // Comparison dashboard: rate windows offered (the first is the default).
      comparisonWindows: [$._config.windows.latency, '1h', '6h', '1d', '7d'],
      // Comparison dashboard: how far back B may be shifted.
      comparisonShifts: [
        // PromQL has no `offset 0`; 1ms stands for "now".
        { key: 'now', value: '1ms' },
        { key: '1 day ago', value: '1d' },
        { key: '1 week ago', value: $._config.regressionOffset },
      ],
      // Extra matchers of etcd's own WAL fsync histogram (empty: every such series).
      etcdSelector: '',
      // Label of etcd's series that names a member in the legend.
      etcdMemberLabel: 'instance',
      // Extra matchers of CloudWatch's BurstBalance (yet-another-cloudwatch-exporter, optional).
      burstBalanceSelector: '',
      // Label of BurstBalance that names the volume.
      burstBalanceVolumeLabel: 'dimension_VolumeId',
      // Window of the stream's fdatasync p99 and of etcd's WAL fsync p99 beside it.
      continuousWindow: '5m',
      // Window of the provisioning steps' p50/p99 (a duration, not derived from the schedule:
      // the chart renders the dashboards per probe interval only).
      provisionWindow: '1h',
      // Extra matchers of node_exporter's node_disk_* series (may be empty).
      nodeExporterSelector: 'job="node-exporter"',
      // Label of node_exporter's series whose value is the Kubernetes node name.
      nodeExporterHostLabel: 'instance',
      // Label of fioprobe_continuous_info matched to node_exporter's device: disk or device.
      nodeExporterDiskLabel: 'disk',
      // Label of etcd's series that names the member's node ...
      etcdNodeLabel: 'pod',
      // ... and the text before the node name in it.
      etcdNodePrefix: 'etcd-',
    },

    // --- Unknown keys ------------------------------------------------------------------------

    // Refuse a key this file does not define (false: another mixin's keys share this object).
    refuseUnknownKeys: true,

    // --- Derived; not to be set -------------------------------------------------------------

    // Every window as a Prometheus duration; rendering fails if one holds fewer than two runs.
    windows:: (import 'alerts/windows.libsonnet')(self),
  },

}
