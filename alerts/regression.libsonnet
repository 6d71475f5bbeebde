// FioProbeLatencyRegression: a probe's p99 (over the last latencyWindowRuns runs) is now well
// above its own baseline: the median of its p99 over a day (regressionBaselineWindow) one
// week (regressionOffset) back. Both more than `regressionRatio` times the baseline AND at
// least `regressionMinIncreaseSeconds` above it, so quiet disks (0.2 ms -> 0.6 ms) stay
// quiet. The median over a whole day survives gaps and single unusual windows; a baseline
// day that holds fewer than regressionMinBaselineFraction of its runs (a probe younger than
// eight days, one that was down most of that day) means no alert. One rule per operation.
local u = import '../lib/util.libsonnet';

{
  prometheusAlerts+:: {
    local c = $._config,
    local w = c.windows,
    local regression(op) = {
      local by = u.probeBy(c),
      local now = '%s{%s}' % [u.quantileRecord(op, 'p99'), c.regressionSelector],
      local baseline = 'quantile_over_time(0.5, %s[%s] offset %s)' % [now, c.regressionBaselineWindow, c.regressionOffset],
      local on = 'on (%s)' % by,
      alert: 'FioProbeLatencyRegression',
      expr: |||
        (
          %(now)s
          > %(on)s
          %(ratio)s * %(baseline)s
        )
        and %(on)s
        (
          %(now)s
          - %(on)s
          %(baseline)s
          > %(minIncrease)s
        )
        and %(on)s
        (
          sum by (%(by)s) (changes(fioprobe_runs_total{%(matchers)s}[%(window)s] offset %(offset)s))
          >= %(minRuns)d
        )
        and %(on)s
        (%(fresh)s)
      ||| % {
        now: now,
        baseline: baseline,
        on: on,
        by: by,
        matchers: u.matchers(c),
        window: c.regressionBaselineWindow,
        offset: c.regressionOffset,
        minRuns: w.regressionMinBaselineRuns,
        fresh: u.fresh(c),
        ratio: u.num(c.regressionRatio),
        minIncrease: u.num(c.regressionMinIncreaseSeconds),
      },
      'for': w.regressionFor,
      labels: { severity: 'warning', operation: op },
      annotations: {
        summary: 'A probe measures a much higher p99 latency than it did a week earlier.',
        description: (
          '%(op)s p99 of fioprobe %(probe)s over its last %(runs)d runs is {{ $value | humanizeDuration }}: '
          + 'more than %(ratio)sx and over {{ %(minIncrease)s | humanizeDuration }} above its median '
          + 'over %(window)s %(offset)s earlier, for %(forRuns)d runs now.'
        ) % {
          op: op,
          probe: u.probeText(c),
          runs: c.latencyWindowRuns,
          ratio: u.num(c.regressionRatio),
          minIncrease: u.num(c.regressionMinIncreaseSeconds),
          window: c.regressionBaselineWindow,
          offset: c.regressionOffset,
          forRuns: c.regressionForRuns,
        },
      },
    },
    groups+: [
      {
        name: 'fioprobe-latency-regression',
        rules: [regression(op) for op in u.ops],
      },
    ],
  },
}
