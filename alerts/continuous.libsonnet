// The continuous stream's alerts (`fioprobe continuous`, docs/CONTINUOUS.md): a small write +
// fdatasync about once a second per target, scraped every 15 s. Where the scheduled probes
// judge runs, these judge every fsync, and see a hang while it lasts:
//   FioProbeContinuousSyncHang         an operation outstanding for 30 s at a scrape (etcd
//                                      disks: critical; other volumes: a warning at 60 s)
//   FioProbeContinuousErrorBudgetBurn  the objective (99 % of fdatasyncs within 10 ms on etcd
//                                      disks, the volume type's threshold elsewhere) is being
//                                      missed fast: multiwindow, multi-burn-rate alerts as in
//                                      the Google SRE workbook (config.libsonnet's
//                                      continuousBurnRates); critical rows page on etcd disks
//                                      only, every row is a warning elsewhere
//   FioProbeContinuousStall            etcd disks: 5 fdatasyncs above 10 ms, or 5 s stalled,
//                                      within a minute
//   FioProbeContinuousMissing          an expected stream has no series
//   FioProbeContinuousFailing          every operation of the stream has failed for
//                                      continuousFailingAfter (etcd disks: critical; other
//                                      volumes: a warning), naming the reason
//
// A stream is (cluster, storageclass, node): its pod, instance and namespace change when it
// restarts and are summed away (never `job` or `instance`, which OpenShift renames). Which
// streams are on etcd disks is their published role, probe:fioprobe_etcd_disk:info
// (alerts/recording.libsonnet, from fioprobe_continuous_info{etcd_disk} as well as from the
// pushed fioprobe_info), never the shape of their labels.
//
// Restarts and gaps change no alert. A scraped series ends with a staleness marker at the
// first failed scrape, so anything read at one instant (the in-flight gauge, the stream's
// info) vanishes at once; hence:
//   - range functions wherever possible: rates, counts over the stall window, and the last
//     fioprobe_continuous_info within continuousGapTolerance for a stream's threshold, all
//     carry on across a gap and across a new pod (sum by stream: the old pod's series and the
//     new one's add up; counters that restart from 0 are resets, which rate() and the stall
//     counts handle);
//   - keep_firing_for: continuousGapTolerance on every alert but Missing (one reads an instant,
//     the hang gauge; the others short windows), so a gap, a restarted pod or a Prometheus
//     restart in the middle of an incident neither resolves nor re-notifies it;
//   - no `for` but Missing's: nothing is pending that a gap could reset. Missing looks for
//     any info sample over continuousMissingAfter, longer than any tolerated gap, only at a
//     stream expected for that long already (a new install, a node that just got etcd's
//     role: its pod pulls, mounts and starts meanwhile), then waits its `for` on top: a
//     stream that never started and one that stopped both fire after 5m and 2m more.
local u = import '../lib/util.libsonnet';

{
  local c = $._config,
  local by = u.volumeBy(c),
  local etcdRole = u.etcdDiskRecord,
  local objective = u.streamObjectiveRecord,
  local gap = c.continuousGapTolerance,
  local budget = c.windows.continuousBudget,
  local percent(ratio) = u.num(ratio * 100) + '%',

  // Every threshold a stream can have: the le values the rules read (a real Prometheus then
  // selects 5 or 6 bucket series per stream, not 21).
  local typeThresholds = c.storageClassFsyncP99WarningSeconds,
  local knownTypes = std.objectFields(typeThresholds),
  local thresholdValues = std.set([typeThresholds[t] for t in knownTypes]),
  local allThresholds = std.set(
    thresholdValues + [c.continuousEtcdObjectiveSeconds, c.storageClassFsyncP99DefaultWarningSeconds]
  ),
  local leMatcher = u.anyOf('le', [u.num(t) for t in allThresholds]),

  local indent(text, n) =
    std.strReplace(std.rstripChars(text, '\n'), '\n', '\n' + std.repeat(' ', n)),

  // The streams (one series each) whose last fioprobe_continuous_info within the gap tolerance
  // matches `extra`.
  local streams(extra) =
    'group by (%s) (last_over_time(fioprobe_continuous_info{%s}[%s]))' % [by, u.matchers(c, extra), gap],
  // ... with value `seconds` and label le="<seconds>", the bucket that counts the fsyncs
  // meeting it.
  local threshold(seconds, selection) =
    'label_replace(%s * %s, "le", "%s", "", "")' % [u.num(seconds), selection, u.num(seconds)],

  // The increase of each counter series over `window`, without rate()'s extrapolation to the
  // window's edges (with 15 s scrapes increase() would count 4 slow fsyncs in a minute as
  // 5.3): the difference between the highest and lowest sample. A series that was reset
  // (the same pod's counters restarting from 0) takes increase() instead, for that window.
  // Staleness markers are not samples, so a gap in the scrapes changes nothing, and a new
  // pod's series counts from its first sample.
  local increase(selector, window) =
    |||
      (
        max_over_time(%(s)s[%(w)s]) - min_over_time(%(s)s[%(w)s])
        unless
        resets(%(s)s[%(w)s]) > 0
      )
      or
      increase(%(s)s[%(w)s])
    ||| % { s: selector, w: window },

  // The fdatasyncs of each stream that met its objective, from `counted`, a function of a
  // bucket selector giving per-series counts: the bucket of the stream's own threshold.
  local metObjective(counted) =
    |||
      max by (%(by)s) (
        sum by (%(by)s, le) (
          %(counted)s
        )
        and on (%(by)s, le)
        %(objective)s
      )
    ||| % {
      by: by,
      counted: indent(counted('fioprobe_continuous_sync_latency_seconds_bucket{%s}' % u.matchers(c, [leMatcher])), 4),
      objective: objective,
    },

  local windows = std.set([b.long for b in c.continuousBurnRates] + [b.short for b in c.continuousBurnRates]),
  local count = 'fioprobe_continuous_sync_latency_seconds_count{%s}' % u.matchers(c),
  local stallWindow = c.continuousStallWindow,

  prometheusRules+:: {
    groups+: [
      {
        // Before the alerts read them (in promtool's order; a real Prometheus evaluates groups
        // independently, so an alert may see them one evaluation later).
        name: 'fioprobe.continuous',
        rules: [
          {
            // Each stream's objective: on an etcd disk the etcd threshold, elsewhere the one of
            // its volume type (the probes' StorageClass table, and its default for every other
            // type).
            record: objective,
            expr: |||
              %(etcd)s
              or
              (
                (
                  %(types)s
                )
                unless on (%(by)s)
                %(etcdRole)s
              )
            ||| % {
              by: by,
              etcdRole: etcdRole,
              etcd: threshold(
                c.continuousEtcdObjectiveSeconds,
                '%s\nand on (%s)\n%s' % [streams([]), by, etcdRole]
              ),
              types: indent(std.join('\nor\n', [
                threshold(value, streams([u.anyOf('volume_type', [t for t in knownTypes if typeThresholds[t] == value])]))
                for value in thresholdValues
              ] + [
                threshold(
                  c.storageClassFsyncP99DefaultWarningSeconds,
                  streams(if knownTypes == [] then [] else ['volume_type!~"%s"' % std.join('|', knownTypes)])
                ),
              ]), 4),
            },
          },
        ] + [
          {
            // fdatasyncs slower than the objective within the stall window.
            record: u.streamSlowCountRecord(stallWindow),
            expr: |||
              sum by (%(by)s) (
                %(all)s
              )
              - on (%(by)s)
              %(met)s
            ||| % {
              by: by,
              all: indent(increase(count, stallWindow), 2),
              met: std.rstripChars(metObjective(function(s) increase(s, stallWindow)), '\n'),
            },
          },
          {
            // Seconds with an operation outstanding beyond the stream's stall threshold
            // (--stall-threshold, 10 ms by default) within the stall window.
            record: u.streamStallRecord(stallWindow),
            expr: |||
              sum by (%(by)s) (
                %(stall)s
              )
            ||| % {
              by: by,
              stall: indent(increase('fioprobe_continuous_stall_seconds_total{%s}' % u.matchers(c), stallWindow), 2),
            },
          },
        ],
      },
      {
        // The slow fraction over every window of the burn-rate alerts. Its own group: the day
        // long windows cost the most (see docs/MIXIN.md), and a longer `interval` for this
        // group changes them by no more than that interval, where the stall's minute needs
        // every evaluation.
        name: 'fioprobe.continuous.burn',
        rules: [
          {
            // Fraction of the completed fdatasyncs slower than the stream's objective over
            // `window`, summed over its pods: the error ratio the burn rates compare. No
            // value while the window holds no completed fdatasync (a stream hung throughout:
            // FioProbeContinuousSyncHang's business).
            record: u.streamSlowRatioRecord(window),
            expr: |||
              1 - (
                %(met)s
                /
                (sum by (%(by)s) (rate(%(count)s[%(window)s])) > 0)
              )
            ||| % {
              by: by,
              count: count,
              window: window,
              met: indent(metObjective(function(s) 'rate(%s[%s])' % [s, window]), 2),
            },
          }
          for window in windows
        ],
      },
    ],
  },

  prometheusAlerts+:: {
    local stream = u.streamText(c),
    local objectiveText = u.streamLookup(c, objective, '{{ . | first | value | humanizeDuration }}'),
    local hang(severity, seconds, onEtcd, consequence) = {
      alert: 'FioProbeContinuousSyncHang',
      expr: |||
        max by (%(by)s) (fioprobe_continuous_inflight_seconds{%(matchers)s}) >= %(seconds)s
        %(op)s on (%(by)s)
        %(etcdRole)s
      ||| % {
        by: by,
        matchers: u.matchers(c),
        seconds: u.num(seconds),
        op: if onEtcd then 'and' else 'unless',
        etcdRole: etcdRole,
      },
      keep_firing_for: gap,
      labels: { severity: severity },
      annotations: {
        summary: if onEtcd
        then 'An fdatasync on a disk that holds etcd has not completed for tens of seconds.'
        else 'An fdatasync on a volume has not completed for a minute or more.',
        description: (
          'An operation (a small write and its fdatasync) of %(stream)s has been outstanding '
          + 'for {{ $value | humanizeDuration }} (alert from %(seconds)s s): the disk does not '
          + 'complete it. %(consequence)s'
        ) % { stream: stream, seconds: u.num(seconds), consequence: consequence },
      },
    },
    // A stream that fails every operation: it measures nothing, so the other stream alerts
    // stay silent however bad the disk is. The reason (fioprobe_continuous_failing_seconds'
    // label) says where to look: the disk (io_error, no_space, read_only) or the directory
    // (unsafe_target: a symlink, or a file or directory the stream did not create, planted by
    // someone else; no_directory).
    local failing(severity, onEtcd) = {
      alert: 'FioProbeContinuousFailing',
      expr: |||
        max by (%(by)s, reason) (fioprobe_continuous_failing_seconds{%(matchers)s}) >= %(after)s
        %(op)s on (%(by)s)
        %(etcdRole)s
      ||| % {
        by: by,
        matchers: u.matchers(c, ['reason!=""']),
        after: u.num(u.seconds(c.continuousFailingAfter)),
        op: if onEtcd then 'and' else 'unless',
        etcdRole: etcdRole,
      },
      keep_firing_for: gap,
      labels: { severity: severity },
      annotations: {
        summary: if onEtcd
        then 'The continuous stream of a disk that holds etcd fails every operation.'
        else 'A continuous fsync stream fails every operation.',
        description: (
          'Every operation (a small write and its fdatasync, or its set-up) of %(stream)s has '
          + 'failed for {{ $value | humanizeDuration }} (alert from %(after)s), the latest with '
          + 'reason {{ $labels.reason }}: '
          + '{{ if eq $labels.reason "unsafe_target" }}the stream refuses its directory (a '
          + 'symlink, or a file or directory it did not create: planted by someone else or left '
          + 'by another tool); the disk may be fine, the directory is not'
          + '{{ else if eq $labels.reason "no_directory" }}its directory does not exist'
          + '{{ else if eq $labels.reason "io_error" }}the disk returns I/O errors'
          + '{{ else if eq $labels.reason "no_space" }}the filesystem is full'
          + '{{ else if eq $labels.reason "read_only" }}the filesystem is read-only'
          + '{{ else }}its log says why{{ end }}. '
          + 'The stream measures nothing meanwhile: hangs, stalls and slow fsyncs of that disk go unseen.'
        ) % { stream: stream, after: c.continuousFailingAfter },
      },
    },
    // One rule per row of continuousBurnRates. `scope`: 'etcd' (the row's severity, on etcd
    // disks), 'other' (a warning, on every other stream), or 'all' (a row that is a warning
    // anyway: one rule for every stream).
    local burn(b, scope) = {
      local onEtcd = scope == 'etcd',
      alert: 'FioProbeContinuousErrorBudgetBurn',
      expr: |||
        %(long)s / %(budget)s > %(factor)s
        and on (%(by)s)
        %(short)s / %(budget)s > %(factor)s
        and on (%(by)s)
        sum by (%(by)s) (increase(%(count)s[%(longWindow)s])) >= %(minSyncs)s
      ||| % {
        by: by,
        long: u.streamSlowRatioRecord(b.long),
        short: u.streamSlowRatioRecord(b.short),
        budget: u.num(budget),
        factor: u.num(b.factor),
        count: count,
        longWindow: b.long,
        minSyncs: u.num(c.continuousBurnMinSyncs),
      } + (
        if scope == 'all' then ''
        else '%s on (%s)\n%s\n' % [if onEtcd then 'and' else 'unless', by, etcdRole]
      ),
      keep_firing_for: gap,
      labels: { severity: if onEtcd then b.severity else 'warning', long: b.long, short: b.short },
      annotations: {
        summary: {
          etcd: 'The disk that holds etcd misses its fsync latency objective fast enough to spend its error budget early.',
          other: 'A volume misses its fsync latency objective fast enough to spend its error budget early.',
          all: 'A disk misses its fsync latency objective fast enough to spend its error budget early.',
        }[scope],
        description: (
          'Over the last %(long)s, %(stream)s had {{ $value | printf "%%.1f" }} times as many '
          + 'fdatasyncs slower than %(threshold)s as its objective allows (%(objective)s within it, '
          + '%(budget)s slower), and still has over the last %(short)s: at %(factor)sx, a 30-day '
          + 'error budget is gone in %(lasts)s. %(consequence)s'
        ) % {
          long: b.long,
          short: b.short,
          stream: stream,
          threshold: if onEtcd then '{{ %s | humanizeDuration }}' % u.num(c.continuousEtcdObjectiveSeconds) else objectiveText,
          objective: percent(c.continuousObjectiveRatio),
          budget: percent(budget),
          factor: u.num(b.factor),
          lasts: local hours = std.floor(720 / b.factor + 0.5);
                if hours % 24 == 0 then '%d days' % (hours / 24) else '%d hours' % hours,
          consequence: {
            etcd: 'etcd commits slower than it should on this disk: slow API requests, and leader elections if it gets worse.',
            other: 'Applications that sync their writes on this StorageClass wait that long.',
            all: 'On a disk that holds etcd, etcd commits that slowly; elsewhere applications that sync their writes wait that long.',
          }[scope],
        },
      },
    },

    groups+: [
      {
        // What one scrape or one minute shows: an operation hanging now, a stall, a stream
        // that is not there.
        name: 'fioprobe-continuous',
        rules: [
          hang(
            'critical',
            c.continuousHangCriticalSeconds,
            true,
            'etcd on this disk cannot commit: its leader steps down or the member falls behind, '
            + 'and API requests time out.',
          ),
          hang(
            'warning',
            c.continuousStorageClassHangWarningSeconds,
            false,
            'Applications that sync their writes on this StorageClass hang with it.',
          ),
        ] + [
          {
            alert: 'FioProbeContinuousStall',
            // $value: the seconds stalled, whichever of the two conditions held.
            expr: |||
              %(stall)s
              and on (%(by)s)
              (
                %(slow)s >= %(syncs)s
                or
                %(stall)s >= %(seconds)s
              )
              and on (%(by)s)
              %(etcdRole)s
            ||| % {
              by: by,
              stall: u.streamStallRecord(stallWindow),
              slow: u.streamSlowCountRecord(stallWindow),
              syncs: u.num(c.continuousStallSlowSyncs),
              seconds: u.num(c.continuousStallSeconds),
              etcdRole: etcdRole,
            },
            keep_firing_for: gap,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'The disk that holds etcd stalled for seconds.',
              description: (
                'Within %(window)s, %(stream)s was stalled (an operation outstanding beyond its '
                + 'stall threshold) for {{ $value | humanizeDuration }}, and %(slow)s of its '
                + 'fdatasyncs took longer than {{ %(threshold)s | humanizeDuration }} (alert from '
                + '%(seconds)s s or %(syncs)s slow fdatasyncs). etcd on this disk waited as long to '
                + 'commit; a stall near its election timeout (1 s by default) costs it its leader.'
              ) % {
                window: stallWindow,
                stream: stream,
                slow: u.streamLookup(c, u.streamSlowCountRecord(stallWindow), '{{ . | first | value }}'),
                threshold: u.num(c.continuousEtcdObjectiveSeconds),
                syncs: u.num(c.continuousStallSlowSyncs),
                seconds: u.num(c.continuousStallSeconds),
              },
            },
          },
        ] + [
          failing('critical', true),
          failing('warning', false),
        ] + [
          {
            alert: 'FioProbeContinuousMissing',
            // Expected streams carry no cluster label (like the expected probes): each
            // cluster's Prometheus evaluates its own.
            expr: |||
              %(expected)s
              unless on (storageclass, node)
              last_over_time(fioprobe_continuous_info{%(matchers)s}[%(after)s])
              and
              %(expected)s offset %(after)s
            ||| % {
              expected: u.expectedStreamRecord,
              matchers: u.matchers(c),
              after: c.continuousMissingAfter,
            },
            'for': gap,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A deployed continuous fsync stream has no data in Prometheus.',
              description: (
                '%(stream)s is deployed but Prometheus has scraped none of its series for '
                + '%(after)s and %(gap)s more: its pod does not run (not scheduled, crashing, '
                + 'its volume not mounted) or is not scraped (PodMonitor, NetworkPolicy). '
                + 'Hangs and stalls of that disk go unseen meanwhile.'
              ) % {
                stream: std.asciiUpper(stream[0]) + stream[1:],
                after: c.continuousMissingAfter,
                gap: gap,
              },
            },
          },
        ],
      },
      {
        // The objective over hours (a group of its own: its unit tests need a day of data,
        // evaluated every minute, where the other group's need every 15 s).
        name: 'fioprobe-continuous-burn',
        rules: std.flattenArrays([
          if b.severity == 'warning' then [burn(b, 'all')] else [burn(b, 'etcd'), burn(b, 'other')]
          for b in c.continuousBurnRates
        ]),
      },
    ],
  },
}
