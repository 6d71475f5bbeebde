// Comparison: two StorageClasses side by side (or one against itself a day or a week ago):
// latency quantiles, IOPS and bandwidth, their ratios, and tables of p99 per profile and
// StorageClass with the 5/10 ms colours, the continuous counterpart of gp2-vs-gp3 benchmark
// tables.
//
// Latency here comes from the raw histograms (histogram_quantile over
// fioprobe_<op>_latency_seconds_bucket), not from the recording rules: the B side is shifted
// back in time, and history from before the rules existed, or backfilled from archives of
// past fio runs (`fioprobe backfill`), has the histograms but no recorded quantiles.
local g = import 'lib/g.libsonnet';

function(c)
  local k = (import 'common.libsonnet')(c);
  local d = c.dashboards;
  local var = g.dashboard.variable;
  local ts = g.panel.timeSeries;

  local common = ['node=~"$node"', 'profile=~"$profile"'];
  local selA = k.raw(['storageclass="$storageclass_a"'] + common);
  local selB = k.raw(['storageclass="$storageclass_b"'] + common);
  local shiftB = 'offset $shift_b';

  // histogram_quantile per profile of one side; B is shifted by $shift_b.
  local quantile(op, q, sel, shift='') =
    'histogram_quantile(%s, sum by (profile, le) (rate(fioprobe_%s_latency_seconds_bucket%s[$window]%s)))'
    % [q, op, sel, if shift == '' then '' else ' ' + shift];
  // Mean of a last-run gauge per profile over the window (several runs).
  local gauge(metric, sel, shift='') =
    'avg by (profile) (avg_over_time(fioprobe_%s%s[$window]%s))'
    % [metric, sel, if shift == '' then '' else ' ' + shift];

  // B is drawn dashed, so A and B are told apart at a glance.
  local dashedB =
    ts.standardOptions.withOverrides([
      ts.standardOptions.override.byRegexp.new('^B .*')
      + ts.standardOptions.override.byRegexp.withProperty(
        'custom.lineStyle', { fill: 'dash', dash: [10, 10] }
      ),
    ]);

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

  local quantiles = [['0.5', 'p50'], ['0.99', 'p99'], ['0.999', 'p99.9']];
  local opName = { sync: 'fsync', write: 'write completion', read: 'read completion' };

  local latencyRow(op) = [
    k.row('%s latency' % opName[op]),
    k.latencyTimeSeries(
      '%s latency: A vs B' % opName[op],
      '%s latency p50, p99 and p99.9 per profile over $window windows, ' % opName[op]
      + 'from the histogram fioprobe_%s_latency_seconds; ' % op
      + 'A = $storageclass_a (solid), B = $storageclass_b shifted by $shift_b (dashed).',
      [
        k.target(quantile(op, q[0], selA), 'A %s {{profile}}' % q[1])
        for q in quantiles
      ] + [
        k.target(quantile(op, q[0], selB, shiftB), 'B %s {{profile}}' % q[1])
        for q in quantiles
      ],
      w=16,
    ) + dashedB,
    ratio(
      '%s p99 ratio B / A' % opName[op],
      '%s p99 of B divided by that of A, per profile: above 1 (the dashed line) ' % opName[op]
      + 'B is slower. Log scale, so 2× and ½× are equally far from 1.',
      k.target(
        '(%s) / (%s)' % [quantile(op, '0.99', selB, shiftB), quantile(op, '0.99', selA)],
        '{{profile}}'
      ),
    ),
  ];

  local iops = ['read_iops', 'write_iops', 'sync_iops'];
  local bandwidth = ['read_bandwidth_bytes_per_second', 'write_bandwidth_bytes_per_second'];
  local short(m) = std.split(m, '_')[0];

  local throughputRow(title, unit, metrics, description) = [
    k.timeSeries(
      '%s: A vs B' % title,
      description + ' Mean of the runs in each $window window, per profile; '
      + 'A = $storageclass_a (solid), B = $storageclass_b shifted by $shift_b (dashed).',
      unit,
      [k.target(gauge(m, selA), 'A %s {{profile}}' % short(m)) for m in metrics]
      + [k.target(gauge(m, selB, shiftB), 'B %s {{profile}}' % short(m)) for m in metrics],
      w=16,
    ) + dashedB,
    ratio(
      '%s ratio B / A' % title,
      '%s of B divided by that of A, per profile and operation: above 1 B is faster.' % title,
      [
        k.target('(%s) / (%s)' % [gauge(m, selB, shiftB), gauge(m, selA)], '%s {{profile}}' % short(m))
        for m in metrics
      ],
    ),
  ];

  local matrix(op) = k.table(
                       '%s p99 by profile and StorageClass' % opName[op],
                       "%s p99 per profile (rows) and StorageClass (columns) over the dashboard's " % opName[op]
                       + 'time range, from the histogram fioprobe_%s_latency_seconds; A and B now. ' % op
                       + 'Yellow from %s s, red from %s s, as in the usual benchmark tables.'
                         % [k.num(d.latencyYellowSeconds), k.num(d.latencyRedSeconds)],
                       's',
                       k.tableTarget(
                         'histogram_quantile(0.99, sum by (storageclass, profile, le) '
                         + '(rate(fioprobe_%s_latency_seconds_bucket%s[$__range])))'
                           % [op, k.raw(['storageclass=~"$storageclass_a|$storageclass_b"'] + common)]
                       ),
                       [
                         g.panel.table.queryOptions.transformation.withId('groupingToMatrix')
                         + g.panel.table.queryOptions.transformation.withOptions({
                           columnField: 'storageclass',
                           rowField: 'profile',
                           valueField: 'Value',
                         }),
                       ],
                       w=8,
                     )
                     + g.panel.table.standardOptions.thresholds.withMode('absolute')
                     + g.panel.table.standardOptions.thresholds.withSteps(k.latencySteps)
                     + g.panel.table.standardOptions.color.withMode('thresholds')
                     + g.panel.table.fieldConfig.defaults.custom.withCellOptions({
                       type: 'color-background',
                       mode: 'basic',
                     });

  local classVar(name, label) =
    var.query.new(name)
    + var.query.withDatasourceFromVariable(k.datasourceVar)
    + var.query.queryTypes.withLabelValues('storageclass', 'fioprobe_success' + k.raw([]))
    + var.query.generalOptions.withLabel(label)
    + var.query.generalOptions.withDescription(
      'StorageClass of side %s (or the configured name of a node-local path).' % label
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
      var.custom.new('shift_b', d.comparisonShifts)
      + var.custom.generalOptions.withLabel('B shifted by')
      + var.custom.generalOptions.withDescription(
        'Compare B as it was this long ago; with B = A, a StorageClass against its own past.'
      ),
      var.custom.new('window', d.comparisonWindows)
      + var.custom.generalOptions.withLabel('Window')
      + var.custom.generalOptions.withDescription(
        'Rate window of the latency quantiles and averaging window of IOPS and bandwidth: '
        + 'longer windows hold more runs and give steadier lines.'
      ),
      k.nodeVar(['storageclass=~"$storageclass_a|$storageclass_b"']),
      k.profileVar(['storageclass=~"$storageclass_a|$storageclass_b"', 'node=~"$node"']),
    ],
    std.flattenArrays([latencyRow(op) for op in ['sync', 'write', 'read']])
    + [k.row('IOPS and bandwidth')]
    + throughputRow(
      'IOPS', 'iops', iops, 'Read, write and sync IOPS of the runs (fioprobe_*_iops).'
    )
    + throughputRow(
      'Bandwidth',
      'Bps',
      bandwidth,
      'Read and write bandwidth of the runs (fioprobe_*_bandwidth_bytes_per_second).'
    )
    + [k.row('p99 tables')]
    + [matrix(op) for op in ['sync', 'write', 'read']],
  )
