// FioProbeLatencyOutlier: a probe's fsync p99 stays at `outlierRatio` times or more the median
// of its siblings (the same StorageClass and profile on other nodes: the per-node probes, the
// etcd disks of the control-plane nodes) for `outlierRuns` runs. It needs no history, so it
// covers a new cluster in its first week, where FioProbeLatencyRegression has no baseline
// yet, and one node's disk that goes bad while the others are fine. At least
// `outlierMinSiblings` probes must share the median, so one of two is never an outlier by
// itself, and the p99 must also be `outlierMinIncreaseSeconds` above the median, so quiet
// disks stay quiet (0.2 ms among 0.06 ms ones). Each run's own p99, as fio computed it.
local u = import '../lib/util.libsonnet';

{
  prometheusAlerts+:: {
    local c = $._config,
    local w = c.windows,
    local by = u.probeBy(c),
    local siblings = '%s, storageclass, profile' % c.clusterLabel,
    local lastP99 = '%s{%s}' % [u.lastRunRecord('sync'), c.outlierSelector],
    // The siblings that still probe: a stopped node's frozen p99 neither makes up the number
    // nor moves the median.
    local freshP99 = '(%s and on (%s) (%s))' % [lastP99, by, u.fresh(c)],
    local median = 'quantile by (%s) (0.5, %s)' % [siblings, freshP99],
    // The ratio of the probe's last p99 to its siblings' median, while it is an outlier and
    // its last run succeeded and is fresh.
    local live = |||
      (
        %(lastP99)s
        / on (%(siblings)s) group_left ()
        %(median)s
      ) >= %(ratio)s
      and on (%(by)s)
      (
        %(lastP99)s
        - on (%(siblings)s) group_left ()
        %(median)s
      ) >= %(minIncrease)s
      and on (%(siblings)s)
      count by (%(siblings)s) (%(freshP99)s) >= %(minSiblings)d
      and on (%(by)s)
      (%(success)s == 1)
      and on (%(by)s)
      (%(fresh)s)
    ||| % {
      lastP99: lastP99,
      freshP99: freshP99,
      siblings: siblings,
      median: median,
      by: by,
      ratio: u.num(c.outlierRatio),
      minIncrease: u.num(c.outlierMinIncreaseSeconds),
      minSiblings: c.outlierMinSiblings,
      success: u.successRecord,
      fresh: u.fresh(c),
    },
    groups+: [
      {
        name: 'fioprobe-latency-outlier',
        rules: [
          // Carried through a push gap like the other per-run conditions; -1 while the probe
          // pushes and is no outlier.
          u.carried(c, u.outlierRecord, live, otherwise=-1),
          {
            alert: 'FioProbeLatencyOutlier',
            expr: u.outlierRecord + ' >= 0\n',
            'for': w.outlierFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: "A disk's fsync p99 is several times that of its siblings, for several probe runs.",
              description: (
                'The last %(runs)d runs of fioprobe %(probe)s measured an fsync p99 of '
                + '{{ $value | printf "%%.1f" }} times or more the median of the same profile on '
                + 'its StorageClass on the other nodes (at least %(minSiblings)d probes; '
                + 'alert from %(ratio)sx and {{ %(minIncrease)s | humanizeDuration }} above it).%(last)s '
                + 'One node or volume is sick while its siblings are fine; no history is needed.'
              ) % {
                runs: c.outlierRuns,
                probe: u.probeText(c),
                minSiblings: c.outlierMinSiblings,
                ratio: u.num(c.outlierRatio),
                minIncrease: u.num(c.outlierMinIncreaseSeconds),
                last: u.probeLookup(
                  c, u.lastRunRecord('sync'), ' The last run measured {{ . | first | value | humanizeDuration }}.', pushed=false
                ),
              },
            },
          },
        ],
      },
    ],
  },
}
