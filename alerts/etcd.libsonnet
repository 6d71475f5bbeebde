// FioProbeEtcdFsyncLatencyHigh (disks that hold etcd) and FioProbeStorageClassLatencyHigh
// (every other volume probed with the fsync profile). Both decide per probe run: a run is
// slow when its own fsync p99, as fio computed it from all its fsyncs, is above the
// threshold; an alert fires when enough of the last runs were slow. So one slow run never
// fires, however slow it was, and how long the trouble lasted is what counts, not how many
// fsyncs of a long window it touched. Runs that failed or are stale never count as slow.
//
// Two decided corners (docs/MIXIN.md, "Corners"):
//   - once an alert fires, it resolves only after two runs in a row that succeeded and were
//     not slow: a failed run is no evidence either way, and one fast run between slow ones
//     (slow, fast, slow, fast...) is no recovery. While it holds for that reason its $value
//     is 0. A disk that alternates slow and failed runs pages once and stays paged.
//   - latency that is slow in some runs only (every third run, say) never makes "N of the
//     last M"; a second rule of each alert, label pattern="intermittent", warns when at least
//     intermittentSlowRuns of the last intermittentOfRuns runs were slow (6 of 24 by default:
//     a run in four or more often, within two hours at a 5-minute schedule), unless the
//     sustained rule fired within that window (which explains those runs).
local u = import '../lib/util.libsonnet';

{
  prometheusAlerts+:: {
    local c = $._config,
    local w = c.windows,
    local lastRun = u.probeLookup(
      c, u.lastRunRecord('sync'), ' The last run measured {{ . | first | value | humanizeDuration }}.', pushed=false
    ),
    // The alert's condition, or, while it fires, a last run or the run before it that failed
    // or was slow (value 0): only two runs in a row that succeeded fast resolve it. Runs are
    // told apart by their numbers (fioprobe_runs_total), not by time.
    local held(alert, severity, condition, slowRecord) = |||
      %(condition)s
      or
      (
        0 * group by (%(by)s) (ALERTS{alertname="%(alert)s", alertstate="firing", severity="%(severity)s", pattern=""})
        and on (%(by)s)
        (
          max_over_time(%(slow)s[%(window)s])
          >= on (%(by)s)
          (max by (%(by)s) (max_over_time(fioprobe_runs_total{%(matchers)s}[%(window)s])) - 1)
          or
          max_over_time(%(failed)s[%(window)s])
          >= on (%(by)s)
          (max by (%(by)s) (max_over_time(fioprobe_runs_total{%(matchers)s}[%(window)s])) - 1)
        )
        and on (%(by)s)
        (%(fresh)s)
      )
    ||| % {
      condition: std.rstripChars(condition, '\n'),
      by: u.probeBy(c),
      alert: alert,
      severity: severity,
      slow: slowRecord,
      failed: u.failedRunRecord,
      matchers: u.matchers(c),
      window: w.previousRun,
      fresh: u.fresh(c),
    },
    local heldText = 'fioprobe %s measured an fsync p99 above ' % u.probeText(c),
    local heldUntil = ' in earlier runs, and its last two runs were not both successful and fast: the alert holds until they are.',
    local etcd(severity, threshold, consequence) = {
      alert: 'FioProbeEtcdFsyncLatencyHigh',
      local record = 'probe:fioprobe_runs_total:etcd_fsync_%s_slow' % severity,
      expr: held('FioProbeEtcdFsyncLatencyHigh', severity, u.slowRunsAtLeast(
        c, record, w.etcdRuns, c.etcdFsyncSlowRuns, c.etcdFsyncOfRuns
      ), record),
      labels: { severity: severity },
      annotations: {
        summary: 'The disk that holds etcd is too slow to fsync for several probe runs.',
        description: (
          '{{ if eq $value 0.0 }}%(held)sthe %(severity)s threshold of {{ %(threshold)s | humanizeDuration }}'
          + '%(until)s{{ else }}'
          + '{{ $value }} of the last %(of)d runs of fioprobe %(probe)s measured an fsync p99 '
          + 'above the %(severity)s threshold of {{ %(threshold)s | humanizeDuration }}.%(last)s{{ end }} '
          + '%(consequence)s'
        ) % {
          held: heldText,
          until: heldUntil,
          of: c.etcdFsyncOfRuns,
          probe: u.probeText(c),
          severity: severity,
          threshold: u.num(threshold),
          last: lastRun,
          consequence: consequence,
        },
      },
    },
    // Slow in at least intermittentSlowRuns of the last intermittentOfRuns runs.
    local intermittent(alert, record, summary, threshold, consequence) = {
      alert: alert,
      expr: |||
        %(condition)s
        unless on (%(by)s)
        max_over_time(ALERTS{alertname="%(alert)s", alertstate="firing", pattern=""}[%(window)s])
      ||| % {
        condition: std.rstripChars(
          u.slowRunsAtLeast(c, record, w.intermittentRuns, c.intermittentSlowRuns, c.intermittentOfRuns), '\n'
        ),
        by: u.probeBy(c),
        alert: alert,
        window: w.intermittentRuns,
      },
      labels: { severity: 'warning', pattern: 'intermittent' },
      annotations: {
        summary: summary,
        description: (
          '{{ $value }} of the last %(of)d runs of fioprobe %(probe)s measured an fsync p99 above '
          + '%(threshold)s: slow in some runs only, again and again.%(last)s %(consequence)s'
        ) % {
          of: c.intermittentOfRuns,
          probe: u.probeText(c),
          threshold: threshold,
          last: lastRun,
          consequence: consequence,
        },
      },
    },
    local scThreshold = u.probeLookup(
      c, u.lastRunRecord('sync') + '_threshold', '{{ . | first | value | humanizeDuration }}', pushed=false
    ),
    groups+: [
      {
        name: 'fioprobe-etcd',
        rules: [
          etcd(
            'warning',
            c.etcdFsyncP99WarningSeconds,
            'etcd on this disk commits slower than it should; expect slow API requests.',
          ),
          etcd(
            'critical',
            c.etcdFsyncP99CriticalSeconds,
            'etcd on this disk risks missed heartbeats, leader elections and API timeouts.',
          ),
          intermittent(
            'FioProbeEtcdFsyncLatencyHigh',
            'probe:fioprobe_runs_total:etcd_fsync_warning_slow',
            'The disk that holds etcd is too slow to fsync in many probe runs, on and off.',
            '{{ %s | humanizeDuration }}' % u.num(c.etcdFsyncP99WarningSeconds),
            'etcd on this disk stalls its commits every so often; expect slow API requests at those times.',
          ),
        ],
      },
      {
        name: 'fioprobe-storageclass-latency',
        rules: [
          {
            alert: 'FioProbeStorageClassLatencyHigh',
            expr: held('FioProbeStorageClassLatencyHigh', 'warning', u.slowRunsAtLeast(
              c, 'probe:fioprobe_runs_total:storageclass_fsync_slow', w.storageClassRuns, c.storageClassSlowRuns, c.storageClassOfRuns
            ), 'probe:fioprobe_runs_total:storageclass_fsync_slow'),
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A volume is slower to fsync than its volume type should be, for several probe runs.',
              description: (
                '{{ if eq $value 0.0 }}%(held)s%(threshold)s, the threshold for its volume type%(type)s'
                + '%(until)s{{ else }}'
                + '{{ $value }} of the last %(of)d runs of fioprobe %(probe)s measured an fsync p99 above '
                + '%(threshold)s, the threshold for its volume type%(type)s.%(last)s{{ end }} Applications that '
                + 'sync their writes (databases, queues) on this StorageClass wait that long.'
              ) % {
                held: heldText,
                until: heldUntil,
                of: c.storageClassOfRuns,
                probe: u.probeText(c),
                threshold: scThreshold,
                type: u.probeLookup(c, 'fioprobe_info', ' ({{ . | first | label "volume_type" }})'),
                last: lastRun,
              },
            },
          },
          intermittent(
            'FioProbeStorageClassLatencyHigh',
            'probe:fioprobe_runs_total:storageclass_fsync_slow',
            'A volume is slower to fsync than its volume type should be, in many probe runs, on and off.',
            scThreshold + ', the threshold for its volume type',
            'Applications that sync their writes (databases, queues) on this StorageClass wait that long at those times.',
          ),
        ],
      },
    ],
  },
}
