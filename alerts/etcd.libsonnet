// FioProbeEtcdFsyncLatencyHigh: the etcd-fsync profile (fdatasync after every 2300-byte
// write, as etcd's WAL does) shows an fsync p99 above etcd's 10 ms requirement. Warning at
// the requirement, critical well above it; both from the shared p99 recording rule over
// the configured latency window.
local u = import 'util.libsonnet';

{
  prometheusAlerts+:: {
    local c = $._config,
    local alert(severity, threshold, forDuration, consequence) = {
      alert: 'FioProbeEtcdFsyncLatencyHigh',
      expr: |||
        %(record)s{profile="%(profile)s"} > %(threshold)s
      ||| % {
        record: u.quantileRecord('sync', 'p99'),
        profile: c.etcdProfile,
        threshold: u.num(threshold),
      },
      'for': forDuration,
      labels: { severity: severity },
      annotations: {
        summary: 'Disk fsync p99 measured by the etcd probe is above what etcd needs.',
        description: (
          'fsync p99 of fioprobe %(probe)s is {{ $value | humanizeDuration }} over the last '
          + '%(window)s, above the %(severity)s threshold of {{ %(threshold)s | humanizeDuration }}. '
          + '%(consequence)s'
        ) % {
          probe: u.probeText(c),
          window: c.latencyWindow,
          severity: severity,
          threshold: u.num(threshold),
          consequence: consequence,
        },
        runbook_url: u.runbookURL(c, 'FioProbeEtcdFsyncLatencyHigh'),
      },
    },
    groups+: [
      {
        name: 'fioprobe-etcd',
        rules: [
          alert(
            'warning',
            c.etcdFsyncP99WarningSeconds,
            c.etcdFsyncWarningFor,
            'etcd on this disk commits slower than it should; expect slow API requests.',
          ),
          alert(
            'critical',
            c.etcdFsyncP99CriticalSeconds,
            c.etcdFsyncCriticalFor,
            'etcd on this disk risks missed heartbeats, leader elections and API timeouts.',
          ),
        ],
      },
    ],
  },
}
