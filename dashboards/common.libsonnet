// What the three fioprobe dashboards share: selectors, thresholds, variables, the panel kinds
// they use (grafonnet's, with fioprobe's defaults), the texts that say which number a panel
// shows, and the grid layout. A function of the mixin's _config, so that every label name,
// selector and threshold comes from config.libsonnet.
local u = import '../lib/util.libsonnet';
local g = import 'g.libsonnet';

local var = g.dashboard.variable;
local prom = g.query.prometheus;
local gridWidth = 24;

function(c) {
  local d = c.dashboards,
  local cluster = '%s=~"$cluster"' % c.clusterLabel,

  // --- Selectors ---------------------------------------------------------------------------
  // Raw fioprobe_* series: the configured selector, the cluster, and `extra` matchers.
  raw(extra=[]):: '{%s}' % u.matchers(c, [cluster] + extra),
  // Recording-rule series probe:fioprobe_*: the configured selector was applied inside the
  // rule (and its labels may be aggregated away), so only the cluster and `extra` here.
  rec(extra=[]):: '{%s}' % u.matcherList([cluster] + extra),
  // A distributed benchmark's series (`fioprobe distributed`, its own group): the configured
  // selector, benchmarks only, the cluster, and `extra`.
  bench(extra=[]):: '{%s}' % u.matcherList([c.fioprobeSelector, u.benchmarkMatcher, cluster] + extra),
  // Series of other exporters (etcd, CloudWatch): the cluster, an optional configured
  // selector, and `extra`.
  ext(selector, extra=[]):: '{%s}' % u.matcherList([cluster, selector] + extra),

  // The usual probe filter of the overview: every probe variable.
  probeMatchers:: ['storageclass=~"$storageclass"', 'node=~"$node"', 'profile=~"$profile"'],

  // Labels that identify one probe within the chosen cluster (never job/instance).
  probeBy:: std.join(', ', u.probeLabels),
  // Labels that identify one probed volume, for joins: the volume gauges are pushed with
  // every profile's group of a target, so profile is left out (and the cluster kept, so a
  // join never pairs two clusters' volumes).
  volumeBy:: u.volumeBy(c),

  // --- Thresholds --------------------------------------------------------------------------
  // The benchmark tables' colours: green, yellow from 5 ms, red from 10 ms.
  latencySteps:: [
    { color: 'green', value: null },
    { color: 'yellow', value: d.latencyYellowSeconds },
    { color: 'red', value: d.latencyRedSeconds },
  ],
  latencyStepsText::
    'Yellow from %s s, red from %s s (etcd needs a WAL fsync p99 below 10 ms).'
    % [u.num(d.latencyYellowSeconds), u.num(d.latencyRedSeconds)],

  // --- Which number a latency panel shows --------------------------------------------------
  // The same percentile reaches the dashboards two ways, and they disagree for good reasons;
  // every latency panel says which one it shows.
  //   last run: fio's own percentile of the most recent run, exact, from that run alone;
  //   estimate: histogram_quantile over the cumulative histogram's rate across a window of
  //             runs, which pools their operations and interpolates inside one bucket.
  lastRunText(q, op='sync')::
    "fio's exact p%s of each probe's most recent run, from all %ss of that one run " % [q.name, u.opTitle[op]]
    + '(fioprobe_last_%s_latency_seconds{quantile="%s"}); it holds until the next run pushes.'
      % [op, q.q],
  estimateText(what)::
    'A histogram estimate over %s: histogram_quantile over the rate of the ' % what
    + 'cumulative histogram pools the operations of every run in it and interpolates inside '
    + 'the bucket the percentile falls into, so it is exact at bucket boundaries (5, 10 and '
    + '20 ms are ones) and otherwise only known to lie in that bucket (e.g. between 32 and 64 ms).',
  // Why the two differ, said on each of the two panels that show them side by side.
  differFromEstimateText(estimatePanel)::
    '"%s" shows a histogram estimate over %s instead, ' % [estimatePanel, self.latencyWindowText]
    + 'so the two differ: a last run of 46 ms can read 61 ms there when its fsyncs lie between '
    + '32 and 64 ms.',
  differFromLastRunText(lastRunPanel)::
    'It differs from "%s", fio\'s exact percentile of the last run alone: it pools ' % lastRunPanel
    + 'several runs, interpolates within a bucket (a last run of 46 ms can read 61 ms here '
    + 'when its fsyncs lie between 32 and 64 ms), and moves only as runs enter and leave the window.',
  // The recording rules' window, as panels name it.
  latencyWindowText:: 'the last %d runs (%s)' % [c.latencyWindowRuns, c.windows.latency],
  // The last-run gauges (IOPS, bandwidth, duration) step once per run.
  lastRunGaugeText:: 'Value of the most recent run, held until the next run pushes.',

  // The percentiles panels show: name in titles, quantile label value of the summaries.
  quantiles:: {
    p50: { name: '50', q: '0.5', record: 'p50' },
    p99: { name: '99', q: '0.99', record: 'p99' },
    p999: { name: '99.9', q: '0.999', record: 'p999' },
  },

  // --- Variables ---------------------------------------------------------------------------
  datasourceVar::
    var.datasource.new('datasource', 'prometheus')
    + var.datasource.generalOptions.withLabel('Data source')
    + var.datasource.generalOptions.withDescription(
      'Prometheus (or Thanos/Cortex/Mimir) that holds the fioprobe series.'
    ),

  // A label_values variable on the datasource variable, refreshed when the time range
  // changes (a new StorageClass or node shows up without a reload), sorted alphabetically.
  queryVar(name, label, metric, label_text, description)::
    var.query.new(name)
    + var.query.withDatasourceFromVariable(self.datasourceVar)
    + var.query.queryTypes.withLabelValues(label, metric)
    + var.query.refresh.onTime()
    + var.query.withSort(type='alphabetical')
    + var.query.generalOptions.withLabel(label_text)
    + var.query.generalOptions.withDescription(description),

  // One cluster at a time. Without a cluster label (a single Prometheus) the query finds no
  // values, the variable is empty and `cluster=~""` matches the series without the label.
  clusterVar::
    self.queryVar(
      'cluster',
      c.clusterLabel,
      'fioprobe_success{%s}' % c.fioprobeSelector,
      'Cluster',
      'Value of the `%s` label (a Prometheus external label); empty in a single Prometheus.'
      % c.clusterLabel,
    )
    // Hidden where there is one cluster only (showClusterVariable: false); the variable
    // stays, so every query keeps its cluster matcher.
    + (if d.showClusterVariable then {} else var.query.generalOptions.showOnDashboard.withNothing()),

  // A multi-value variable over a label of fioprobe_success; "All" is the regex `.*`, which
  // also matches series without the label (node is present only on node-local probes).
  labelVar(name, label, label_text, description, extra=[], metric='fioprobe_success')::
    self.queryVar(name, label, metric + self.raw(extra), label_text, description)
    + var.query.selectionOptions.withMulti()
    + var.query.selectionOptions.withIncludeAll(true, '.*')
    + var.query.generalOptions.withCurrent('All', '$__all'),

  storageclassVar(extra=[])::
    self.labelVar(
      'storageclass',
      'storageclass',
      'StorageClass',
      'StorageClass probed (or the configured name of a node-local path).',
      extra
    ),
  nodeVar(extra=['storageclass=~"$storageclass"'])::
    self.labelVar(
      'node',
      'node',
      'Node',
      'Node of a node-local probe (hostPath on a control-plane node); '
      + '"All" includes the probes of PersistentVolumes, which have no node.',
      extra
    ),
  profileVar(extra=['storageclass=~"$storageclass"', 'node=~"$node"'])::
    self.labelVar(
      'profile', 'profile', 'Profile', 'Probe profile (jobs/<profile>.fio).', extra
    ),

  // --- Queries -----------------------------------------------------------------------------
  // Every query reads the datasource variable.
  target(expr, legend=''):: prom.new('${datasource}', expr) + prom.withLegendFormat(legend),
  instant(expr, legend=''):: self.target(expr, legend) + prom.withInstant() + prom.withRange(false),
  tableTarget(expr):: self.instant(expr) + prom.withFormat('table'),

  // --- Panels ------------------------------------------------------------------------------
  // Every panel gets a title, a description, a unit, the datasource variable and its
  // targets, with refIds A, B, C... in order (what Grafana would assign on load, written out
  // so that overrides and the previews can name them).
  local base(kind, title, description, unit, targets) =
    local list = if std.isArray(targets) then targets else [targets];
    kind.new(title)
    + kind.panelOptions.withDescription(description)
    + kind.standardOptions.withUnit(unit)
    // Grafana's panel model requires the list, empty or not.
    + kind.standardOptions.withOverrides([])
    + kind.queryOptions.withDatasource('prometheus', '${datasource}')
    + kind.queryOptions.withTargets([
      list[i] + prom.withRefId(std.char(std.codepoint('A') + i))
      for i in std.range(0, std.length(list) - 1)
    ]),

  timeSeries(title, description, unit, targets, w=12, h=8)::
    local ts = g.panel.timeSeries;
    base(ts, title, description, unit, targets)
    + ts.panelOptions.withGridPos(h, w)
    + ts.fieldConfig.defaults.custom.withFillOpacity(0)
    + ts.fieldConfig.defaults.custom.withShowPoints('never')
    + ts.fieldConfig.defaults.custom.withSpanNulls(d.spanNulls)
    + ts.options.legend.withDisplayMode('table')
    + ts.options.legend.withPlacement('right')
    + ts.options.legend.withShowLegend(true)
    + ts.options.legend.withCalcs(['lastNotNull', 'max'])
    + ts.options.tooltip.withMode('multi')
    + ts.options.tooltip.withSort('desc'),

  // A timeseries of latencies with the yellow/red thresholds drawn as dashed lines.
  latencyTimeSeries(title, description, targets, steps=self.latencySteps, w=12, h=8)::
    local ts = g.panel.timeSeries;
    self.timeSeries(title, description, 's', targets, w, h)
    + ts.standardOptions.thresholds.withMode('absolute')
    + ts.standardOptions.thresholds.withSteps(steps)
    + ts.standardOptions.withMin(0)
    + ts.fieldConfig.defaults.custom.thresholdsStyle.withMode('dashed')
    + ts.standardOptions.color.withMode('palette-classic'),

  // A ratio 0..1 (or a percentage 0..100: `top`) that sits at its top value most of the
  // time, like a full credit balance. The top is a soft maximum: Grafana's axis reaches it at
  // least and leaves room above a line that stays there, where a hard maximum would clip that
  // line to the plot's top edge and show nothing.
  fractionTimeSeries(title, description, unit, targets, top=1, w=12, h=8)::
    local ts = g.panel.timeSeries;
    self.timeSeries(title, description, unit, targets, w, h)
    + ts.standardOptions.withMin(0)
    + ts.fieldConfig.defaults.custom.withAxisSoftMax(top),

  barGauge(title, description, unit, targets, steps, w=12, h=8)::
    local bg = g.panel.barGauge;
    base(bg, title, description, unit, targets)
    + bg.panelOptions.withGridPos(h, w)
    + bg.options.withDisplayMode('gradient')
    + bg.options.withOrientation('horizontal')
    + bg.options.withShowUnfilled(true)
    + bg.options.reduceOptions.withCalcs(['lastNotNull'])
    + bg.standardOptions.withMin(0)
    + bg.standardOptions.thresholds.withMode('absolute')
    + bg.standardOptions.thresholds.withSteps(steps)
    + bg.standardOptions.color.withMode('thresholds'),

  stat(title, description, unit, targets, steps, w=6, h=6)::
    local st = g.panel.stat;
    base(st, title, description, unit, targets)
    + st.panelOptions.withGridPos(h, w)
    + st.options.withColorMode('background')
    + st.options.withGraphMode('none')
    + st.options.withTextMode('value')
    + st.options.reduceOptions.withCalcs(['lastNotNull'])
    + st.standardOptions.thresholds.withMode('absolute')
    + st.standardOptions.thresholds.withSteps(steps)
    + st.standardOptions.color.withMode('thresholds'),

  table(title, description, unit, targets, transformations=[], w=12, h=8)::
    local tb = g.panel.table;
    base(tb, title, description, unit, targets)
    + tb.panelOptions.withGridPos(h, w)
    + tb.options.withShowHeader(true)
    + tb.queryOptions.withTransformations(transformations),

  heatmap(title, description, targets, w=12, h=8, unit='short')::
    base(g.panel.heatmap, title, description, unit, targets)
    + g.panel.heatmap.panelOptions.withGridPos(h, w),

  // A latency histogram (Prometheus `le` buckets, in seconds) as a heatmap, repeated per
  // value of the multi-value variable `repeat`, two copies per line: summing the buckets of
  // several disks would draw a fast and a slow one as one bimodal distribution. It must sit
  // in a row of its own (Grafana lays the copies over whole lines). `cellUnit`: what a cell
  // counts (operations per cell, or per second for a rate).
  latencyHeatmap(title, description, target, repeat, cellUnit='short', unit='short')::
    local hm = g.panel.heatmap;
    self.heatmap(title, description, target + prom.withFormat('heatmap'), unit=unit)
    + hm.panelOptions.withRepeat(repeat)
    + hm.panelOptions.withRepeatDirection('h')
    + hm.panelOptions.withMaxPerRow(2)
    // false: the data are already buckets (Prometheus `le`), not to be re-bucketed.
    + hm.options.withCalculate(false)
    + hm.options.withCellGap(1)
    + hm.options.yAxis.withUnit('s')
    + hm.options.color.withMode('scheme')
    + hm.options.color.withScheme('Oranges')
    + hm.options.color.withScale('exponential')
    + hm.options.color.withExponent(0.5)
    + hm.options.color.withFill('dark-orange')
    + hm.options.color.withSteps(64)
    + hm.options.color.withReverse(false)
    + hm.options.cellValues.withUnit(cellUnit)
    + hm.options.filterValues.withLe(1e-9)
    + hm.options.legend.withShow(true)
    + hm.options.tooltip.withMode('single')
    + hm.options.tooltip.withYHistogram(true)
    + hm.options.rowsFrame.withLayout('le'),

  // Drops Grafana's Time and Value columns of an instant table query and names the rest.
  organize(exclude=['Time', 'Value', '__name__'], rename={})::
    g.panel.table.queryOptions.transformation.withId('organize')
    + g.panel.table.queryOptions.transformation.withOptions({
      excludeByName: { [k]: true for k in exclude },
      renameByName: rename,
    }),

  // An uncollapsed row: a heading that starts a new line of the grid.
  row(title):: g.panel.row.new(title) + g.panel.row.withPanels([]),

  // Lines drawn dashed, for the series whose display name matches `regex`.
  dashed(regex):: self.lineStyles({ [regex]: 'dash' }),

  // Line styles by display name: { regex: 'dash' | 'dot' }; other series stay solid.
  lineStyles(styles)::
    local override = g.panel.timeSeries.standardOptions.override.byRegexp;
    local style = {
      dash: { fill: 'dash', dash: [10, 10] },
      dot: { fill: 'dot', dash: [0, 10] },
    };
    g.panel.timeSeries.standardOptions.withOverrides([
      override.new(regex)
      + override.withProperty('custom.lineStyle', style[styles[regex]])
      for regex in std.objectFields(styles)
    ]),

  // --- Burst credits (Overview per StorageClass, etcd disks per node) -----------------------
  // matchers: which volumes (storageclass/node; never profile: see volumeBy). The volume
  // model's lines are drawn only for volumes whose burst-ceiling probe has a measurement,
  // joined on cluster, storageclass and node.
  burstCeiling(matchers, legend, what, w=12)::
    local by = self.volumeBy;
    local ceiling = 'max by (%s) (fioprobe_write_iops%s)'
                    % [by, self.raw(matchers + ['profile="%s"' % c.burstProfile])];
    local model(metric) =
      'max by (%s) (%s%s) and on (%s) %s' % [by, metric, self.raw(matchers), by, ceiling];
    self.timeSeries(
      'IOPS ceiling vs baseline and burst',
      'Write IOPS the %s probe measured %s in its most recent run (a few seconds of '
      % [c.burstProfile, what]
      + '4 KiB random writes at high queue depth: the ceiling the volume delivers now; '
      + "one value per run, held until the next) against the volume model's baseline and "
      + 'burst IOPS (fioprobe_volume_baseline_iops, fioprobe_volume_burst_iops: configured '
      + 'facts, not measurements; dashed, shown where the probe measured a ceiling). A '
      + 'ceiling that drops to the baseline means the burst credits are gone. The profile '
      + 'variable does not apply.',
      'iops',
      [
        self.target(ceiling, 'ceiling ' + legend),
        self.target(model('fioprobe_volume_baseline_iops'), 'baseline ' + legend),
        self.target(model('fioprobe_volume_burst_iops'), 'burst ' + legend),
      ],
      w=w,
    )
    + self.dashed('^(baseline|burst) .*'),

  // min: each profile's group carries the balance as of its own push; the lowest is the
  // one that has seen the most spending.
  burstBalance(matchers, legend, what, w=12)::
    self.fractionTimeSeries(
      'Modelled burst credit balance',
      'Burst credit balance the volume model computes %s ' % what
      + "(fioprobe_volume_burst_balance_ratio, 0 to 100 %: modelled from the probe's own IO "
      + "and the volume's size, not measured; the lowest of the probe groups of a volume), "
      + "only for a dedicated probe volume whose only IO is the probe's own, of a type with "
      + 'credits (gp2). A full balance is a line at 100 %. Empty where no volume has such a model.',
      'percentunit',
      self.target(
        'min by (%s) (fioprobe_volume_burst_balance_ratio%s)' % [self.volumeBy, self.raw(matchers)],
        legend
      ),
      w=w,
    ),

  // --- The continuous stream (Overview per StorageClass, etcd disks per node) -------------
  // `fioprobe continuous` is scraped, not pushed: besides storageclass, node and the cluster,
  // its series carry the scrape's pod, instance, job and namespace, which every query
  // aggregates away and none selects on (a replaced pod's series simply sum with its
  // successor's). One stream per target: storageclass and node identify it, like a volume.
  //   matchers: which streams (the dashboard's variables);
  //   etcdOnly: keep the streams of disks that hold etcd (probe:fioprobe_etcd_disk:info,
  //             the deployment's own statement, never a label shape);
  //   legend:   how a line names its stream;
  //   what:     the selection in words, for descriptions.
  stream(matchers, etcdOnly, legend, what):: {
    local k = $,
    local by = k.volumeBy,
    local sel = k.raw(matchers),
    local window = d.continuousWindow,
    local etcdDisks = '%s%s' % [u.etcdDiskRecord, k.rec()],
    // Appended to an expression with the stream's labels: only the etcd disks' streams.
    local onEtcd(expr) =
      if etcdOnly then '%s and on (%s) %s' % [expr, by, etcdDisks] else expr,
    local etcdText =
      if etcdOnly then
        ' Only the streams of disks that hold etcd (their configuration says so: '
        + '%s).' % u.etcdDiskRecord
      else '',

    p99Title:: 'Stream fdatasync p99' + (if etcdOnly then ', probe and etcd' else ' and probe'),

    local bucket = 'fioprobe_continuous_sync_latency_seconds_bucket',
    p99Expr::
      'histogram_quantile(0.99, sum by (%s, le) (%s))'
      % [by, onEtcd('rate(%s%s[%s])' % [bucket, sel, window])],
    p99Text::
      "The continuous stream's fdatasync p99 per stream %s (solid): a histogram estimate " % what
      + "over the stream's last %s (histogram_quantile over the rate of " % window
      + 'fioprobe_continuous_sync_latency_seconds, all pods of a stream summed), about one '
      + 'fdatasync a second around the clock, so it sees the stalls that fall between the '
      + 'scheduled runs; exact at bucket boundaries (5, 10 and 20 ms are ones), otherwise '
      + 'only known to lie in that bucket.',

    // The scheduled probe's p99 on the same axis: fio's exact p99 of its most recent run.
    lastRunTarget(lastRunMatchers, lastRunLegend)::
      k.target(
        onEtcd(
          'max by (%s, profile) (%s%s)'
          % [by, u.lastRunRecord('sync'), k.rec(lastRunMatchers)]
        ),
        'probe last run ' + lastRunLegend
      ),
    probeLastRunText(estimatePanel)::
      " Dashed: the scheduled probe's fsync p99, fio's exact percentile of each probe's most "
      + 'recent run (%s), held until the next run pushes. ' % u.lastRunRecord('sync')
      + 'It and the stream measure the same pattern at different times: the probe a few '
      + 'seconds every few minutes, the stream all the time, so they differ when the disk '
      + 'stalls between runs. "%s" shows the probe\'s own histogram estimate over ' % estimatePanel
      + "%s; it differs from the last run's exact value too." % k.latencyWindowText,

    // The stream's latency histogram, one heatmap per value of `repeat` (a multi-value
    // variable `repeatMatcher` selects on).
    heatmap(repeat, repeatMatcher=null)::
      k.latencyHeatmap(
        'Stream fdatasync latency distribution: $%s' % repeat,
        'fdatasyncs per second of the continuous stream in each latency bucket (the rate of '
        + 'the histogram fioprobe_continuous_sync_latency_seconds over $__rate_interval, all '
        + 'pods summed), one heatmap per %s, %s summed. ' % [repeat, what]
        + 'About one fdatasync a second: a column spread upwards is a slow spell, cells above '
        + "10 ms are fdatasyncs etcd's guidance says should not happen. The buckets include "
        + "5, 10 and 20 ms and all of etcd's own. A hang shows only when the fdatasync ends: "
        + 'see the in-flight panel.' + etcdText,
        k.target(
          'sum by (le) (%s)'
          % onEtcd('rate(%s%s[$__rate_interval])' % [
            bucket,
            k.raw(matchers + (if repeatMatcher == null then [] else [repeatMatcher])),
          ]),
          '{{le}}'
        ),
        repeat,
        cellUnit='ops',
        unit='ops',
      ),

    inflight(w=12)::
      local ts = g.panel.timeSeries;
      k.timeSeries(
        'Stream in-flight age',
        "Age of each stream's oldest operation (write + fdatasync) still outstanding "
        + '(fioprobe_continuous_inflight_seconds, computed at scrape time; the highest in each '
        + "point's $__rate_interval, so a spell between two points is not missed), %s. " % what
        + 'Zero while nothing is outstanding. A hang shows here while it hangs, long before '
        + 'any histogram sees it. Dashed lines: %s s, as much as the stall warning counts '
          % u.num(c.continuousStallSeconds)
        + 'in its %s, and %s s, where a hang on an etcd disk pages (on other volumes a hang '
          % [c.continuousStallWindow, u.num(c.continuousHangCriticalSeconds)]
        + 'warns from %s s).' % u.num(c.continuousStorageClassHangWarningSeconds)
        + etcdText,
        's',
        k.target(
          onEtcd(
            'max by (%s) (max_over_time(fioprobe_continuous_inflight_seconds%s[$__rate_interval]))'
            % [by, sel]
          ),
          legend
        ),
        w=w,
      )
      + ts.standardOptions.withMin(0)
      // The hang line stays in view while the age is near zero, which it is nearly always.
      + ts.fieldConfig.defaults.custom.withAxisSoftMax(c.continuousHangCriticalSeconds)
      + ts.standardOptions.thresholds.withMode('absolute')
      + ts.standardOptions.thresholds.withSteps([
        { color: 'green', value: null },
        { color: 'yellow', value: c.continuousStallSeconds },
        { color: 'red', value: c.continuousHangCriticalSeconds },
      ])
      + ts.fieldConfig.defaults.custom.thresholdsStyle.withMode('dashed'),

    // The stall warning's amount per minute: continuousStallSeconds within its window.
    local stallLine = c.continuousStallSeconds * 60 / u.seconds(c.continuousStallWindow),
    stall(w=12)::
      local ts = g.panel.timeSeries;
      k.timeSeries(
        'Stream stall seconds per minute',
        'Seconds per minute that an operation of the stream was outstanding beyond its stall '
        + 'threshold (the rate of fioprobe_continuous_stall_seconds_total over '
        + "$__rate_interval, times 60; the threshold is the stream's --stall-threshold, 10 ms "
        + 'by default), %s. 0 on a healthy disk; 60 means stalled the whole minute. ' % what
        + 'Dashed line: %s s per minute, the stall warning on etcd disks (%s s within %s); '
          % [u.num(stallLine), u.num(c.continuousStallSeconds), c.continuousStallWindow]
        + 'the average over a $__rate_interval longer than that reads lower.'
        + etcdText,
        's',
        k.target(
          onEtcd(
            'sum by (%s) (rate(fioprobe_continuous_stall_seconds_total%s[$__rate_interval])) * 60'
            % [by, sel]
          ),
          legend
        ),
        w=w,
      )
      + ts.standardOptions.withMin(0)
      + ts.standardOptions.thresholds.withMode('absolute')
      + ts.standardOptions.thresholds.withSteps([
        { color: 'green', value: null },
        { color: 'yellow', value: stallLine },
      ])
      + ts.fieldConfig.defaults.custom.thresholdsStyle.withMode('dashed'),

    // node_exporter's view of the same device. Its series name the host by a configured
    // label and the device by kernel name; both are copied into the names the stream's info
    // uses (label_join copies a label without a regex, so no `$1` reaches Grafana), and
    // joined on (cluster, ran_on_node, <disk>): ran_on_node is where the stream's pod runs,
    // so a StorageClass stream (no node label) finds the node its volume is attached to.
    local diskLabel = d.nodeExporterDiskLabel,
    local joinBy = std.join(', ', [c.clusterLabel, 'ran_on_node', diskLabel]),
    local nodeExporter(expr) =
      'max by (%s) (label_join(label_join(%s, "ran_on_node", "", "%s"), "%s", "", "device"))'
      % [joinBy, expr, d.nodeExporterHostLabel, diskLabel],
    local neSel = k.ext(d.nodeExporterSelector),
    local streamDisks =
      'group by (%s, ran_on_node, %s) (%s)'
      % [by, diskLabel, onEtcd('fioprobe_continuous_info%s' % k.raw(matchers + ['%s!=""' % diskLabel]))],
    local joined(expr) =
      '%s * on (%s) group_right () %s' % [nodeExporter(expr), joinBy, streamDisks],
    local joinText =
      " node_exporter's figures for the block device the stream's file lands on, "
      + "joined through fioprobe_continuous_info's %s label and the node its pod runs on " % diskLabel
      + "(ran_on_node) with node_exporter's device and %s labels " % d.nodeExporterHostLabel
      + '(dashboards.nodeExporterDiskLabel, nodeExporterHostLabel, nodeExporterSelector). The '
      + 'whole device: every writer on it, not only the stream. Empty where node_exporter is '
      + 'not scraped or the stream has no block device (tmpfs, FUSE).' + etcdText,
    local neLegend = legend + ' {{%s}}' % diskLabel,

    writeAwait(w=12)::
      k.timeSeries(
        'Device write await (node_exporter)',
        'Average time a write request to the device took, queue included: '
        + 'rate(node_disk_write_time_seconds_total) / rate(node_disk_writes_completed_total) '
        + 'over $__rate_interval,' + joinText + ' High await with a slow stream: the device '
        + 'is slow or saturated; a slow stream with low await: the time goes above the device '
        + '(filesystem journal, network storage client).',
        's',
        k.target(
          joined(
            'rate(node_disk_write_time_seconds_total%s[$__rate_interval]) ' % neSel
            + '/ rate(node_disk_writes_completed_total%s[$__rate_interval])' % neSel
          ),
          neLegend
        ),
        w=w,
      )
      + g.panel.timeSeries.standardOptions.withMin(0),

    utilisation(w=12)::
      k.fractionTimeSeries(
        'Device utilisation (node_exporter)',
        'Share of time the device had requests outstanding: '
        + 'rate(node_disk_io_time_seconds_total) over $__rate_interval, 0 to 100 %,' + joinText
        + ' Near 100 % the device is busy all the time (for SSDs and network volumes, which '
        + 'serve many requests at once, not necessarily saturated).',
        'percentunit',
        k.target(
          joined('rate(node_disk_io_time_seconds_total%s[$__rate_interval])' % neSel),
          neLegend
        ),
        w=w,
      ),

    // --- Health and cost (Overview) ---
    failing(w=4, h=8)::
      k.stat(
        'Failing streams',
        'Number of streams whose last operation failed (fioprobe_continuous_success == 0), %s, now. ' % what
        + '"Stream errors per hour by reason" says why.',
        'none',
        k.instant('count(fioprobe_continuous_success%s == 0) or vector(0)' % sel),
        [{ color: 'green', value: null }, { color: 'red', value: 1 }],
        w=w,
        h=h,
      ),

    failingFor(w=10)::
      k.timeSeries(
        'Streams failing for',
        'How long each stream has been failing: seconds since its first failed operation or '
        + 'set-up after its last success (fioprobe_continuous_failing_seconds), with the reason '
        + 'of its latest failure, %s; no line while it succeeds. unsafe_target is a ' % what
        + 'directory the stream refuses (planted or foreign), io_error the disk itself: the '
        + 'fixes differ. FioProbeContinuousFailing fires once it passes %s (critical on etcd '
          % c.continuousFailingAfter
        + 'disks).' + etcdText,
        's',
        k.target(
          onEtcd('max by (%s, reason) (fioprobe_continuous_failing_seconds%s > 0)' % [by, sel]),
          legend + ' {{reason}}'
        ),
        w=w,
      ),

    errors(w=10)::
      k.timeSeries(
        'Stream errors per hour by reason',
        'Failed operations and set-ups of each stream in the hour before each point, by reason '
        + '(increase of fioprobe_continuous_errors_total over 1h; reasons: io_error, no_space, '
        + 'read_only, no_directory, unsafe_target, interrupted), %s. ' % what
        + 'Empty while no stream has ever failed (a reason has a series from its first error).',
        'short',
        k.target(
          'sum by (%s, reason) (increase(fioprobe_continuous_errors_total%s[1h]))' % [by, sel],
          legend + ' {{reason}}'
        ),
        w=w,
      ),

    info(w=24, h=6)::
      k.table(
        'Streams: targets and devices',
        'fioprobe_continuous_info of each stream: whether its disk holds etcd (its '
        + 'configuration), the node its pod runs on, the volume type, the block device its '
        + 'file lands on (kernel name, whole disk, major:minor; empty on tmpfs or FUSE, where '
        + "node_exporter's panels stay empty) and the fioprobe version.",
        'none',
        k.tableTarget(
          'max by (%s, etcd_disk, ran_on_node, volume_type, device, disk, major_minor, version) '
          % by + '(fioprobe_continuous_info%s)' % sel
        ),
        [k.organize()],
        w=w,
        h=h,
      ),

    operations(w=12)::
      k.timeSeries(
        'Stream operations per second',
        'Completed operations (write + fdatasync) per second of each stream (the rate of '
        + 'fioprobe_continuous_operations_total over $__rate_interval), %s: ' % what
        + 'about one per --interval (1 s by default); fewer while the disk stalls.',
        'ops',
        k.target(
          'sum by (%s) (rate(fioprobe_continuous_operations_total%s[$__rate_interval]))'
          % [by, sel],
          legend
        ),
        w=w,
      ),

    written(w=12)::
      k.timeSeries(
        'Stream writes per day',
        'Bytes each stream wrote over the %s before each point (increase of ' % d.costWindow
        + 'fioprobe_continuous_written_bytes_total), %s: its cost to the disk it watches, ' % what
        + 'at the application (--write-size per operation; the filesystem adds its metadata). '
        + 'On disk it keeps one file of --file-size.',
        'bytes',
        k.target(
          'sum by (%s) (increase(fioprobe_continuous_written_bytes_total%s[%s]))'
          % [by, sel, d.costWindow],
          legend
        ),
        w=w,
      ),
  },

  // --- Layout ------------------------------------------------------------------------------
  // Lays panels out left to right, wrapping at the grid width; a panel keeps its own
  // gridPos.w/h (default `width` x `height`); a row starts a line of its own; a wrapped line
  // starts below the tallest panel of the line before. grafonnet's util.grid.wrapPanels is
  // not used: it starts a wrapped line at the previous line's y plus the new panel's own
  // height (gaps or overlaps where heights differ) and gives uncollapsed rows a width of 0.
  layout(panels, width=12, height=8)::
    local step(acc, p) =
      local isRow = p.type == 'row';
      local pos = std.get(p, 'gridPos', {});
      local w = if isRow then gridWidth else std.get(pos, 'w', width);
      local h = if isRow then 1 else std.get(pos, 'h', height);
      local newLine = isRow || acc.x + w > gridWidth;
      local x = if newLine then 0 else acc.x;
      local y = if newLine then acc.y + acc.lineHeight else acc.y;
      {
        panels: acc.panels + [p { gridPos: { x: x, y: y, w: w, h: h } }],
        x: if isRow then 0 else x + w,
        y: if isRow then y + 1 else y,
        lineHeight: if isRow then 0 else if newLine then h else std.max(acc.lineHeight, h),
      };
    std.foldl(step, panels, { panels: [], x: 0, y: 0, lineHeight: 0 }).panels,

  // The dashboard frame: uid, tags, variables, panels laid out on the grid (grafonnet's
  // withPanels numbers them).
  dashboard(key, title, description, variables, panels)::
    local db = g.dashboard;
    local link = db.link;
    db.new(title)
    + db.withUid(d.uids[key])
    + db.withDescription(description)
    + db.withTags(d.tags)
    + db.withTimezone(d.timezone)
    + db.withRefresh(d.refresh)
    + db.withEditable(false)
    + db.time.withFrom(d.timeFrom)
    + db.graphTooltip.withSharedCrosshair()
    + db.withVariables(variables)
    // Every fioprobe dashboard links to the others by tag, as a dropdown that keeps the
    // time range and the variables (cluster, StorageClass, node, profile).
    + db.withLinks([
      link.dashboards.new('fioprobe', [d.linkTag])
      + link.dashboards.options.withAsDropdown()
      + link.dashboards.options.withIncludeVars()
      + link.dashboards.options.withKeepTime()
      + link.dashboards.options.withTargetBlank(false)
      // Grafana's link model requires them; the dropdown shows no icon or tooltip anyway.
      + link.link.withIcon('external link')
      + link.link.withTooltip(''),
    ])
    + db.withPanels(self.layout(panels)),
}
