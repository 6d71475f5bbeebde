// FioProbeBurstCreditsDepleted: the burst-ceiling profile's measured 4 KiB random-write
// IOPS (the ceiling the volume delivers right now) sits near the volume's baseline although
// its volume model says it bursts well above it. That is how an EBS gp2 volume out of I/O
// credits looks from inside the cluster, without CloudWatch.
//
// Never fires for volumes that do not burst: the modelled burst must exceed the baseline by
// a factor (gp3/io1/io2 report burst == baseline, Ceph RBD reports no volume model at all),
// and volume types listed as non-bursting in the config are excluded by fioprobe_info even
// if their volume model is misconfigured. A failed last run (whose IOPS mean nothing) does
// not count either, and neither does a measurement that is no longer fresh: a probe that
// stopped (or a group left behind by a removed one) is FioProbeStale, not depleted forever.
// It fires after `burstDepletedRuns` runs in a row measured the baseline.
local u = import '../lib/util.libsonnet';

{
  prometheusAlerts+:: {
    local c = $._config,
    local volume(metric) = 'max by (%s) (%s{%s})' % [u.volumeBy(c), metric, u.matchers(c)],
    local baseline = volume('fioprobe_volume_baseline_iops'),
    local burst = volume('fioprobe_volume_burst_iops'),
    local onVolume = 'on (%s)' % u.volumeBy(c),
    local burstMatchers = u.matchers(c, ['profile="%s"' % c.burstProfile]),
    local live = |||
      (
        max by (%(probeBy)s) (fioprobe_write_iops{%(burstMatchers)s})
        <= %(onVolume)s group_left ()
        (
          %(baseline)s
          + %(gapFraction)s * (%(burst)s - %(onVolume)s %(baseline)s)
        )
      )
      and %(onVolume)s
      (
        %(burst)s
        > %(onVolume)s
        %(minRatio)s * %(baseline)s
      )
      and on (%(probeBy)s)
      (
        min by (%(probeBy)s) (fioprobe_success{%(burstMatchers)s}) == 1
      )
      unless %(onVolume)s
      fioprobe_info{%(nonBursting)s}
      and on (%(probeBy)s)
      (%(fresh)s)
    ||| % {
      fresh: u.fresh(c),
      probeBy: u.probeBy(c),
      burstMatchers: burstMatchers,
      onVolume: onVolume,
      baseline: baseline,
      burst: burst,
      gapFraction: u.num(c.burstDepletedGapFraction),
      minRatio: u.num(c.burstMinBurstToBaselineRatio),
      nonBursting: u.matchers(c, [
        u.anyOf('volume_type', c.burstNonBurstingVolumeTypes),
      ]),
    },
    groups+: [
      {
        name: 'fioprobe-burst',
        rules: [
          // The condition as a per-probe record, carried through a push gap (a Pushgateway
          // restart hides the group until the probe's next push): the alert's `for` goes on.
          // The measured IOPS while depleted, -1 while the probe pushes and is not.
          u.carried(c, u.burstDepletedRecord, live, otherwise=-1, presentMatchers=['profile="%s"' % c.burstProfile]),
          {
            alert: 'FioProbeBurstCreditsDepleted',
            expr: u.burstDepletedRecord + ' >= 0\n',
            'for': c.windows.burstFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A volume that should burst only delivers its baseline IOPS: burst credits are likely exhausted.',
              description: (
                'The IOPS-ceiling probe of %(probe)s measured {{ $value | printf "%%.0f" }} '
                + 'write IOPS, within the lowest %(gapPercent)s%% of the range between the '
                + "volume's baseline and burst IOPS, in each of its last %(runs)d runs. IO beyond "
                + 'the baseline is throttled until credits are earned back.'
              ) % {
                probe: u.probeText(c),
                gapPercent: u.num(c.burstDepletedGapFraction * 100),
                runs: c.burstDepletedRuns,
              },
            },
          },
        ],
      },
    ],
  },
}
