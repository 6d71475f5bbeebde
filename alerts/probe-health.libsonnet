// FioProbeFailing, FioProbeStale and FioProbeMissing: the probe itself is not delivering
// measurements, so every other fioprobe alert for it is blind. A probe in trouble is in
// exactly one of them, one cause one alert:
//   Failing  runs happen and fail: the last `failingRuns` runs failed, and the probe still
//            pushes (fioprobe_failure_reason_info says why);
//   Stale    the probe's series are there but nothing (success or failure) was pushed for
//            `staleAfterRuns` intervals: the probe stopped running or cannot reach the
//            Pushgateway, and its group was left behind;
//   Missing  an expected probe (config.libsonnet's expectedProbes, from the manifests) has no
//            series at all for as long: it never pushed, its group was deleted, or the
//            Pushgateway lost it while the probe was not running.
// Failing requires a fresh push, Stale a push older than the same threshold, Missing no push
// at all, so they never overlap, and a probe that stops after a failed run ends as Stale
// instead of Failing forever. When expected probes are configured, only they can be Stale:
// a probe removed from the configuration whose group was left behind stays silent (delete it
// with `fioprobe gc`).
local u = import '../lib/util.libsonnet';

{
  prometheusAlerts+:: {
    local c = $._config,
    local w = c.windows,
    local by = u.probeBy(c),
    local expected = std.length(c.expectedProbes) > 0,
    local expectedRecord = 'probe:fioprobe_expected:info',
    local identity = 'storageclass, profile, node',
    // Go template appending the last failure's reason, looked up at notification time
    // (fioprobe_failure_reason_info exists only while the last run failed).
    local reasonText = u.probeLookup(
      c, 'fioprobe_failure_reason_info', '{{ range . }} Reason of the last failure: {{ .Labels.reason }}.{{ end }}'
    ),
    groups+: [
      {
        name: 'fioprobe-probe-health',
        rules: [
          {
            alert: 'FioProbeFailing',
            expr: |||
              min by (%(by)s) (fioprobe_success{%(matchers)s}) == 0
              and on (%(by)s)
              (%(fresh)s)
            ||| % { by: by, matchers: u.matchers(c), fresh: u.fresh(c) },
            'for': w.failingFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A fioprobe probe keeps failing, so its disk is not being measured.',
              description: (
                'The last %(runs)d runs of fioprobe %(probe)s failed.%(reason)s'
              ) % { probe: u.probeText(c), runs: c.failingRuns, reason: reasonText },
            },
          },
          {
            alert: 'FioProbeStale',
            expr: |||
                    time() - %(pushTime)s > %(staleAfter)s
                  ||| % { pushTime: u.pushTimeRecord, staleAfter: u.num(w.staleAfterSeconds) }
                  + (if expected then 'and on (%s)\n%s\n' % [identity, expectedRecord] else ''),
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A fioprobe probe stopped pushing results, so its disk is not being measured.',
              description: (
                'fioprobe %(probe)s last pushed a result {{ $value | humanizeDuration }} ago, '
                + 'more than %(runs)d probe intervals: it is not running or cannot reach the '
                + 'Pushgateway. Its last values are kept there but no alert uses them.'
              ) % { probe: u.probeText(c), runs: c.staleAfterRuns },
            },
          },
        ] + (if !expected then [] else [
               {
                 alert: 'FioProbeMissing',
                 expr: |||
                   %(expected)s
                   unless on (%(identity)s)
                   push_time_seconds{%(matchers)s}
                 ||| % { expected: expectedRecord, identity: identity, matchers: u.matchers(c) },
                 'for': w.staleAfter,
                 labels: { severity: 'warning' },
                 annotations: {
                   summary: 'A deployed fioprobe probe has no data in Prometheus at all.',
                   description: (
                     'fioprobe %(probe)s is deployed but Prometheus has had none of its series '
                     + 'for %(runs)d probe intervals (%(for)s): it never pushed, or its Pushgateway '
                     + 'group is gone (deleted, or a Pushgateway restart without persistence) '
                     + 'while the probe is not running.'
                   ) % { probe: u.probeText(c), runs: c.staleAfterRuns, 'for': w.staleAfter },
                 },
               },
             ]),
      },
    ],
  },
}
