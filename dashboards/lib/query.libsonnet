// grafonnet's query.prometheus.
{
  prometheus: {
    // datasource is the data source uid, usually '${datasource}' (a datasource variable).
    new(datasource, expr):: {
      datasource: { type: 'prometheus', uid: datasource },
      expr: expr,
    },
    withExpr(value):: { expr: value },
    withLegendFormat(value):: { legendFormat: value },
    withRefId(value):: { refId: value },
    // 'time_series' (default), 'table' or 'heatmap' (buckets sorted by le for heatmaps).
    withFormat(value):: { format: value },
    withInstant(value=true):: { instant: value, range: !value },
    withRange(value=true):: { range: value, instant: !value },
    withInterval(value):: { interval: value },
    withIntervalFactor(value):: { intervalFactor: value },
  },
}
