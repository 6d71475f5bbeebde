// Overview: is every probed disk healthy now? Latest fsync p99/p99.9 per StorageClass, latency
// over time, the sync latency histogram, the continuous streams (fdatasync latency, in-flight
// age, stalls, node_exporter's view of their devices), IOPS and bandwidth per profile, the
// provisioning probe (each step's time per StorageClass, success, failure reasons), probe and
// stream health, and their own cost.
local u = import '../lib/util.libsonnet';
local g = import 'g.libsonnet';

function(c)
  local k = (import 'common.libsonnet')(c);
  local d = c.dashboards;
  local ts = g.panel.timeSeries;
  local hm = g.panel.heatmap;
  local by = k.probeBy;
  local raw = k.raw(k.probeMatchers);
  local rec = k.rec(k.probeMatchers);
  local legend = '{{storageclass}} {{node}} {{profile}}';
  // The volume gauges' filter: the volume variables, never profile (see k.volumeBy).
  local volumes = ['storageclass=~"$storageclass"', 'node=~"$node"'];
  local volumeLegend = '{{storageclass}} {{node}}';
  // A last-run gauge per operation (fioprobe_<op>_<metric>), one line per probe and op.
  local perOp(metric, ops) = [
    k.target('sum by (%s) (fioprobe_%s_%s%s)' % [by, op, metric, raw], '%s %s' % [legend, op])
    for op in ops
  ];

  local latest(q) = k.barGauge(
    'Latest fsync p%s by StorageClass' % q.name,
    k.lastRunText(q) + ' '
    + k.differFromEstimateText('fsync p%s over time' % q.name) + ' '
    + k.latencyStepsText,
    's',
    k.instant(
      'max by (%s) (fioprobe_last_sync_latency_seconds%s)'
      % [by, k.raw(['quantile="%s"' % q.q] + k.probeMatchers)],
      legend
    ),
    k.latencySteps
  );

  local overTime(op, q) =
    'probe:fioprobe_%s_latency_seconds:%s%s' % [op, q.record, rec];

  local heatmap =
    k.latencyHeatmap(
      'fsync latency distribution: $storageclass',
      'How many fsyncs fell into each latency bucket of the cumulative histogram '
      + 'fioprobe_sync_latency_seconds per heatmap cell (its increase over $__interval, at '
      + 'least one probe interval, %s), one heatmap per selected StorageClass ' % d.heatmapMinInterval
      + "(so a fast class's buckets are not drowned by a slow one's), that class's selected "
      + 'nodes and profiles together. Counts, not percentiles: the bucket boundaries include '
      + "5, 10 and 20 ms and all of etcd's own. Empty for a class whose probes never succeeded.",
      k.target(
        'sum by (le) (increase(fioprobe_sync_latency_seconds_bucket%s[$__interval]))' % raw,
        '{{le}}'
      ),
      'storageclass',
    )
    + hm.queryOptions.withInterval(d.heatmapMinInterval);

  // The continuous streams of the selected StorageClasses and nodes (node-local ones
  // included, as everywhere on this dashboard; the etcd disks dashboard has its own).
  local stream = k.stream(volumes, false, volumeLegend, 'per StorageClass (and node)');
  local streamP99 =
    k.latencyTimeSeries(
      stream.p99Title,
      stream.p99Text + stream.probeLastRunText('fsync p99 over time') + ' Threshold lines: '
      + k.latencyStepsText,
      [
        k.target(stream.p99Expr, 'stream ' + volumeLegend),
        stream.lastRunTarget(k.probeMatchers, legend),
      ],
      w=24,
    )
    + k.dashed('^probe last run .*');

  // Probes that ran but have no last-success series: they never succeeded, so the age
  // panels (which read that series) cannot show them.
  local neverSucceeded =
    'max by (%s, %s) (fioprobe_runs_total%s > 0) unless on (%s, %s) '
    % [c.clusterLabel, by, raw, c.clusterLabel, by]
    + 'fioprobe_last_success_timestamp_seconds%s' % raw;

  local health = [
    k.stat(
      'Failing probes',
      'Number of selected probes whose most recent run failed (fioprobe_success == 0), now. '
      + 'The table beside names the reason.',
      'none',
      k.instant('count(fioprobe_success%s == 0) or vector(0)' % raw),
      [{ color: 'green', value: null }, { color: 'red', value: 1 }],
      w=4,
    ),
    k.stat(
      'Never succeeded',
      'Number of probes that have run (fioprobe_runs_total > 0) but never once succeeded: '
      + 'they have no fioprobe_last_success_timestamp_seconds, so "Oldest last success" and '
      + '"Age of last successful run" cannot show them. Usually a misconfigured target; the '
      + 'table beside names the reason.',
      'none',
      k.instant('count(%s) or vector(0)' % neverSucceeded),
      [{ color: 'green', value: null }, { color: 'red', value: 1 }],
      w=4,
    ),
    k.stat(
      'Oldest last success',
      'Time since the least recent successful run among the selected probes that have ever '
      + 'succeeded (now minus fioprobe_last_success_timestamp_seconds; "Never succeeded" '
      + 'counts the others). Red from %s s, the age at which FioProbeStale fires for a probe '
        % u.num(c.windows.staleAfterSeconds)
      + 'that stopped pushing.',
      's',
      k.instant('max(time() - fioprobe_last_success_timestamp_seconds%s)' % raw),
      [
        { color: 'green', value: null },
        { color: 'yellow', value: c.windows.staleAfterSeconds / 2 },
        { color: 'red', value: c.windows.staleAfterSeconds },
      ],
      w=4,
    ),
    k.table(
      'Failing probes and reasons',
      'One row per probe whose most recent run failed, with the reason '
      + '(fioprobe_failure_reason_info, present only while the last run failed). '
      + 'Empty while every probe succeeds.',
      'none',
      k.tableTarget(
        'max by (%s, reason) (fioprobe_failure_reason_info%s)' % [by, raw]
      ),
      [k.organize()],
      w=12,
      h=6,
    ),
    k.timeSeries(
      'Age of last successful run',
      "Seconds since each probe's last successful run (carried forward on failure); "
      + 'it saw-tooths with the probe schedule. The dashed line is the staleness threshold. '
      + 'A probe that never succeeded has no line: see "Never succeeded".',
      's',
      k.target(
        'time() - max by (%s) (fioprobe_last_success_timestamp_seconds%s)' % [by, raw],
        legend
      ),
    )
    + ts.standardOptions.thresholds.withMode('absolute')
    + ts.standardOptions.thresholds.withSteps([
      { color: 'green', value: null },
      { color: 'red', value: c.windows.staleAfterSeconds },
    ])
    + ts.fieldConfig.defaults.custom.thresholdsStyle.withMode('dashed'),
    k.timeSeries(
      'Run duration',
      "Wall-clock duration of each probe's most recent run (fioprobe_duration_seconds), fio "
      + "and the runner's checks together. A run that grows towards its timeout is a slow "
      + 'disk. ' + k.lastRunGaugeText,
      's',
      k.target('max by (%s) (fioprobe_duration_seconds%s)' % [by, raw], legend),
    ),
    k.table(
      'Probe versions and histogram source',
      'fioprobe_info of each probe: fio and fioprobe versions, volume type, provisioner, the '
      + 'node it last ran on, and where its histogram comes from (bins: exact fio json+ bins; '
      + "percentiles: derived from fio's percentiles, coarser).",
      'none',
      k.tableTarget('max by (%s, fio_version, version, volume_type, provisioner, ran_on_node, histogram_source) (fioprobe_info%s)' % [by, raw]),
      [k.organize()],
      w=24,
      h=6,
    ),
  ];

  // The provisioning probe (`fioprobe provision`): one group per StorageClass (and node for
  // a class bound to nodes), no profile, so the profile variable does not apply; series per
  // class and step, as the classes it provisions need not be probed by fio at all.
  local provisioned = k.raw(volumes);
  local provisionBy = 'storageclass, node';
  local provisionWindow = c.dashboards.provisionWindow;
  local provisionWindowText = 'the last %s (six runs at the default 10-minute schedule)' % provisionWindow;
  local stepQuantile(q) =
    k.timeSeries(
      'Provisioning step p%s' % q.name,
      'p%s of each step of the provisioning probe (claim created, scheduled, bound, attached, ' % q.name
      + 'running, written, then the deletion: docs/PROVISIONING.md, "Steps"), per StorageClass '
      + '(and node) and step: a histogram estimate over %s of ' % provisionWindowText
      + 'fioprobe_provision_step_duration_seconds (histogram_quantile over the rate of its '
      + 'cumulative buckets, interpolated inside the bucket it falls into: 5, 10, 15, 20, 30, '
      + '45, 60, 90 and 120 s are boundaries). A step that did not finish (a failed run) adds no '
      + 'sample. The profile variable does not apply.',
      's',
      k.target(
        'histogram_quantile(%s, sum by (%s, step, le) (rate(fioprobe_provision_step_duration_seconds_bucket%s[%s]))) >= 0'
        % [q.q, provisionBy, provisioned, provisionWindow],
        '{{storageclass}} {{node}} {{step}}'
      ),
    );
  local provisioning = [
    stepQuantile(k.quantiles.p50),
    stepQuantile(k.quantiles.p99),
    k.timeSeries(
      'Provisioning success',
      'Whether the last provisioning run of each StorageClass (and node) succeeded '
      + '(fioprobe_provision_success: 1 or 0; no line for a class skipped on purpose, whose '
      + 'reclaim policy keeps its volumes). ' + k.lastRunGaugeText,
      'none',
      k.target(
        'max by (%s) (fioprobe_provision_success%s)' % [provisionBy, provisioned],
        '{{storageclass}} {{node}}'
      ),
    )
    + g.panel.timeSeries.standardOptions.withMin(0)
    + g.panel.timeSeries.standardOptions.withMax(1),
    k.table(
      'Provisioning failures and reasons',
      'One row per StorageClass (and node) whose last provisioning run failed, with the reason '
      + 'and the step it failed in (fioprobe_provision_failure_reason_info, present only while '
      + 'the last run failed; an empty step: before the steps, e.g. a class that does not '
      + 'exist). Empty while every class provisions.',
      'none',
      k.tableTarget(
        'max by (%s, reason, step) (fioprobe_provision_failure_reason_info%s)' % [provisionBy, provisioned]
      ),
      [k.organize()],
    ),
    k.table(
      'Last provisioning run by step',
      "Each step's duration in the last provisioning run of each StorageClass (and node) "
      + '(fioprobe_provision_last_step_duration_seconds: the steps it finished; a step the '
      + 'run did not have, or did not reach, is absent).',
      's',
      [
        k.tableTarget(
          'max by (%s, step) (fioprobe_provision_last_step_duration_seconds%s)' % [provisionBy, provisioned]
        ),
      ],
      [k.organize(exclude=['Time', '__name__'])],
      w=24,
    ),
  ];

  local cost = [
    k.timeSeries(
      'Probe IO per day',
      'Bytes each probe wrote and read over the %s before each point (increase of ' % d.costWindow
      + 'the counters fioprobe_written_bytes_total and fioprobe_read_bytes_total): the IO '
      + 'budget the probes spend on the disks they watch.',
      'bytes',
      [
        k.target(
          'sum by (%s) (increase(fioprobe_written_bytes_total%s[%s]))' % [by, raw, d.costWindow],
          legend + ' written'
        ),
        k.target(
          'sum by (%s) (increase(fioprobe_read_bytes_total%s[%s]))' % [by, raw, d.costWindow],
          legend + ' read'
        ),
      ],
    ),
    k.timeSeries(
      'Runs and failures per hour',
      'Probe runs and failed runs in the hour before each point (increase of the counters '
      + 'fioprobe_runs_total and fioprobe_failures_total over 1h).',
      'short',
      [
        k.target('sum by (%s) (increase(fioprobe_runs_total%s[1h]))' % [by, raw], legend + ' runs'),
        k.target(
          'sum by (%s) (increase(fioprobe_failures_total%s[1h]))' % [by, raw], legend + ' failures'
        ),
      ],
    ),
  ];

  k.dashboard(
    'overview',
    'fioprobe / Overview',
    "Disk health from fioprobe's scheduled fio probes and continuous streams: latency, "
    + 'stalls, IOPS and bandwidth per StorageClass and profile, probe and stream health and cost.',
    [
      k.datasourceVar,
      k.clusterVar,
      k.storageclassVar(),
      k.nodeVar(),
      k.profileVar(),
    ],
    [
      k.row('Latest run'),
      latest(k.quantiles.p99),
      latest(k.quantiles.p999),
      k.row('Latency over time'),
      k.latencyTimeSeries(
        'fsync p99 over time',
        'fsync p99 over %s, per probe (recording rule ' % k.latencyWindowText
        + 'probe:fioprobe_sync_latency_seconds:p99, the same series the regression alert '
        + 'uses). ' + k.estimateText(k.latencyWindowText) + ' '
        + k.differFromLastRunText('Latest fsync p99 by StorageClass') + ' "%s" shows the '
                                                                        % stream.p99Title
        + "last run's exact p99 beside the continuous stream's; the two differ from this "
        + 'estimate for the same reasons. Dashed lines: ' + k.latencyStepsText,
        k.target(overTime('sync', k.quantiles.p99), legend),
      ),
      k.latencyTimeSeries(
        'fsync p99.9 over time',
        'fsync p99.9 over %s (recording rule ' % k.latencyWindowText
        + 'probe:fioprobe_sync_latency_seconds:p999): the tail that single slow runs move '
        + 'first. ' + k.estimateText(k.latencyWindowText) + ' '
        + k.differFromLastRunText('Latest fsync p99.9 by StorageClass'),
        k.target(overTime('sync', k.quantiles.p999), legend),
      ),
      k.latencyTimeSeries(
        'Write and read completion latency p99',
        'Completion latency p99 of writes and reads over %s ' % k.latencyWindowText
        + '(recording rules probe:fioprobe_write_latency_seconds:p99 and '
        + 'probe:fioprobe_read_latency_seconds:p99). '
        + k.estimateText(k.latencyWindowText),
        [
          k.target(overTime(op, k.quantiles.p99), '%s %s' % [legend, op])
          for op in u.ops
          if op != 'sync'
        ],
        w=24,
      ),
      // A repeated panel sits alone in its row: Grafana lays its copies out over whole lines.
      k.row('fsync latency distribution per StorageClass'),
      heatmap,
      k.row('Continuous stream'),
      streamP99,
      stream.inflight(),
      stream.stall(),
      stream.writeAwait(),
      stream.utilisation(),
      k.row('Stream fdatasync latency distribution per StorageClass'),
      stream.heatmap('storageclass'),
      k.row('Throughput'),
      k.timeSeries(
        'IOPS per profile',
        "Read, write and sync operations per second of each probe's most recent run "
        + '(fioprobe_<op>_iops, as fio reports them for the run). ' + k.lastRunGaugeText,
        'iops',
        perOp('iops', u.ops),
      ),
      k.timeSeries(
        'Bandwidth per profile',
        "Read and write bandwidth of each probe's most recent run "
        + '(fioprobe_<op>_bandwidth_bytes_per_second, as fio reports them for the run). '
        + k.lastRunGaugeText,
        'Bps',
        // fsyncs move no data: no sync bandwidth.
        perOp('bandwidth_bytes_per_second', [op for op in u.ops if op != 'sync']),
      ),
      // Every probed volume with a model, dedicated StorageClass volumes (PVCs, no node)
      // included; the etcd disks dashboard has the same panels for node-local volumes.
      k.row('Burst credits'),
      k.burstCeiling(volumes, volumeLegend, 'per StorageClass (and node, for node-local probes)'),
      k.burstBalance(volumes, volumeLegend, 'per StorageClass'),
      k.row('Provisioning: from claim to first fdatasync'),
    ] + provisioning + [
      k.row('Probe health'),
    ] + health + [
      stream.failing(),
      stream.failingFor(),
      stream.errors(),
      stream.info(),
      k.row('Probe cost'),
    ] + cost + [
      stream.operations(),
      stream.written(),
    ],
  )
