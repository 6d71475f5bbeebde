// The one configuration object of the fioprobe monitoring mixin.
//
// Override any key the usual mixin way:
//   (import 'mixin.libsonnet') + { _config+:: { clusterLabel: 'k8s_cluster' } }
// or render the rule file with overrides (used by tests and the end-to-end setup):
//   jsonnet -J . --tla-code config='{ probeIntervalSeconds: 5 }' alerts/rules.jsonnet > rules.json
//
// Every window is a number of probe runs, turned into a duration with the one probe interval
// below (`windows` at the end). A Pushgateway series changes only when a run pushes and stays
// flat in between, so a duration means nothing by itself: what counts is how many runs it
// holds. Latency thresholds are in seconds (the metric contract's base unit).
//
// Facts flow one way: the deployment (manifests/, kube-prometheus, a Helm chart) knows its
// schedule and which probes and streams it runs, and passes them in here; the mixin never
// reads the deployment's files. The deployment lists below (expectedProbes,
// expectedPerNodeProbes, expectedStreams, the node inventory) only fill one small rule group
// of their own, `fioprobe.expected`; every other rule is the same for every deployment.

{
  _config+:: {
    // --- The schedule and the probes that should exist -----------------------------------

    // Seconds between two runs of a probe: the CronJobs' schedule. 5 minutes, the manifests'
    // default everyMinutes (a test keeps the two equal); the manifests' PrometheusRule passes
    // the value of the configuration it renders.
    probeIntervalSeconds: 300,

    // How late a run may push, as a fraction of the interval, before the rules treat it as
    // missed: CronJob start delays, image pulls, a 20-60 s run and the 30 s scrape all fit in
    // half an interval. `for` durations that wait for "the next run" end this long after it.
    pushMarginFraction: 0.5,

    // Every probe that should push, as {storageclass, profile, node (node-local only)}: one
    // static recording rule each (probe:fioprobe_expected:info, in the `fioprobe.expected`
    // group), so Prometheus knows a probe that never pushed or whose group is gone
    // (FioProbeMissing). Empty in the mixin alone: FioProbeMissing then has nothing to
    // compare with and never fires, and every stale group is Stale. The manifests pass their
    // probes (manifests/lib/monitoring-config.libsonnet's mixinConfig).
    expectedProbes: [],

    // The per-node probes (the manifests' DaemonSet: perNode.localDisks and
    // perNode.storageClasses) as {storageclass, profile}, without a node: which nodes run them
    // is only known at run time. One static series each
    // (probe:fioprobe_expected_per_node:info). Each is expected on every node that runs
    // per-node probes, i.e. that pushes any of them (or that the node inventory below lists):
    // such a node is Missing the ones it does not push, their groups can be Stale, and one of
    // them that no node pushes at all is Missing once, without a node.
    // Empty in the mixin alone, like expectedProbes.
    expectedPerNodeProbes: [],

    // The etcd probes found by role (the manifests' etcd DaemonSet with etcd.nodes empty) as
    // {storageclass, profile}, without a node: which nodes hold etcd is known at run time.
    // One static series each (probe:fioprobe_expected_etcd:info), expected on every etcd node
    // (node:fioprobe_etcd:info): the nodes kube-state-metrics lists with one of etcdNodeRoles
    // (kube_node_role), or, where it lists none, the nodes that push them. A cluster with no
    // such node (a managed control plane: EKS, GKE, AKS) expects none, and nothing about etcd
    // fires. Etcd probes of named nodes are in expectedProbes instead.
    expectedEtcdProbes: [],
    // The etcd streams found by role ({storageclass}), expected on the same nodes.
    expectedEtcdStreams: [],
    // kube-state-metrics' roles (kube_node_role{role}) of the nodes that hold etcd.
    etcdNodeRoles: ['control-plane', 'master'],

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

    // Which disks hold etcd is a deployment fact, not a label shape: each target's
    // configuration says so (`etcd_disk: true`), and every push publishes it as
    // fioprobe_info{etcd_disk="true"|"false"} (the continuous stream as
    // fioprobe_continuous_info{etcd_disk}). The rules join on it (probe:fioprobe_etcd_disk:info),
    // so only those disks can raise FioProbeEtcdFsyncLatencyHigh, whose critical severity
    // pages; every other probe of the fsync profile gets FioProbeStorageClassLatencyHigh.
    // Each source's latest statement of the role wins, and "false" from either source wins
    // over "true" from the other (docs/MIXIN.md, "Which disks hold etcd"); a statement (a push,
    // a scrape of a stream) counts for this many probe intervals after it was made, through a
    // Pushgateway restart without persistence or failed scrapes: the same as staleAfterRuns,
    // beyond which nothing is alerted on anyway.
    etcdRoleMemoryRuns: self.staleAfterRuns,

    // Profile (jobs/<name>.fio) whose fsync latency is the etcd disk's health signal.
    etcdProfile: 'etcd-fsync',

    // Profile (jobs/<name>.fio) that measures the 4 KiB random-write IOPS ceiling the
    // volume delivers right now; a ceiling at the baseline means burst credits are gone.
    burstProfile: 'burst-ceiling',

    // --- Shared recording rules -------------------------------------------------------------

    // Runs in the rate window of probe:fioprobe_<op>_latency_seconds:p* (dashboards and the
    // regression alert): six runs give a stable p99; 30 minutes at a 5-minute schedule.
    latencyWindowRuns: 6,

    // --- FioProbeEtcdFsyncLatencyHigh -------------------------------------------------------

    // etcd's documented requirement: WAL fsync p99 below 10 ms. Compared with each run's own
    // p99 as fio computed it (fioprobe_last_sync_latency_seconds{quantile="0.99"}).
    etcdFsyncP99WarningSeconds: 0.01,
    // Critical: above 32 ms etcd's commit latency eats a third of its default 100 ms
    // heartbeat interval; leader elections and apiserver timeouts follow.
    etcdFsyncP99CriticalSeconds: 0.032,
    // Fires when at least this many of the last `etcdFsyncOfRuns` runs were above the
    // threshold: one slow run (a backup, a compaction next door) never pages, a disk that is
    // slow in two runs out of three does, one interval after its first slow run.
    etcdFsyncSlowRuns: 2,
    etcdFsyncOfRuns: 3,

    // Intermittent latency (both alerts above, label pattern="intermittent", warning): slow in
    // at least this many of the last `intermittentOfRuns` runs, however spread. 6 of 24 is a
    // run in four over two hours at a 5-minute schedule: slow every third run warns at its
    // sixth slow run (75.5 minutes after the first); a nightly backup (one run a day) never does.
    intermittentSlowRuns: 6,
    intermittentOfRuns: 24,

    // --- FioProbeStorageClassLatencyHigh ----------------------------------------------------

    // The fsync profile run on ordinary volumes (not etcd's disks, see etcdDiskSelector).
    storageClassLatencyProfile: 'etcd-fsync',
    // Warning threshold of each run's fsync p99 by the volume's type (fioprobe_info's
    // volume_type, from the probe's volume model). What each type is sold as: io1/io2
    // provisioned-IOPS SSDs low single-digit ms; gp2/gp3 general-purpose SSDs single-digit ms;
    // Ceph RBD a network round trip to three replicas; st1/sc1 hard disks, seeks of ~10 ms
    // each and no latency promise.
    storageClassFsyncP99WarningSeconds: {
      io1: 0.005,
      io2: 0.005,
      gp2: 0.02,
      gp3: 0.02,
      'ceph-rbd': 0.032,
      st1: 0.256,
      sc1: 0.256,
    },
    // ... and for every type not in the table (`unknown`, a type added later).
    storageClassFsyncP99DefaultWarningSeconds: 0.064,
    // Not a page: three slow runs out of the last four.
    storageClassSlowRuns: 3,
    storageClassOfRuns: 4,

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
    // Consecutive runs at the baseline: one throttled run (the instance-level EBS burst, a
    // neighbour on the node) does not alert.
    burstDepletedRuns: 3,

    // --- FioProbeLatencyRegression ----------------------------------------------------------

    // The baseline is the median of the probe's p99 over `regressionBaselineWindow`, ending
    // `regressionOffset` ago: a week back compares like with like (weekly backups, batch jobs,
    // traffic peaks), and a median over a whole day is neither blinded by a gap nor decided
    // by one unusual half hour.
    regressionOffset: '1w',
    regressionBaselineWindow: '1d',
    // The baseline day must hold at least this fraction of its runs, so a probe younger than
    // eight days, or one that was down most of that day, cannot fire.
    regressionMinBaselineFraction: 0.5,
    // "Well above": p99 now more than this many times the baseline ...
    regressionRatio: 2,
    // ... AND at least this many seconds higher, so quiet disks stay quiet: 0.2 ms -> 0.6 ms
    // is 3x but harmless; 2 ms is a fifth of etcd's 10 ms budget.
    regressionMinIncreaseSeconds: 0.002,
    // A regression is a trend, not an incident: it must hold this many runs (an hour at a
    // 5-minute schedule), longer than the latency window, so one slow run never fires it.
    regressionForRuns: 12,
    // Series excluded from regression alerts (PromQL matchers on the recorded series). The
    // burst-ceiling profile's latency rises whenever credits run out; that has its own
    // alert, so it is excluded by default.
    regressionSelector: 'profile!="%s"' % self.burstProfile,

    // --- FioProbeLatencyOutlier ------------------------------------------------------------

    // A probe's fsync p99 at this many times the median of its siblings (same cluster,
    // StorageClass and profile: the per-node probes of a StorageClass, the etcd disks) ...
    outlierRatio: 3,
    // ... and this many seconds above it (quiet disks stay quiet) ...
    outlierMinIncreaseSeconds: 0.002,
    // ... in this many runs in a row ...
    outlierRuns: 3,
    // ... among at least this many probes sharing the median (itself included).
    outlierMinSiblings: 3,
    // Probes compared with their siblings (PromQL matchers on the recorded series): every
    // profile but the burst ceiling, like the regression alert.
    outlierSelector: self.regressionSelector,

    // --- FioProbeFailing / FioProbeStale / FioProbeMissing ----------------------------------

    // The last runs failed, this many in a row, while the probe still pushes: one transient
    // failure (node drain, image pull) stays silent.
    failingRuns: 3,
    // No push at all (neither success nor failure) for this many intervals: the probe is
    // not running or cannot reach the Pushgateway. Stale if its series are still there,
    // Missing if an expected probe has none. Data older than this is never alerted on.
    staleAfterRuns: 3,
    // A probe's group that disappeared from the Pushgateway (a restart without persistence, a
    // new pod, `fioprobe gc`) is remembered this long after the last scrape that saw it: a
    // probe that pushes again within it changed nothing, one that had stopped stays Stale (and
    // turns Missing only after this, in the same evaluation), however long ago it stopped. At
    // least twice the stale threshold.
    // A group deleted with `fioprobe gc` stays Stale as long, unless it is no longer expected
    // or its node has left the node inventory (docs/MIXIN.md, "Restarts and gaps").
    lostGroupMemory: '1d',

    // Where kube-state-metrics runs (kube-prometheus always has it): take the nodes that
    // should run the per-node probes from it. A node it lists that pushed none of them is then
    // Missing them too (a new node whose pod never started), and the groups a node left behind
    // when it was removed from the cluster stop being Stale (delete them with `fioprobe gc
    // --node`). Off by default: a node list that does not match where the DaemonSet runs would
    // raise Missing for every node it leaves out (see perNodeInventorySelector).
    perNodeInventory: false,
    // The node inventory is remembered this long through a gap of kube-state-metrics (its pod
    // restarted or rescheduled, a failed scrape): the nodes it listed stay the nodes, instead
    // of falling back to the pushing ones and back again. A node removed from the cluster
    // stays listed as long.
    kubeStateMetricsGapTolerance: '10m',
    // The per-node DaemonSet's tolerations (perNode.tolerations, Kubernetes objects), passed
    // by the manifests: the default node inventory below keeps the nodes with taints they
    // tolerate.
    perNodeTolerations: [],
    // The nodes that should run the per-node probes (with perNodeInventory): a PromQL
    // expression with one series per node, its name in `node`. Default: every node
    // kube-state-metrics lists, minus those with a NoSchedule or NoExecute taint that
    // perNodeTolerations do not tolerate (by key: control-plane nodes, dedicated pools); a
    // DaemonSet tolerates the node.kubernetes.io/* taints (not-ready, unreachable, pressure)
    // by itself, so such nodes stay listed. Set it to match perNode.nodeSelector, which
    // kube_node_info cannot (docs/MIXIN.md, "Per-node probes"). When it returns nothing
    // (kube-state-metrics down), the nodes are the ones that push, as without it.
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

    // === Continuous stream ===================================================================
    // `fioprobe continuous` (docs/CONTINUOUS.md): one small write + fdatasync about once a
    // second per target, scraped every 15 s, not pushed. Its alerts (alerts/continuous.libsonnet,
    // docs/MIXIN.md "The continuous stream") use the keys of this section and no window of the
    // probe schedule above, except for how long an etcd disk's role is remembered
    // (etcdRoleMemoryRuns). Durations are Prometheus durations, latencies seconds.

    // Every stream that should be scraped, as {storageclass, node (node-local only)}: one
    // static series each (stream:fioprobe_continuous_expected:info), so that a stream that
    // never came up, or whose pod is gone, raises FioProbeContinuousMissing. Read from the
    // manifests (continuous.enabled, continuous.etcd: one per etcd.nodes,
    // continuous.storageClasses: one per storageClasses entry); empty in the mixin alone, where
    // FioProbeContinuousMissing then never fires.
    expectedStreams: [],

    // The objective: this fraction of a stream's completed fdatasyncs at or below its latency
    // threshold. The rest, 1 % by default, is the error budget the burn rates below spend.
    continuousObjectiveRatio: 0.99,
    // The threshold on disks that hold etcd: etcd's documented 10 ms for WAL fsyncs. Streams on
    // other volumes use the threshold of their volume type (fioprobe_continuous_info's
    // volume_type), storageClassFsyncP99WarningSeconds and its default above. Every one of
    // these must be a bucket boundary of the histogram (lib/util.libsonnet's latencyBuckets):
    // the fsyncs meeting the objective are a bucket's count, exact, never an interpolation.
    // Its own key, not etcdFsyncP99WarningSeconds: that one may be any number (fio's percentile
    // is exact), this one only a boundary (tests/repo/test_thresholds.py keeps the two at 10 ms).
    continuousEtcdObjectiveSeconds: 0.01,

    // Multiwindow, multi-burn-rate alerts (Google SRE workbook, chapter "Alerting on SLOs",
    // section "Multiwindow, Multi-Burn-Rate Alerts"): an alert fires while the slow fraction
    // over both `long` and `short` is above `factor` times the error budget. The long window
    // says that enough budget was spent (factor x long / 30 days: 2 %, 5 %, 10 % of a 30-day
    // budget); the short one, a twelfth of it, that it is still being spent, so the alert
    // resolves minutes after the disk recovers. 14.4x over 1h/5m and 6x over 6h/30m page,
    // 3x over 1d/2h is a ticket: the workbook's recommended page rows (its table
    // "Recommended parameters for a 99.9% SLO alerting configuration") and the ticket row of
    // its alert example; its slowest ticket, 1x over 3d/6h, is left out (add it here if
    // wanted). `severity` applies on etcd disks; on other volumes every row is a warning.
    continuousBurnRates: [
      { long: '1h', short: '5m', factor: 14.4, severity: 'critical' },
      { long: '6h', short: '30m', factor: 6, severity: 'critical' },
      { long: '1d', short: '2h', factor: 3, severity: 'warning' },
    ],
    // A burn rate only counts once its long window holds this many fdatasyncs: a new stream
    // (a new target, a node's first pod) would otherwise judge a day's objective on its first
    // few fsyncs, and one slow fsync among its first 30 is a 3 % error ratio, a 3x burn. 300
    // is 5 minutes of a 1-per-second stream; the hang and stall alerts cover those minutes.
    // A restarted pod keeps its stream's history (its old series stay in the window).
    continuousBurnMinSyncs: 300,

    // An operation (write + fdatasync) outstanding this long at a scrape, on an etcd disk,
    // pages: etcd's default election timeout is 1 s, so its leader is long gone; the page comes
    // while the hang lasts, not after it. With 15 s scrapes every hang of 45 s or more is seen
    // at or above 30 s; shorter ones show as stalls.
    continuousHangCriticalSeconds: 30,
    // On other volumes a warning, later: nothing of the control plane waits on them.
    continuousStorageClassHangWarningSeconds: 60,

    // A stall on an etcd disk (a warning): within `continuousStallWindow`, at least
    // `continuousStallSlowSyncs` fdatasyncs slower than the etcd threshold (5 s of slow
    // fsyncs at one a second), or at least `continuousStallSeconds` of time with an operation
    // outstanding beyond the stream's stall threshold (one fsync stuck that long). A busy but
    // healthy disk, up to 0.5 % of fsyncs at 10-50 ms, is one slow fsync in three minutes.
    continuousStallWindow: '1m',
    continuousStallSlowSyncs: 5,
    continuousStallSeconds: 5,

    // A gap in a stream's series up to this long changes no alert: failed scrapes (Prometheus
    // writes staleness markers at once, so the in-flight gauge vanishes with the first one), a
    // restarted pod, a Prometheus restart. Every stream alert keeps firing this long after its
    // condition last held (keep_firing_for), and a stream's facts (its threshold) are taken from
    // the last fioprobe_continuous_info seen within it.
    continuousGapTolerance: '2m',
    // An expected stream with no fioprobe_continuous_info sample for this long is
    // FioProbeContinuousMissing (after continuousGapTolerance more, so a Prometheus that just
    // started does not report every stream before its first scrape).
    continuousMissingAfter: '5m',
    // A stream whose every operation (write + fdatasync, or its set-up) has failed for this
    // long is FioProbeContinuousFailing (critical on etcd disks, a warning elsewhere): the disk
    // returns errors, is full or read-only, or the stream refuses its directory. One failed
    // operation between successes, or a restart, is a moment (fioprobe_continuous_failing_seconds
    // counts from the first failure after the last success).
    continuousFailingAfter: '2m',

    // --- Runbooks ---------------------------------------------------------------------------

    // runbook_url = runbookURLBase + '#' + lower-case alert name (the heading anchors of
    // docs/runbooks.md). The published copy's by default (publish.json); point it at your own
    // (wiki, internal Git) to add local steps.
    runbookURLBase: (import 'publish.json').runbookUrlBase,

    // --- Dashboards --------------------------------------------------------------------------

    // What only the dashboards read (dashboards/*.libsonnet); thresholds and selectors shared
    // with the rules are the keys above.
    dashboards+: {
      // Stable uids: links and bookmarks to the dashboards survive re-imports.
      uids: {
        overview: 'fioprobe-overview',
        comparison: 'fioprobe-comparison',
        etcd: 'fioprobe-etcd-disks',
      },
      tags: ['fioprobe', 'storage'],
      // Tag the dashboard links select: every dashboard carrying it appears in each one's
      // "fioprobe" dropdown.
      linkTag: 'fioprobe',
      // false hides the cluster variable (single-cluster setups, where it is empty anyway).
      showClusterVariable: true,
      timezone: 'utc',
      refresh: '1m',
      timeFrom: 'now-24h',
      // The benchmark tables' colours: yellow from 5 ms, red from 10 ms (etcd's fsync p99
      // requirement, the same number as the etcd alert's warning threshold).
      latencyYellowSeconds: 0.005,
      latencyRedSeconds: $._config.etcdFsyncP99WarningSeconds,
      // Probes push every few minutes; a Pushgateway series keeps its value in between, so
      // lines need no gap-bridging, but a missing push should show as a gap after an hour.
      spanNulls: 3600000,
      // Heatmap cells at least one probe interval wide: narrower ones would mostly fall
      // between two runs and be empty. Derived from the schedule (probeIntervalSeconds).
      heatmapMinInterval: $._config.windows.interval,
      // Window of the probe-cost panels (bytes per day).
      costWindow: '1d',
      // Comparison dashboard: rate windows offered for its histogram quantiles (the first
      // is the default, the recording rules' window), and how far back B may be shifted.
      comparisonWindows: [$._config.windows.latency, '1h', '6h', '1d', '7d'],
      comparisonShifts: [
        // PromQL has no `offset 0`; 1ms stands for "now".
        { key: 'now', value: '1ms' },
        { key: '1 day ago', value: '1d' },
        { key: '1 week ago', value: $._config.regressionOffset },
      ],
      // etcd's own WAL fsync histogram: extra matchers (e.g. 'job="etcd"'; empty: every
      // etcd_disk_wal_fsync_duration_seconds series of the cluster) and the label that
      // names an etcd member in its legend. These are etcd's series, scraped by the
      // platform's Prometheus, not fioprobe's pushed ones.
      etcdSelector: '',
      etcdMemberLabel: 'instance',
      // CloudWatch BurstBalance from yet-another-cloudwatch-exporter (optional, shown when
      // present; nothing depends on it): extra matchers and the label naming the volume.
      burstBalanceSelector: '',
      burstBalanceVolumeLabel: 'dimension_VolumeId',

      // The continuous stream's panels (`fioprobe continuous`, scraped, not pushed).
      // Window of the stream's fdatasync p99, and of etcd's WAL fsync p99 beside it on the
      // etcd disks dashboard: at one fdatasync a second it holds 300 of them, so its p99 is
      // not merely the slowest one, and a stall shows within minutes.
      // (The stall and hang lines are the stream alerts' own keys, continuousStallSeconds,
      // continuousStallWindow and continuousHangCriticalSeconds.)
      continuousWindow: '5m',
      // node_exporter's disk series (node_disk_*), joined to the block device the stream's
      // file lands on (fioprobe_continuous_info). node_exporter names its host only by a
      // label its scrape configuration sets, so this is the one place where a job/instance
      // label is used: its selector (extra matchers; may be empty), and the label whose
      // value is the Kubernetes node name (kube-prometheus relabels `instance` to it; with
      // host:port there, relabel or set a label that holds the node name).
      nodeExporterSelector: 'job="node-exporter"',
      nodeExporterHostLabel: 'instance',
      // The label of fioprobe_continuous_info whose value is node_exporter's `device`:
      // 'disk', the whole disk (nvme0n1 for a filesystem on nvme0n1p1, dm-0 itself for one
      // on dm-0), which node_exporter reports by default (its diskstats collector leaves
      // partitions out), or 'device', the partition itself, where node_exporter is set to
      // report partitions.
      nodeExporterDiskLabel: 'disk',
      // Which etcd member runs on which node, for etcd's WAL fsync p99 beside the stream of
      // the same node: the label of etcd's series that names the member's node, and the text
      // before the node name in it. Static pods (kubeadm, OpenShift) are mirrored as
      // `etcd-<node>`, which a pod-based scrape puts in `pod`; where a relabeling adds the
      // node name itself (say as `node`), set etcdNodeLabel: 'node', etcdNodePrefix: ''.
      etcdNodeLabel: 'pod',
      etcdNodePrefix: 'etcd-',
    },

    // --- Unknown keys ------------------------------------------------------------------------

    // A key this file does not define is refused, naming it and the nearest known one: a
    // misspelt or retired key (`latencyWindow`) would otherwise be ignored without a word and
    // its default used. Set false only where another mixin's keys share this object (mixins
    // merged with `+` into one); kube-prometheus renders each mixin with a _config of its own.
    // Checked once per output (rules, alerts, dashboards: mixin.libsonnet's _configProblems).
    refuseUnknownKeys: true,

    // --- Derived; not to be set -------------------------------------------------------------

    // Every window as a Prometheus duration, from the keys above. Rendering fails here, with
    // the reason, when a window would hold fewer than two runs.
    windows:: (import 'alerts/windows.libsonnet')(self),
  },

}
