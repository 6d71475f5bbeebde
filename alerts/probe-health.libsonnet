// FioProbeFailing and FioProbeStale: the probe itself is not delivering measurements, so
// every other fioprobe alert for it is blind. They are disjoint on purpose, one cause one
// alert: Failing means runs happen and fail (fioprobe_success == 0, with
// fioprobe_failure_reason_info telling why); Stale means no run has succeeded for a long
// time although the last pushed run did not fail, i.e. runs stopped happening or stopped
// reaching the Pushgateway. A Pushgateway never forgets a group, so a probe that stops
// pushing keeps its last values forever and only its timestamp ages.
local u = import 'util.libsonnet';

{
  prometheusAlerts+:: {
    local c = $._config,
    // Go template appending the last failure's reason, looked up at notification time
    // (fioprobe_failure_reason_info exists only while the last run failed). Absent labels
    // render as "", which matches series without them (node, or cluster in a single
    // Prometheus where it is an external label).
    local reasonText =
      '{{ with printf `fioprobe_failure_reason_info{'
      + u.matchers(c, [c.clusterLabel + '="%s"', 'storageclass="%s"', 'profile="%s"', 'node="%s"'])
      + '}` $labels.' + c.clusterLabel + ' $labels.storageclass $labels.profile $labels.node | query }}'
      + '{{ range . }} Reason of the last failure: {{ .Labels.reason }}.{{ end }}{{ end }}',
    local lastRunFailed = |||
      min by (%(probeBy)s) (fioprobe_success{%(matchers)s}) == 0
    ||| % { probeBy: u.probeBy(c), matchers: u.matchers(c) },
    groups+: [
      {
        name: 'fioprobe-probe-health',
        rules: [
          {
            alert: 'FioProbeFailing',
            expr: lastRunFailed,
            'for': c.failingFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A fioprobe probe keeps failing, so its disk is not being measured.',
              description: (
                'The runs of fioprobe %(probe)s have failed for %(for)s.%(reason)s'
              ) % { probe: u.probeText(c), 'for': c.failingFor, reason: reasonText },
              runbook_url: u.runbookURL(c, 'FioProbeFailing'),
            },
          },
          {
            alert: 'FioProbeStale',
            expr: |||
              (
                time() - max by (%(probeBy)s) (fioprobe_last_success_timestamp_seconds{%(matchers)s})
                > %(staleAfter)s
              )
              unless on (%(probeBy)s)
              (
                %(lastRunFailed)s)
            ||| % {
              probeBy: u.probeBy(c),
              matchers: u.matchers(c),
              staleAfter: u.num(c.staleAfterSeconds),
              lastRunFailed: lastRunFailed,
            },
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A fioprobe probe has not produced a successful run for a long time.',
              description: (
                'The last successful run of fioprobe %(probe)s was {{ $value | humanizeDuration }} '
                + 'ago and no failed run has been pushed since: the probe is not running or '
                + 'cannot reach the Pushgateway.'
              ) % { probe: u.probeText(c) },
              runbook_url: u.runbookURL(c, 'FioProbeStale'),
            },
          },
        ],
      },
    ],
  },
}
