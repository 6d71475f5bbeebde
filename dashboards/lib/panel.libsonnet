// grafonnet's panel.<type> namespaces, for the panel types fioprobe uses. Every one is built
// from the same generic parts (panelOptions, queryOptions, standardOptions, fieldConfig), plus
// the options of its plugin.
local asArray(v) = if std.isArray(v) then v else [v];

// {a+: {b+: {c+: leaf}}} from ['a', 'b', 'c'] and leaf: the nested mixins grafonnet generates.
local nest(path, leaf) = std.foldr(function(k, acc) { [k]+: acc }, path, leaf);

// withX(value) setters for a list of [functionName, field] at a path.
local setters(path, pairs) = {
  [p[0]]: function(value) nest(path, { [p[1]]: value })
  for p in pairs
};

local reduceOptions(path) = setters(path + ['reduceOptions'], [
  ['withCalcs', 'calcs'],
  ['withFields', 'fields'],
  ['withValues', 'values'],
  ['withLimit', 'limit'],
]);

local generic(type) = {
  new(title):: {
    type: type,
    title: title,
    fieldConfig: { defaults: {}, overrides: [] },
    options: {},
    targets: [],
  },

  panelOptions: {
    withTitle(value):: { title: value },
    withDescription(value):: { description: value },
    withTransparent(value=true):: { transparent: value },
    withGridPos(h=8, w=12, x=0, y=0):: { gridPos: { h: h, w: w, x: x, y: y } },
    // One copy of the panel per selected value of a (multi-value) variable; 'h' places the
    // copies side by side, at most maxPerRow to a line, 'v' stacks them.
    withRepeat(value):: { repeat: value },
    withRepeatDirection(value='h'):: { repeatDirection: value },
    withMaxPerRow(value):: { maxPerRow: value },
  },

  queryOptions: {
    // Targets without a refId get A, B, C... (see g.libsonnet).
    withTargets(value):: {
      local targets = asArray(value),
      targets: [
        { refId: std.char(std.codepoint('A') + i) } + targets[i]
        for i in std.range(0, std.length(targets) - 1)
      ],
    },
    withDatasource(type, uid):: { datasource: { type: type, uid: uid } },
    withInterval(value):: { interval: value },
    withMaxDataPoints(value):: { maxDataPoints: value },
    withTimeShift(value):: { timeShift: value },
    withTransformations(value):: { transformations: asArray(value) },
    transformation: {
      withId(value):: { id: value },
      withOptions(value):: { options: value },
    },
  },

  standardOptions: {
    withUnit(value):: nest(['fieldConfig', 'defaults'], { unit: value }),
    withMin(value):: nest(['fieldConfig', 'defaults'], { min: value }),
    withMax(value):: nest(['fieldConfig', 'defaults'], { max: value }),
    withDecimals(value):: nest(['fieldConfig', 'defaults'], { decimals: value }),
    withNoValue(value):: nest(['fieldConfig', 'defaults'], { noValue: value }),
    withDisplayName(value):: nest(['fieldConfig', 'defaults'], { displayName: value }),
    withMappings(value):: nest(['fieldConfig', 'defaults'], { mappings: asArray(value) }),
    withOverrides(value):: nest(['fieldConfig'], { overrides: asArray(value) }),
    thresholds: {
      // 'absolute' or 'percentage'
      withMode(value):: nest(['fieldConfig', 'defaults', 'thresholds'], { mode: value }),
      // [{color: 'green', value: null}, {color: 'red', value: 0.01}]: the first step's value
      // is null (from minus infinity).
      withSteps(value)::
        nest(['fieldConfig', 'defaults', 'thresholds'], { steps: asArray(value) }),
    },
    color: {
      withMode(value):: nest(['fieldConfig', 'defaults', 'color'], { mode: value }),
      withFixedColor(value):: nest(['fieldConfig', 'defaults', 'color'], { fixedColor: value }),
    },
    override: {
      byName: {
        new(value):: { matcher: { id: 'byName', options: value }, properties: [] },
        withProperty(id, value):: { properties+: [{ id: id, value: value }] },
      },
      byRegexp: {
        new(value):: { matcher: { id: 'byRegexp', options: value }, properties: [] },
        withProperty(id, value):: { properties+: [{ id: id, value: value }] },
      },
    },
  },
};

local custom = ['fieldConfig', 'defaults', 'custom'];

{
  timeSeries: generic('timeseries') {
    fieldConfig: {
      defaults: {
        custom: setters(custom, [
          ['withDrawStyle', 'drawStyle'],
          ['withLineWidth', 'lineWidth'],
          ['withFillOpacity', 'fillOpacity'],
          ['withShowPoints', 'showPoints'],
          ['withPointSize', 'pointSize'],
          ['withSpanNulls', 'spanNulls'],
          ['withAxisLabel', 'axisLabel'],
          ['withAxisSoftMin', 'axisSoftMin'],
          ['withAxisSoftMax', 'axisSoftMax'],
        ]) + {
          scaleDistribution: setters(custom + ['scaleDistribution'], [
            ['withType', 'type'],
            ['withLog', 'log'],
          ]),
          thresholdsStyle: setters(custom + ['thresholdsStyle'], [['withMode', 'mode']]),
          lineStyle: setters(custom + ['lineStyle'], [['withFill', 'fill'], ['withDash', 'dash']]),
        },
      },
    },
    options: {
      legend: setters(['options', 'legend'], [
        ['withDisplayMode', 'displayMode'],
        ['withPlacement', 'placement'],
        ['withShowLegend', 'showLegend'],
        ['withCalcs', 'calcs'],
        ['withSortBy', 'sortBy'],
        ['withSortDesc', 'sortDesc'],
      ]),
      tooltip: setters(['options', 'tooltip'], [['withMode', 'mode'], ['withSort', 'sort']]),
    },
  },

  heatmap: generic('heatmap') {
    options: setters(['options'], [
      // false: the data are already buckets (Prometheus `le`), do not re-bucket.
      ['withCalculate', 'calculate'],
      ['withCellGap', 'cellGap'],
      ['withShowValue', 'showValue'],
    ]) + {
      yAxis: setters(['options', 'yAxis'], [
        ['withUnit', 'unit'],
        ['withDecimals', 'decimals'],
        ['withAxisLabel', 'axisLabel'],
        ['withReverse', 'reverse'],
      ]),
      color: setters(['options', 'color'], [
        ['withMode', 'mode'],
        ['withScheme', 'scheme'],
        ['withScale', 'scale'],
        ['withExponent', 'exponent'],
        ['withSteps', 'steps'],
        ['withFill', 'fill'],
        ['withReverse', 'reverse'],
      ]),
      cellValues: setters(['options', 'cellValues'], [['withUnit', 'unit']]),
      filterValues: setters(['options', 'filterValues'], [['withLe', 'le'], ['withGe', 'ge']]),
      legend: setters(['options', 'legend'], [['withShow', 'show']]),
      tooltip: setters(['options', 'tooltip'], [
        ['withMode', 'mode'],
        ['withYHistogram', 'yHistogram'],
        ['withShowColorScale', 'showColorScale'],
      ]),
      rowsFrame: setters(['options', 'rowsFrame'], [['withLayout', 'layout']]),
    },
  },

  barGauge: generic('bargauge') {
    options: setters(['options'], [
      ['withDisplayMode', 'displayMode'],
      ['withOrientation', 'orientation'],
      ['withShowUnfilled', 'showUnfilled'],
      ['withNamePlacement', 'namePlacement'],
      ['withValueMode', 'valueMode'],
      ['withMinVizHeight', 'minVizHeight'],
      ['withMaxVizHeight', 'maxVizHeight'],
      ['withSizing', 'sizing'],
    ]) + {
      reduceOptions: reduceOptions(['options']),
    },
  },

  stat: generic('stat') {
    options: setters(['options'], [
      ['withColorMode', 'colorMode'],
      ['withGraphMode', 'graphMode'],
      ['withJustifyMode', 'justifyMode'],
      ['withTextMode', 'textMode'],
      ['withOrientation', 'orientation'],
    ]) + {
      reduceOptions: reduceOptions(['options']),
    },
  },

  table: generic('table') {
    fieldConfig: {
      defaults: {
        custom: setters(custom, [
          ['withAlign', 'align'],
          ['withCellOptions', 'cellOptions'],
          ['withFilterable', 'filterable'],
          ['withMinWidth', 'minWidth'],
        ]),
      },
    },
    options: setters(['options'], [
      ['withShowHeader', 'showHeader'],
      ['withSortBy', 'sortBy'],
      ['withCellHeight', 'cellHeight'],
    ]),
  },

  row: {
    new(title):: { type: 'row', title: title, collapsed: false, panels: [] },
    withCollapsed(value=true):: { collapsed: value },
  },
}
