// The panel kinds the dashboards use (grafonnet's, with fioprobe's defaults), their queries,
// the burst-credit panels and the grid layout (part of common.libsonnet).
local g = import 'g.libsonnet';

local prom = g.query.prometheus;
local gridWidth = 24;

function(c) {
  local d = c.dashboards,

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
