// FioProbeEtcdFsyncLatencyHigh (disks that hold etcd) and FioProbeStorageClassLatencyHigh
// (every other volume probed with the fsync profile). Both decide per probe run: a run is
// slow when its own fsync p99, as fio computed it from all its fsyncs, is above the
// threshold; an alert fires when enough of the last runs were slow. So one slow run never
// fires, however slow it was, and how long the trouble lasted is what counts, not how many
// fsyncs of a long window it touched. Runs that failed or are stale never count as slow.
local u = import '../lib/util.libsonnet';

{
  prometheusAlerts+:: {
    local c = $._config,
    local w = c.windows,
    local lastRun = u.probeLookup(
      c, u.lastRunRecord('sync'), ' The last run measured {{ . | first | value | humanizeDuration }}.', pushed=false
    ),
    local etcd(severity, threshold, consequence) = {
      alert: 'FioProbeEtcdFsyncLatencyHigh',
      expr: u.slowRunsAtLeast(
        c, 'probe:fioprobe_runs_total:etcd_fsync_%s_slow' % severity, w.etcdRuns, c.etcdFsyncSlowRuns, c.etcdFsyncOfRuns
      ),
      labels: { severity: severity },
      annotations: {
        summary: 'The disk that holds etcd is too slow to fsync for several probe runs.',
        description: (
          '{{ $value }} of the last %(of)d runs of fioprobe %(probe)s measured an fsync p99 '
          + 'above the %(severity)s threshold of {{ %(threshold)s | humanizeDuration }}.%(last)s '
          + '%(consequence)s'
        ) % {
          of: c.etcdFsyncOfRuns,
          probe: u.probeText(c),
          severity: severity,
          threshold: u.num(threshold),
          last: lastRun,
          consequence: consequence,
        },
      },
    },
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
        ],
      },
      {
        name: 'fioprobe-storageclass-latency',
        rules: [
          {
            alert: 'FioProbeStorageClassLatencyHigh',
            expr: u.slowRunsAtLeast(
              c, 'probe:fioprobe_runs_total:storageclass_fsync_slow', w.storageClassRuns, c.storageClassSlowRuns, c.storageClassOfRuns
            ),
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A volume is slower to fsync than its volume type should be, for several probe runs.',
              description: (
                '{{ $value }} of the last %(of)d runs of fioprobe %(probe)s measured an fsync p99 above '
                + '%(threshold)s, the threshold for its volume type%(type)s.%(last)s Applications that '
                + 'sync their writes (databases, queues) on this StorageClass wait that long.'
              ) % {
                of: c.storageClassOfRuns,
                probe: u.probeText(c),
                threshold: u.probeLookup(
                  c, u.lastRunRecord('sync') + '_threshold', '{{ . | first | value | humanizeDuration }}', pushed=false
                ),
                type: u.probeLookup(c, 'fioprobe_info', ' ({{ . | first | label "volume_type" }})'),
                last: lastRun,
              },
            },
          },
        ],
      },
    ],
  },
}
