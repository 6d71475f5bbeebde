// The provisioning probe (`fioprobe provision`, docs/PROVISIONING.md): per StorageClass (and
// node, for a class bound to nodes) a claim and a pod, every step from the claim to the first
// fdatasync timed, both deleted. Its Pushgateway groups (job="fioprobe_provision",
// storageclass[, node], no profile) are selected by their series' names, fioprobe_provision_*,
// with the configured selector, never by job (as every rule of the mixin); the probes' rules
// never see them (lib/util.libsonnet's probePushMatcher). One group, one cause, one alert:
//   Failing      at least provisionFailingRuns of the last provisionOfRuns runs failed, while
//                the group runs (fioprobe_provision_failure_reason_info says why); never for
//                a class skipped on purpose (no fioprobe_provision_success, a skipped_info);
//   Slow         one step took longer than its volume type's threshold (provisioning_info's
//                volume_type; the `default` row without one) in at least provisionSlowRuns of
//                the last provisionSlowOfRuns runs, per step;
//   ObjectsLeft  the last provisionObjectsLeftRuns runs each left their claim or pod after
//                their deadlines (each next run removes them: something holds them);
//   Stale        the group's runs stopped (its last run older than provisionStaleAfterRuns
//                intervals) while its series are there;
//   Missing      an expected group (expectedProvisioning) has no series at all for as long.
// Failing, Slow and ObjectsLeft need a fresh run, Stale an old one, Missing none.
//
// Runs are counted by their numbers (fioprobe_provision_runs_total), as the latency alerts
// count slow runs (lib/util.libsonnet's slowRunsAtLeast): a Pushgateway restart that hides a
// group until its next push changes no count; when the group last ran is remembered through
// such a gap (and for lostGroupMemory after the group left), as the probes' push time is.
local u = import '../lib/util.libsonnet';

{
  prometheusAlerts+:: {
    local c = $._config,
    local w = c.windows,
    local by = u.provisionBy(c),
    local sel = u.matchers(c),
    local identity = std.join(', ', u.volumeLabels),
    local fresh = u.provisionFresh(c),
    local table = c.provisionStepWarningSeconds,
    local types = [t for t in std.objectFields(table) if t != 'default'],
    local threshold(type, step) = std.get(table[type], step, table.default[step]),

    // Per step: the threshold of the group's volume type (fioprobe_provision_info), or the
    // default for a type not listed, a step its type does not list, or a group without the info
    // (a class that was not found). Types of one value share a term.
    local thresholdRule(step) =
      local differing = [t for t in types if threshold(t, step) != table.default[step]];
      local values = std.set([threshold(t, step) for t in differing]);
      {
        record: u.provisionThresholdRecord,
        expr: std.join('\nor\n', [
          '%s * group by (%s) (fioprobe_provision_info{%s})' % [
            u.num(v),
            by,
            u.matchers(c, [u.anyOf('volume_type', [t for t in differing if threshold(t, step) == v])]),
          ]
          for v in values
        ] + [
          '%s * group by (%s) (fioprobe_provision_last_run_timestamp_seconds{%s})'
          % [u.num(table.default[step]), by, sel],
        ]) + '\n',
        labels: { step: step },
      },

    // A per-group record of `live` (which has a value for every group that is there) that
    // keeps its last value while the group is absent from the Pushgateway (a restart without
    // persistence, until its next push) and the group is fresh, as lib/util.libsonnet's
    // carried does for probes: the records below, and what counts runs on them, see no gap.
    local carried(record, live) = {
      record: record,
      expr: |||
        %(live)s
        or
        (
          last_over_time(%(record)s[%(chain)s])
          unless on (%(by)s)
          fioprobe_provision_last_run_timestamp_seconds{%(sel)s}
          and on (%(by)s)
          (%(fresh)s)
        )
      ||| % {
        live: std.rstripChars(live, '\n'),
        record: record,
        chain: w.provisionMemoryChain,
        by: by,
        sel: sel,
        fresh: fresh,
      },
    },
    // The run number of each group while its last run satisfies `condition` and is fresh.
    local runWhile(record, condition) = {
      record: record,
      expr: |||
        %(runs)s
        and on (%(by)s)
        (%(condition)s)
        and on (%(by)s)
        (%(fresh)s)
      ||| % { by: by, runs: u.provisionRunsRecord, condition: condition, fresh: fresh },
    },

    local records = [
      // When the group was last scraped, remembered for lostGroupMemory (probe:push_seen_time_seconds:max).
      {
        record: u.provisionSeenRecord,
        expr: |||
          max by (%(by)s) (timestamp(fioprobe_provision_last_run_timestamp_seconds{%(sel)s}))
          or
          (
            last_over_time(%(record)s[%(chain)s])
            > time() - %(memory)s
          )
        ||| % {
          by: by,
          sel: sel,
          record: u.provisionSeenRecord,
          chain: w.provisionMemoryChain,
          memory: u.num(w.lostGroupMemorySeconds),
        },
      },
      // When its last run (or skip) ended, remembered while its group is (probe:push_time_seconds:max).
      {
        record: u.provisionLastRunRecord,
        expr: |||
          max by (%(by)s) (fioprobe_provision_last_run_timestamp_seconds{%(sel)s})
          or
          (
            last_over_time(%(record)s[%(chain)s])
            and on (%(by)s)
            %(seen)s
          )
        ||| % {
          by: by,
          sel: sel,
          record: u.provisionLastRunRecord,
          chain: w.provisionMemoryChain,
          seen: u.provisionSeenRecord,
        },
      },
    ] + [thresholdRule(step) for step in u.provisionSteps] + [
      // The last run's state, carried through a push gap: its number, its success (-1 while
      // the class is skipped), the objects it left, and each step's duration over its
      // threshold (0 for a step it did not finish).
      carried(u.provisionRunsRecord, 'max by (%s) (fioprobe_provision_runs_total{%s})' % [by, sel]),
      carried(
        u.provisionSuccessRecord,
        'max by (%(by)s) (fioprobe_provision_success{%(sel)s})\nor on (%(by)s)\n-1 * group by (%(by)s) (fioprobe_provision_skipped_info{%(sel)s})'
        % { by: by, sel: sel },
      ),
      carried(u.provisionObjectsRecord, 'max by (%s) (fioprobe_provision_objects_left{%s})' % [by, sel]),
      carried(
        u.provisionStepRatioRecord,
        |||
          max by (%(by)s, step) (fioprobe_provision_last_step_duration_seconds{%(sel)s})
          / on (%(by)s, step)
          %(threshold)s
          or on (%(by)s, step)
          0 * %(threshold)s
        ||| % { by: by, sel: sel, threshold: u.provisionThresholdRecord },
      ),
      runWhile(u.provisionFailedRecord, '%s == 0' % u.provisionSuccessRecord),
      runWhile(u.provisionObjectsLeftRecord, '%s > 0' % u.provisionObjectsRecord),
      // Per step: the run number while the last run's step took longer than its threshold.
      {
        record: u.provisionSlowRecord,
        expr: |||
          (%(ratio)s > 1) * 0
          + on (%(by)s) group_left
          %(runs)s
          and on (%(by)s)
          (%(fresh)s)
        ||| % { by: by, ratio: u.provisionStepRatioRecord, runs: u.provisionRunsRecord, fresh: fresh },
      },
    ],

    // Skipped now (its success -1): a class skipped after failed runs stops failing at once.
    local skipped = '(%s == -1)' % u.provisionSuccessRecord,
    local group = u.provisionText(c),
    local reasonText = u.provisionLookup(
      c,
      'fioprobe_provision_failure_reason_info',
      '{{ range . }} The last run failed with reason {{ .Labels.reason }}'
      + '{{ with .Labels.step }} in step {{ . }}{{ end }}.{{ end }}',
    ),
    local stepText = u.provisionLookup(
      c,
      'fioprobe_provision_last_step_duration_seconds',
      ' The last run took {{ . | first | value | humanizeDuration }} in it.',
      extra=['step="%s"'],
      extraLabels=['$labels.step'],
    ),
    local thresholdText = u.provisionLookup(
      c,
      u.provisionThresholdRecord,
      '{{ . | first | value | humanizeDuration }}',
      pushed=false,
      extra=['step="%s"'],
      extraLabels=['$labels.step'],
    ),
    // Remembered for lostGroupMemory after it left the Pushgateway (as the probes' groups):
    // Stale while it is, Missing once forgotten (its `for` served by then).
    local forgetting = u.num(w.lostGroupMemorySeconds - w.provisionStaleAfterSeconds),

    groups+: [
      {
        name: 'fioprobe-provisioning',
        rules: records + [
          {
            alert: 'FioProbeProvisioningFailing',
            expr: |||
              %(atLeast)s
              unless on (%(by)s)
              %(skipped)s
              and on (%(by)s)
              (%(fresh)s)
            ||| % {
              atLeast: std.rstripChars(u.slowRunsAtLeast(
                c,
                u.provisionFailedRecord,
                w.provisionFailingRuns,
                c.provisionFailingRuns,
                c.provisionOfRuns,
                by=by,
                runs='fioprobe_provision_runs_total',
              ), '\n'),
              by: by,
              skipped: skipped,
              fresh: fresh,
            },
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A StorageClass keeps failing to give a new workload a volume.',
              description: (
                '{{ $value }} of the last %(of)d provisioning runs of %(group)s failed: a claim '
                + 'and a pod of this class did not get to a written, fdatasynced volume within '
                + 'their deadlines, as a new StatefulSet replica would not.%(reason)s'
              ) % { of: c.provisionOfRuns, group: group, reason: reasonText },
            },
          },
          {
            alert: 'FioProbeProvisioningSlow',
            expr: |||
              %(atLeast)s
              and on (%(by)s)
              (%(fresh)s)
            ||| % {
              atLeast: std.rstripChars(u.slowRunsAtLeast(
                c,
                u.provisionSlowRecord,
                w.provisionSlowRuns,
                c.provisionSlowRuns,
                c.provisionSlowOfRuns,
                by=by,
                runs='fioprobe_provision_runs_total',
                perStep=true,
              ), '\n'),
              by: by,
              fresh: fresh,
            },
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A step of giving a new workload a volume takes longer than it should.',
              description: (
                'In {{ $value }} of the last %(of)d provisioning runs of %(group)s, step '
                + '{{ $labels.step }} took longer than %(threshold)s, the threshold for its '
                + 'volume type.%(last)s Workloads that get a new volume of this class wait that '
                + 'long before they start.'
              ) % { of: c.provisionSlowOfRuns, group: group, threshold: thresholdText, last: stepText },
            },
          },
          {
            alert: 'FioProbeProvisioningObjectsLeft',
            expr: |||
              %(atLeast)s
              and on (%(by)s)
              (%(fresh)s)
            ||| % {
              atLeast: std.rstripChars(u.slowRunsAtLeast(
                c,
                u.provisionObjectsLeftRecord,
                w.provisionObjectsLeftRuns,
                c.provisionObjectsLeftRuns,
                c.provisionObjectsLeftRuns,
                by=by,
                runs='fioprobe_provision_runs_total',
              ), '\n'),
              by: by,
              fresh: fresh,
            },
            labels: { severity: 'warning' },
            annotations: {
              summary: "The provisioning probe's claims or pods outlive their deletion.",
              description: (
                'The last {{ $value }} provisioning runs of %(group)s each left their claim or '
                + 'pod behind after their deadlines%(now)s: something keeps them from being '
                + 'deleted (a finalizer, a volume that does not detach or unmount), and each '
                + 'holds a volume until the next run removes it.'
              ) % {
                group: group,
                now: u.provisionLookup(
                  c, 'fioprobe_provision_objects_left', ' ({{ . | first | value }} from the last one)'
                ),
              },
            },
          },
          {
            alert: 'FioProbeProvisioningStale',
            expr: |||
              (
                time() - %(lastRun)s > %(stale)s
                and on (%(identity)s)
                %(expected)s
              )
              or
              (
                time() - %(lastRun)s > %(stale)s
                unless on ()
                %(expected)s
              )
            ||| % {
              lastRun: u.provisionLastRunRecord,
              stale: u.num(w.provisionStaleAfterSeconds),
              identity: identity,
              expected: u.expectedProvisionRecord,
            },
            labels: { severity: 'warning' },
            annotations: {
              summary: 'The provisioning probe of a StorageClass stopped running.',
              description: (
                'The last provisioning run of %(group)s ended {{ $value | humanizeDuration }} ago, '
                + 'more than %(runs)d provisioning intervals: its CronJob does not run, its runs '
                + 'hang, or it cannot reach the Pushgateway. No provisioning alert judges this '
                + 'class meanwhile.'
              ) % { group: group, runs: c.provisionStaleAfterRuns },
            },
          },
          {
            alert: 'FioProbeProvisioningMissing',
            expr: |||
              %(expected)s
              unless on (%(identity)s)
              fioprobe_provision_last_run_timestamp_seconds{%(sel)s}
              unless on (%(identity)s)
              (%(seen)s > time() - %(forgetting)s)
            ||| % {
              expected: u.expectedProvisionRecord,
              identity: identity,
              sel: sel,
              seen: u.provisionSeenRecord,
              forgetting: forgetting,
            },
            'for': w.provisionStaleAfter,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A StorageClass the provisioning probe should run on has no data at all.',
              description: (
                'The provisioning probe of %(group)s is deployed but Prometheus has had none of '
                + 'its series for %(runs)d provisioning intervals (%(for)s): it never ran or '
                + 'pushed, or its Pushgateway group is gone (deleted, or a Pushgateway restart '
                + 'without persistence) while it does not run.'
              ) % { group: group, runs: c.provisionStaleAfterRuns, 'for': w.provisionStaleAfter },
            },
          },
        ],
      },
    ],
  },
}
