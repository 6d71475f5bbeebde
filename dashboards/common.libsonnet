// What the three fioprobe dashboards share: variables, selectors, thresholds and panel
// shorthands. A function of the mixin's _config, so that every label name, selector and
// threshold comes from config.libsonnet (or the dashboard-only defaults in
// dashboards.libsonnet's `_config.dashboards`).
local g = import 'lib/g.libsonnet';

local var = g.dashboard.variable;
local prom = g.query.prometheus;

function(c) {
  local d = c.dashboards,
  local cl = c.clusterLabel,
  local nonEmpty(ms) = std.filter(function(m) m != '', ms),

  // PromQL number text (jsonnet's %s would print 0.032000000000000001).
  num(x):: '%.10g' % x,

  // --- Selectors ---------------------------------------------------------------------------
  // Raw fioprobe_* series: the configured selector, the cluster, and `extra` matchers.
  raw(extra=[]):: '{%s}' % std.join(', ', nonEmpty([c.fioprobeSelector, '%s=~"$cluster"' % cl] + extra)),
  // Recording-rule series probe:fioprobe_*: the configured selector was applied inside the
  // rule (and its labels may be aggregated away), so only the cluster and `extra` here.
  rec(extra=[]):: '{%s}' % std.join(', ', ['%s=~"$cluster"' % cl] + extra),
  // Series of other exporters (etcd, CloudWatch): the cluster, an optional configured
  // selector, and `extra`.
  ext(selector, extra=[]):: '{%s}' % std.join(', ', nonEmpty(['%s=~"$cluster"' % cl, selector] + extra)),

  // The usual probe filter of the overview: every probe variable.
  probeMatchers:: ['storageclass=~"$storageclass"', 'node=~"$node"', 'profile=~"$profile"'],

  // Labels that identify one probe within the chosen cluster (never job/instance).
  probeBy:: 'storageclass, node, profile',
  // Labels that identify one probed volume, for joins: the volume gauges are pushed with
  // every profile's group of a target, so profile is left out (and the cluster kept, so a
  // join never pairs two clusters' volumes).
  volumeBy:: '%s, storageclass, node' % cl,

  // --- Thresholds --------------------------------------------------------------------------
  // The benchmark tables' colours: green, yellow from 5 ms, red from 10 ms.
  latencySteps:: [
    { color: 'green', value: null },
    { color: 'yellow', value: d.latencyYellowSeconds },
    { color: 'red', value: d.latencyRedSeconds },
  ],

  // --- Variables ---------------------------------------------------------------------------
  datasourceVar::
    var.datasource.new('datasource', 'prometheus')
    + var.datasource.generalOptions.withLabel('Data source')
    + var.datasource.generalOptions.withDescription(
      'Prometheus (or Thanos/Cortex/Mimir) that holds the fioprobe series.'
    ),

  local fromDs(v) = v + var.query.withDatasourceFromVariable(self.datasourceVar),

  // One cluster at a time. Without a cluster label (a single Prometheus) the query finds no
  // values, the variable is empty and `cluster=~""` matches the series without the label.
  clusterVar::
    fromDs(var.query.new('cluster'))
    + var.query.queryTypes.withLabelValues(cl, 'fioprobe_success{%s}' % c.fioprobeSelector)
    + var.query.generalOptions.withLabel('Cluster')
    + var.query.generalOptions.withDescription(
      'Value of the `%s` label (a Prometheus external label); empty in a single Prometheus.' % cl

    )
    // Hidden where there is one cluster only (showClusterVariable: false); the variable
    // stays, so every query keeps its cluster matcher.
    + (if d.showClusterVariable then {} else var.query.generalOptions.showOnDashboard.withNothing()),

  // A multi-value variable over a label of fioprobe_success; "All" is the regex `.*`, which
  // also matches series without the label (node is present only on node-local probes).
  labelVar(name, label, label_text, description, extra=[], metric='fioprobe_success')::
    fromDs(var.query.new(name))
    + var.query.queryTypes.withLabelValues(label, metric + self.raw(extra))
    + var.query.generalOptions.withLabel(label_text)
    + var.query.generalOptions.withDescription(description)
    + var.query.selectionOptions.withMulti()
    + var.query.selectionOptions.withIncludeAll(true, '.*')
    + var.query.generalOptions.withCurrent('All', ['$__all']),

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

  // --- Panels ------------------------------------------------------------------------------
  // Every panel gets a title, a description, a unit and a datasource; targets get the
  // datasource variable.
  target(expr, legend=''):: prom.new('${datasource}', expr) + prom.withLegendFormat(legend),
  instant(expr, legend=''):: self.target(expr, legend) + prom.withInstant(),
  tableTarget(expr):: self.instant(expr) + prom.withFormat('table'),

  local base(kind, title, description, unit, targets) =
    kind.new(title)
    + kind.panelOptions.withDescription(description)
    + kind.standardOptions.withUnit(unit)
    + kind.queryOptions.withDatasource('prometheus', '${datasource}')
    + kind.queryOptions.withTargets(targets),

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

  // Drops Grafana's Time and Value columns of an instant table query and names the rest.
  organize(exclude=['Time', 'Value', '__name__'], rename={})::
    g.panel.table.queryOptions.transformation.withId('organize')
    + g.panel.table.queryOptions.transformation.withOptions({
      excludeByName: { [k]: true for k in exclude },
      renameByName: rename,
    }),

  row(title):: g.panel.row.new(title),

  // --- Burst credits (Overview per StorageClass, etcd disks per node) -----------------------
  // matchers: which volumes (storageclass/node; never profile: see volumeBy). The volume
  // model's lines are drawn only for volumes whose burst-ceiling probe has a measurement,
  // joined on cluster, storageclass and node.
  burstCeiling(matchers, legend, what, w=12)::
    local ts = g.panel.timeSeries;
    local by = self.volumeBy;
    local ceiling = 'max by (%s) (fioprobe_write_iops%s)'
                    % [by, self.raw(matchers + ['profile="%s"' % c.burstProfile])];
    local model(metric) =
      'max by (%s) (%s%s) and on (%s) %s' % [by, metric, self.raw(matchers), by, ceiling];
    self.timeSeries(
      'IOPS ceiling vs baseline and burst',
      'Write IOPS the %s probe measured %s (a few seconds of ' % [c.burstProfile, what]
      + '4 KiB random writes at high queue depth: the ceiling the volume delivers now) '
      + "against the volume model's baseline and burst IOPS "
      + '(fioprobe_volume_baseline_iops, fioprobe_volume_burst_iops; dashed, shown where '
      + 'the probe measured a ceiling). A ceiling that drops to the baseline means the '
      + 'burst credits are gone. The profile variable does not apply.',
      'iops',
      [
        self.target(ceiling, 'ceiling ' + legend),
        self.target(model('fioprobe_volume_baseline_iops'), 'baseline ' + legend),
        self.target(model('fioprobe_volume_burst_iops'), 'burst ' + legend),
      ],
      w=w,
    )
    + ts.standardOptions.withOverrides([
      ts.standardOptions.override.byRegexp.new('^(baseline|burst) .*')
      + ts.standardOptions.override.byRegexp.withProperty(
        'custom.lineStyle', { fill: 'dash', dash: [10, 10] }
      ),
    ]),

  // min: each profile's group carries the balance as of its own push; the lowest is the
  // one that has seen the most spending.
  burstBalance(matchers, legend, what, w=12)::
    local ts = g.panel.timeSeries;
    self.timeSeries(
      'Modelled burst credit balance',
      'Burst credit balance the volume model computes %s ' % what
      + '(fioprobe_volume_burst_balance_ratio, 0 to 1; the lowest of the probe groups of a '
      + "volume), only for a dedicated probe volume whose only IO is the probe's own, of a "
      + 'type with credits (gp2). Empty where no volume has such a model.',
      'percentunit',
      self.target(
        'min by (%s) (fioprobe_volume_burst_balance_ratio%s)' % [self.volumeBy, self.raw(matchers)],
        legend
      ),
      w=w,
    )
    + ts.standardOptions.withMin(0)
    + ts.standardOptions.withMax(1),

  // The dashboard frame: uid, tags, variables, panels laid out on the grid.
  dashboard(key, title, description, variables, panels)::
    local db = g.dashboard;
    db.new(title)
    + db.withUid(d.uids[key])
    + db.withDescription(description)
    + db.withTags(d.tags)
    + db.withTimezone(d.timezone)
    + db.withRefresh(d.refresh)
    + db.time.withFrom(d.timeFrom)
    + db.graphTooltip.withSharedCrosshair()
    + db.withVariables(variables)
    // Every fioprobe dashboard links to the others by tag, as a dropdown that keeps the
    // time range and the variables (cluster, StorageClass, node, profile).
    + db.withLinks([
      db.link.dashboards.new('fioprobe', [d.linkTag])
      + db.link.dashboards.options.withAsDropdown()
      + db.link.dashboards.options.withIncludeVars()
      + db.link.dashboards.options.withKeepTime(),
    ])
    + db.withPanels(g.util.grid.wrapPanels(panels, 12, 8)),
}
