// Comparison: two StorageClasses side by side (or one against itself a day or a week ago):
// latency quantiles, IOPS and bandwidth, their ratios, and tables of p99 per profile and
// StorageClass with the 5/10 ms colours, the continuous counterpart of gp2-vs-gp3 benchmark
// tables.
//
// Latency here comes from the raw histograms (histogram_quantile over
// fioprobe_<op>_latency_seconds_bucket), not from the recording rules: the B side is shifted
// back in time, and history from before the rules existed, or backfilled from archives of
// past fio runs (`fioprobe backfill`), has the histograms but no recorded quantiles.
local u = import '../lib/util.libsonnet';
local g = import 'g.libsonnet';

function(c)
  local k = (import 'common.libsonnet')(c);
  local var = g.dashboard.variable;
  local ts = g.panel.timeSeries;
  local tb = g.panel.table;

  local common = ['node=~"$node"', 'profile=~"$profile"'];
  local selA = k.raw(['storageclass="$storageclass_a"'] + common);
  local selB = k.raw(['storageclass="$storageclass_b"'] + common);
  local shiftB = 'offset $shift_b';
  local sides = 'A = $storageclass_a (solid), B = $storageclass_b shifted by $shift_b (dashed).';

  // histogram_quantile per profile of one side; B is shifted by $shift_b.
  local quantile(op, q, sel, shift='') =
    'histogram_quantile(%s, sum by (profile, le) (rate(fioprobe_%s_latency_seconds_bucket%s[$window]%s)))'
    % [q, op, sel, if shift == '' then '' else ' ' + shift];
  // Mean of a last-run gauge per profile over the window (several runs).
  local gauge(metric, sel, shift='') =
    'avg by (profile) (avg_over_time(fioprobe_%s%s[$window]%s))'
    % [metric, sel, if shift == '' then '' else ' ' + shift];

  local ratio(title, description, exprs) =
    k.timeSeries(title, description, 'suffix:×', exprs, w=8)
    + ts.standardOptions.thresholds.withMode('absolute')
    + ts.standardOptions.thresholds.withSteps([
      { color: 'transparent', value: null },
      { color: 'text', value: 1 },
    ])
    + ts.fieldConfig.defaults.custom.thresholdsStyle.withMode('dashed')
    + ts.fieldConfig.defaults.custom.scaleDistribution.withType('log')
    + ts.fieldConfig.defaults.custom.scaleDistribution.withLog(2);

  local quantiles = [k.quantiles.p50, k.quantiles.p99, k.quantiles.p999];
  local estimate = k.estimateText('each $window window');

  local latencyRow(op) = [
    k.row('%s latency' % u.opTitle[op]),
    k.latencyTimeSeries(
      '%s latency: A vs B' % u.opTitle[op],
      '%s latency p50, p99 and p99.9 per profile, from the histogram ' % u.opTitle[op]
      + 'fioprobe_%s_latency_seconds. %s %s' % [op, estimate, sides],
      [
        k.target(quantile(op, q.q, selA), 'A p%s {{profile}}' % q.name)
        for q in quantiles
      ] + [
        k.target(quantile(op, q.q, selB, shiftB), 'B p%s {{profile}}' % q.name)
        for q in quantiles
      ],
      w=16,
    ) + k.dashed('^B .*'),
    ratio(
      '%s p99 ratio B / A' % u.opTitle[op],
      '%s p99 of B divided by that of A, per profile, each side a histogram ' % u.opTitle[op]
      + 'estimate over each $window window: above 1 (the dashed line) B is slower. Log '
      + 'scale, so 2× and ½× are equally far from 1.',
      k.target(
        '(%s) / (%s)' % [quantile(op, '0.99', selB, shiftB), quantile(op, '0.99', selA)],
        '{{profile}}'
      ),
    ),
  ];

  local iops = ['%s_iops' % op for op in u.ops];
  // fsyncs move no data: no sync bandwidth.
  local bandwidth = ['%s_bandwidth_bytes_per_second' % op for op in u.ops if op != 'sync'];
  local short(m) = std.split(m, '_')[0];

  local throughputRow(title, unit, metrics, description) = [
    k.timeSeries(
      '%s: A vs B' % title,
      description + ' Each point is the mean of the runs in the $window before it (each '
      + "run's own value, as fio reported it), per profile. " + sides,
      unit,
      [k.target(gauge(m, selA), 'A %s {{profile}}' % short(m)) for m in metrics]
      + [k.target(gauge(m, selB, shiftB), 'B %s {{profile}}' % short(m)) for m in metrics],
      w=16,
    ) + k.dashed('^B .*'),
    ratio(
      '%s ratio B / A' % title,
      '%s of B divided by that of A, per profile and operation, both means of ' % title
      + 'the runs in each $window window: above 1 B is faster.',
      [
        k.target('(%s) / (%s)' % [gauge(m, selB, shiftB), gauge(m, selA)], '%s {{profile}}' % short(m))
        for m in metrics
      ],
    ),
  ];

  local matrix(op) =
    k.table(
      '%s p99 by profile and StorageClass' % u.opTitle[op],
      '%s p99 per profile (rows) and StorageClass (columns), A and B now, ' % u.opTitle[op]
      + 'from the histogram fioprobe_%s_latency_seconds. ' % op
      + k.estimateText("the dashboard's whole time range ($__range)") + ' '
      + k.latencyStepsText,
      's',
      k.tableTarget(
        'histogram_quantile(0.99, sum by (storageclass, profile, le) '
        + '(rate(fioprobe_%s_latency_seconds_bucket%s[$__range])))'
          % [op, k.raw(['storageclass=~"$storageclass_a|$storageclass_b"'] + common)]
      ),
      [
        tb.queryOptions.transformation.withId('groupingToMatrix')
        + tb.queryOptions.transformation.withOptions({
          columnField: 'storageclass',
          rowField: 'profile',
          valueField: 'Value',
        }),
      ],
      w=8,
    )
    + tb.standardOptions.thresholds.withMode('absolute')
    + tb.standardOptions.thresholds.withSteps(k.latencySteps)
    + tb.standardOptions.color.withMode('thresholds')
    + tb.fieldConfig.defaults.custom.withCellOptions({ type: 'color-background', mode: 'basic' });

  // The last distributed benchmark of each name and StorageClass (`fioprobe distributed`,
  // pushed once per benchmark as its own group): per phase, fio's own "All clients" figure
  // beside the sum of the servers', each in its own column, never one for the other.
  local benchBy = '%s, storageclass, benchmark, phase' % c.clusterLabel;
  local benchSel = k.bench();
  // The servers' success and the failure reason are per benchmark, not per phase.
  local benchByServer = '%s, storageclass, benchmark' % c.clusterLabel;
  local benchmarks = [
    k.row('Distributed benchmarks (fioprobe distributed)'),
    k.table(
      'Last benchmark per StorageClass: IOPS',
      'Each phase of the last distributed benchmark of every name and StorageClass '
      + '(fioprobe distributed; a benchmark is pushed once, as its own group). "fio aggregate" '
      + "is fio's own \"All clients\" figure: every server's IOs over the longest runtime, "
      + 'so below the sum of the servers\' rates when their runtimes differ; "sum of servers" '
      + "adds each server's own IOPS. Values of the most recent benchmark, held until the "
      + 'next one of that name pushes.',
      'iops',
      [
        k.tableTarget('max by (%s) (%s)' % [
          benchBy,
          'fioprobe_distributed_aggregate_read_iops%(s)s or fioprobe_distributed_aggregate_write_iops%(s)s' % { s: benchSel },
        ]),
        k.tableTarget('sum by (%s) (%s)' % [
          benchBy,
          'fioprobe_distributed_read_iops%(s)s or fioprobe_distributed_write_iops%(s)s' % { s: benchSel },
        ]),
      ],
      [
        tb.queryOptions.transformation.withId('merge') + tb.queryOptions.transformation.withOptions({}),
        k.organize(rename={ 'Value #A': 'IOPS, fio aggregate', 'Value #B': 'IOPS, sum of servers' }),
      ],
      w=12,
    ),
    k.table(
      'Last benchmark per StorageClass: p99 of the slowest and fastest server',
      "Each phase's completion latency p99 of the slowest and of the fastest server of the "
      + 'last distributed benchmark of every name and StorageClass: the exact fio percentile '
      + "of each server's own IOs (fio writes no percentiles for its \"All clients\" "
      + 'aggregate). ' + k.latencyStepsText,
      's',
      [
        k.tableTarget('max by (%s) (%s)' % [
          benchBy,
          'fioprobe_distributed_read_latency_seconds%(s)s or fioprobe_distributed_write_latency_seconds%(s)s' % { s: k.bench(['quantile="0.99"']) },
        ]),
        k.tableTarget('min by (%s) (%s)' % [
          benchBy,
          'fioprobe_distributed_read_latency_seconds%(s)s or fioprobe_distributed_write_latency_seconds%(s)s' % { s: k.bench(['quantile="0.99"']) },
        ]),
      ],
      [
        tb.queryOptions.transformation.withId('merge') + tb.queryOptions.transformation.withOptions({}),
        k.organize(rename={ 'Value #A': 'p99, slowest server', 'Value #B': 'p99, fastest server' }),
      ],
      w=12,
    )
    + tb.standardOptions.thresholds.withMode('absolute')
    + tb.standardOptions.thresholds.withSteps(k.latencySteps)
    + tb.standardOptions.color.withMode('thresholds')
    + tb.fieldConfig.defaults.custom.withCellOptions({ type: 'color-background', mode: 'basic' }),
    k.table(
      'Last benchmark per StorageClass: servers and why it failed',
      'Every server of the last distributed benchmark of every name and StorageClass: 1 if it '
      + 'ran every phase, 0 if the failure names it (no answer, no result, a job error, over '
      + 'the budget, its data set not laid out; fioprobe_distributed_server_success), with the '
      + "benchmark's failure reason when it failed (fioprobe_distributed_failure_reason_info). "
      + "A failure that is no server's own (SIGTERM, unreadable output) keeps every server at 1 "
      + 'with the reason beside it. The failed phase has no figures in the tables above (the '
      + 'phases before it do): docs/DISTRIBUTED.md.',
      'none',
      k.tableTarget(
        '%(success)s * on (%(by)s) group_left (reason) %(reason)s or on (%(by)s, server) %(success)s' % {
          by: benchByServer,
          success: 'max by (%s, server) (fioprobe_distributed_server_success%s)' % [benchByServer, benchSel],
          reason: 'max by (%s, reason) (fioprobe_distributed_failure_reason_info%s)' % [benchByServer, benchSel],
        }
      ),
      [k.organize(exclude=['Time', '__name__'], rename={ Value: 'ran every phase' })],
      w=24,
    )
    + tb.standardOptions.thresholds.withMode('absolute')
    + tb.standardOptions.thresholds.withSteps([{ color: 'red', value: null }, { color: 'green', value: 1 }])
    + tb.standardOptions.color.withMode('thresholds')
    + tb.fieldConfig.defaults.custom.withCellOptions({ type: 'color-background', mode: 'basic' }),
  ];

  local classVar(name, label) =
    k.queryVar(
      name,
      'storageclass',
      'fioprobe_success' + k.raw([]),
      label,
      'StorageClass of side %s (or the configured name of a node-local path).' % label,
    );

  k.dashboard(
    'comparison',
    'fioprobe / Comparison',
    'Two StorageClasses side by side, or one against itself a day or a week ago: latency, '
    + 'IOPS, bandwidth, ratios, and p99 tables per profile and StorageClass.',
    [
      k.datasourceVar,
      k.clusterVar,
      classVar('storageclass_a', 'A'),
      classVar('storageclass_b', 'B'),
      var.custom.new('shift_b', c.dashboards.comparisonShifts)
      + var.custom.generalOptions.withLabel('B shifted by')
      + var.custom.generalOptions.withDescription(
        'Compare B as it was this long ago; with B = A, a StorageClass against its own past.'
      ),
      var.custom.new('window', c.dashboards.comparisonWindows)
      + var.custom.generalOptions.withLabel('Window')
      + var.custom.generalOptions.withDescription(
        'Rate window of the latency quantiles and averaging window of IOPS and bandwidth: '
        + 'longer windows hold more runs and give steadier lines.'
      ),
      k.nodeVar(['storageclass=~"$storageclass_a|$storageclass_b"']),
      k.profileVar(['storageclass=~"$storageclass_a|$storageclass_b"', 'node=~"$node"']),
    ],
    std.flattenArrays([latencyRow(op) for op in u.ops])
    + [k.row('IOPS and bandwidth')]
    + throughputRow(
      'IOPS', 'iops', iops, 'Read, write and sync IOPS of the runs (fioprobe_<op>_iops).'
    )
    + throughputRow(
      'Bandwidth',
      'Bps',
      bandwidth,
      'Read and write bandwidth of the runs (fioprobe_<op>_bandwidth_bytes_per_second).'
    )
    + [k.row('p99 tables')]
    + [matrix(op) for op in u.ops]
    + benchmarks,
  )
