// FioProbeLatencyRegression: a probe's p99 is now well above its own p99 one offset (a week)
// earlier: both more than `regressionRatio` times it AND at least
// `regressionMinIncreaseSeconds` above it, so that quiet disks (0.2 ms -> 0.6 ms) stay
// quiet. One rule per operation; no week-ago data (a new probe) means no alert.
local u = import 'util.libsonnet';

{
  prometheusAlerts+:: {
    local c = $._config,
    local regression(op) = {
      local now = '%s{%s}' % [u.quantileRecord(op, 'p99'), c.regressionSelector],
      local before = '(%s offset %s)' % [now, c.regressionOffset],
      local on = 'on (%s)' % u.probeBy(c),
      alert: 'FioProbeLatencyRegression',
      expr: |||
        (
          %(now)s
          > %(on)s
          %(ratio)s * %(before)s
        )
        and %(on)s
        (
          %(now)s
          - %(on)s
          %(before)s
          > %(minIncrease)s
        )
      ||| % {
        now: now,
        before: before,
        on: on,
        ratio: u.num(c.regressionRatio),
        minIncrease: u.num(c.regressionMinIncreaseSeconds),
      },
      'for': c.regressionFor,
      labels: { severity: 'warning', operation: op },
      annotations: {
        summary: 'A probe measures a much higher p99 latency than it did a week earlier.',
        description: (
          '%(op)s p99 of fioprobe %(probe)s is {{ $value | humanizeDuration }}: more than '
          + '%(ratio)sx and over {{ %(minIncrease)s | humanizeDuration }} above the same '
          + 'probe %(offset)s earlier, for %(for)s.'
        ) % {
          op: op,
          probe: u.probeText(c),
          ratio: u.num(c.regressionRatio),
          minIncrease: u.num(c.regressionMinIncreaseSeconds),
          offset: c.regressionOffset,
          'for': c.regressionFor,
        },
        runbook_url: u.runbookURL(c, 'FioProbeLatencyRegression'),
      },
    },
    groups+: [
      {
        name: 'fioprobe-latency-regression',
        rules: [regression(op) for op in ['sync', 'write', 'read']],
      },
    ],
  },
}
