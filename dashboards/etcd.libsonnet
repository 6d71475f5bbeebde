// etcd disks: the node-local probes on control-plane nodes. fsync p99 per node against
// etcd's 10 ms, etcd's own WAL fsync p99 beside the probe's, the continuous stream of each
// etcd disk (fdatasync latency beside the probe's last run and etcd's own, in-flight age,
// stalls, node_exporter's view of the device), and the burst-ceiling probe's measured IOPS
// against the volume model's baseline and burst, with the modelled credit balance (and
// CloudWatch's, where it is exported).
local u = import '../lib/util.libsonnet';
local g = import 'g.libsonnet';

function(c)
  local k = (import 'common.libsonnet')(c);
  local d = c.dashboards;
  local var = g.dashboard.variable;
  local p99 = k.quantiles.p99;

  local nodeLocal = ['node!=""', 'storageclass=~"$storageclass"', 'node=~"$node"'];
  local fsyncRaw = k.raw(['quantile="%s"' % p99.q] + nodeLocal + ['profile=~"$profile"']);
  local fsyncRec = k.rec(nodeLocal + ['profile=~"$profile"']);
  local etcdSteps = [
    { color: 'green', value: null },
    { color: 'yellow', value: d.latencyYellowSeconds },
    { color: 'red', value: c.etcdFsyncP99WarningSeconds },
    { color: 'dark-red', value: c.etcdFsyncP99CriticalSeconds },
  ];
  local thresholdsText =
    "Yellow from %s s; red from %s s (etcd's requirement, FioProbeEtcdFsyncLatencyHigh "
    % [u.num(d.latencyYellowSeconds), u.num(c.etcdFsyncP99WarningSeconds)]
    + 'warning); dark red from %s s (critical).' % u.num(c.etcdFsyncP99CriticalSeconds);
  local latestTitle = 'Latest fsync p99 per node';
  local overTimeTitle = 'fsync p99 per node';
  local probeP99 = 'max by (node) (probe:fioprobe_sync_latency_seconds:p99%s)' % fsyncRec;

  // The continuous stream of each etcd disk: one panel group for every selected node, lines
  // per node (which node's disk is the slow one is the first question), and the heatmap,
  // which cannot sum nodes, repeated per node that holds an etcd disk ($etcd_node).
  local stream = k.stream(nodeLocal, true, '{{node}}', 'per etcd disk node');
  // etcd's WAL fsync p99 per member, on the node of its member: the member's series name
  // their node by etcdNodeLabel, as etcdNodePrefix + node name. That name is built from
  // the etcd disk's node (label_join copies labels without a regex, so no `$1` reaches
  // Grafana) and joined on, so each line is the etcd member that writes to that disk.
  local memberName =
    local info = '%s%s' % [u.etcdDiskRecord, k.rec(nodeLocal)];
    if d.etcdNodePrefix == '' then 'label_join(%s, "%s", "", "node")' % [info, d.etcdNodeLabel]
    else
      'label_join(label_replace(%s, "etcd_node_prefix", "%s", "node", ".*"), "%s", "", "etcd_node_prefix", "node")'
      % [info, d.etcdNodePrefix, d.etcdNodeLabel];
  local etcdPerNode =
    local memberBy = std.join(', ', [c.clusterLabel, d.etcdNodeLabel]);
    'max by (%s) (' % k.volumeBy
    + 'histogram_quantile(0.99, sum by (%s, le) (rate(etcd_disk_wal_fsync_duration_seconds_bucket%s[%s])))'
      % [memberBy, k.ext(d.etcdSelector), d.continuousWindow]
    + ' * on (%s) group_right () %s)' % [memberBy, memberName];
  local streamP99 =
    k.latencyTimeSeries(
      stream.p99Title,
      stream.p99Text + stream.probeLastRunText(overTimeTitle)
      + " Dotted: etcd's own WAL fsync p99 of the member on that node, a histogram estimate "
      + 'over the same %s (etcd_disk_wal_fsync_duration_seconds_bucket; ' % d.continuousWindow
      + "the member's node from its %s label, \"%s<node>\": " % [d.etcdNodeLabel, d.etcdNodePrefix]
      + 'dashboards.etcdNodeLabel, etcdNodePrefix), present where Prometheus scrapes etcd. '
      + "The stream writes like etcd's WAL, so the two should agree; etcd above the stream "
      + "is etcd's own load. " + thresholdsText,
      [
        k.target(stream.p99Expr, 'stream {{node}}'),
        stream.lastRunTarget(nodeLocal + ['profile=~"$profile"'], '{{node}}'),
        k.target(etcdPerNode, 'etcd {{node}}'),
      ],
      etcdSteps,
      w=24,
    )
    + k.lineStyles({ '^probe last run .*': 'dash', '^etcd .*': 'dot' });

  k.dashboard(
    'etcd',
    'fioprobe / etcd disks',
    "The disks that hold etcd on control-plane nodes, as fioprobe's node-local probes, its "
    + 'continuous streams and etcd itself see them: fsync latency per node, stalls and hangs, '
    + "the device's own figures, and the volume's burst state.",
    [
      k.datasourceVar,
      k.clusterVar,
      k.storageclassVar(['node!=""']),
      k.nodeVar(['node!=""', 'storageclass=~"$storageclass"']),
      k.labelVar(
        'profile',
        'profile',
        'fsync profile',
        'Profile whose fsync latency the fsync panels show (default %s).' % c.etcdProfile,
        ['node!=""', 'storageclass=~"$storageclass"', 'node=~"$node"'],
        'fioprobe_sync_latency_seconds_count',
      )
      + var.query.selectionOptions.withIncludeAll(false)
      + var.query.selectionOptions.withMulti(false)
      + var.query.generalOptions.withCurrent(c.etcdProfile),
      // The selected nodes that hold an etcd disk, one heatmap each; hidden: the node
      // variable selects, and this one only leaves out the nodes without an etcd disk
      // (workers with per-node probes), which would otherwise get an empty heatmap each.
      k.queryVar(
        'etcd_node',
        'node',
        '%s%s' % [u.etcdDiskRecord, k.rec(nodeLocal)],
        'etcd disk nodes',
        'Selected nodes whose configuration declares an etcd disk (%s).' % u.etcdDiskRecord,
      )
      + var.query.selectionOptions.withMulti()
      + var.query.selectionOptions.withIncludeAll(true, '.*')
      + var.query.generalOptions.withCurrent('All', '$__all')
      + var.query.generalOptions.showOnDashboard.withNothing(),
    ],
    [
      k.row('fsync'),
      k.barGauge(
        latestTitle,
        k.lastRunText(p99) + ' This is the number FioProbeEtcdFsyncLatencyHigh judges each '
        + 'run by. ' + k.differFromEstimateText(overTimeTitle) + ' ' + thresholdsText,
        's',
        k.instant('max by (node) (fioprobe_last_sync_latency_seconds%s)' % fsyncRaw, '{{node}}'),
        etcdSteps,
        w=8,
      ),
      k.latencyTimeSeries(
        overTimeTitle,
        'Probe fsync p99 per control-plane node over %s ' % k.latencyWindowText
        + '(recording rule probe:fioprobe_sync_latency_seconds:p99). '
        + k.estimateText(k.latencyWindowText) + ' '
        + k.differFromLastRunText(latestTitle) + ' "%s" shows the last run\'s exact p99 ' % stream.p99Title
        + "beside the continuous stream's and etcd's own; they differ from this estimate for "
        + 'the same reasons. ' + thresholdsText,
        k.target(probeP99, '{{node}}'),
        etcdSteps,
        w=16,
      ),
      k.latencyTimeSeries(
        'Probe fsync p99 vs etcd WAL fsync p99',
        "The probe's fsync p99 per node (as in \"%s\") beside etcd's own WAL " % overTimeTitle
        + 'fsync p99 per member (histogram_quantile over etcd_disk_wal_fsync_duration_seconds'
        + '_bucket), each a histogram estimate over %s ' % k.latencyWindowText
        + "(etcd's: its own fsyncs of those %s). " % c.windows.latency
        + "The probe's buckets contain every boundary of etcd's, so the two are estimated "
        + "alike and comparable. etcd's lines appear only where Prometheus scrapes etcd. "
        + thresholdsText,
        [
          k.target(probeP99, 'probe {{node}}'),
          k.target(
            'histogram_quantile(0.99, sum by (%s, le) ' % d.etcdMemberLabel
            + '(rate(etcd_disk_wal_fsync_duration_seconds_bucket%s[%s])))'
              % [k.ext(d.etcdSelector), c.windows.latency],
            'etcd {{%s}}' % d.etcdMemberLabel
          ),
        ],
        etcdSteps,
        w=24,
      ),
      k.row('Continuous stream (etcd disks)'),
      streamP99,
      stream.inflight(),
      stream.stall(),
      stream.failingFor(w=24),
      stream.writeAwait(),
      stream.utilisation(),
      k.row('Stream fdatasync latency distribution per etcd disk node'),
      stream.heatmap('etcd_node', 'node=~"$etcd_node"'),
      k.row('Burst credits'),
      // Node-local volumes only, like the rest of this dashboard: dedicated probe volumes
      // of a StorageClass (PVCs, no node) have these panels on the Overview.
      k.burstCeiling(nodeLocal, '{{node}} {{storageclass}}', 'per node', w=24),
      k.burstBalance(nodeLocal, '{{node}} {{storageclass}}', 'per node-local volume'),
      k.fractionTimeSeries(
        'CloudWatch BurstBalance (when exported)',
        "AWS CloudWatch's BurstBalance per EBS volume, 0 to 100 %, as "
        + 'yet-another-cloudwatch-exporter exports it (aws_ebs_burst_balance_average, the '
        + "average of CloudWatch's period): measured by AWS, unlike the modelled balance "
        + 'beside it. Optional: only gp2/st1/sc1 volumes up to 1 TiB have it, and only where '
        + 'that exporter runs; nothing else depends on it.',
        'percent',
        k.target(
          'max by (%s) (aws_ebs_burst_balance_average%s)'
          % [d.burstBalanceVolumeLabel, k.ext(d.burstBalanceSelector)],
          '{{%s}}' % d.burstBalanceVolumeLabel
        ),
        top=100,
      ),
    ],
  )
