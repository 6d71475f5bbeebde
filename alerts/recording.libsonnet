// Recording rules shared by alerts and dashboards (docs/CONTRACT-NOTES.md):
//   probe:fioprobe_<op>_latency_seconds:p50|p99|p999 for op in sync, write, read,
// one series per cluster, StorageClass, node and profile. The histograms are cumulative
// across runs, so rate() over a window of several runs is the latency distribution of
// those runs; histogram_quantile of it is exact at the bucket boundaries (10 ms is one).
local u = import 'util.libsonnet';

{
  prometheusRules+:: {
    local c = $._config,
    local quantiles = [
      { name: 'p50', q: '0.5' },
      { name: 'p99', q: '0.99' },
      { name: 'p999', q: '0.999' },
    ],
    groups+: [
      {
        name: 'fioprobe.rules',
        rules: [
          {
            record: u.quantileRecord(op, quantile.name),
            expr: |||
              histogram_quantile(%(q)s, sum by (%(by)s, le) (
                rate(fioprobe_%(op)s_latency_seconds_bucket{%(matchers)s}[%(window)s])
              ))
            ||| % {
              q: quantile.q,
              by: u.probeBy(c),
              op: op,
              matchers: u.matchers(c),
              window: c.latencyWindow,
            },
          }
          for op in ['sync', 'write', 'read']
          for quantile in quantiles
        ],
      },
    ],
  },
}
