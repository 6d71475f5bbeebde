// Helpers of the monitoring mixin, shared by its rules (alerts/) and its dashboards
// (dashboards/). Functions of facts only: whatever takes a label name, selector or threshold
// takes the mixin's _config, so that none is written down anywhere but config.libsonnet.
{
  // The operations fio measures, each with its own metric names (fioprobe_<op>_latency_seconds,
  // fioprobe_<op>_iops, ...: the metric contract keeps them apart, never as a label), in the
  // order rules and panels list them.
  ops:: ['sync', 'write', 'read'],
  // How panels and descriptions name each: sync is fio's fsync/fdatasync latency, write and
  // read are completion latencies (clat).
  opTitle:: { sync: 'fsync', write: 'write completion', read: 'read completion' },

  // PromQL matchers for inside braces, skipping empty ones (a configured selector may be
  // empty, and `{, a="b"}` is not PromQL).
  matcherList(list):: std.join(', ', std.filter(function(m) m != '', list)),

  // A distributed benchmark's group (`fioprobe distributed`: benchmark and storageclass, no
  // profile) holds fioprobe_distributed_* series only, but the Pushgateway adds
  // push_time_seconds to it as to every group: without this matcher the probe rules would
  // take a benchmark pushed once for a probe that stopped (Stale). Not configurable: no
  // selector a deployment chooses may let probe rules see benchmarks.
  probeGroupMatcher:: 'benchmark=""',
  benchmarkMatcher:: 'benchmark!=""',

  // The configured selector of fioprobe's pushed series plus `extra`: probe groups only.
  matchers(c, extra=[]):: $.matcherList([c.fioprobeSelector, $.probeGroupMatcher] + extra),

  // A provisioning group (`fioprobe provision`: job="fioprobe_provision", storageclass[, node],
  // no profile) holds fioprobe_provision_* series, whose names no probe rule reads, but the
  // Pushgateway adds push_time_seconds to it as to every group, and the rules select by
  // `matchers`, never by job: without this matcher a provisioning group would be a probe with
  // an empty profile (its push time remembered, Stale when it stops, carried values kept for
  // it). Every probe's group has a profile. Only on push_time_seconds: the continuous stream's
  // scraped series carry a storageclass and no profile, so on every probe matcher it would
  // blind the stream's rules and panels. Not configurable, as probeGroupMatcher.
  probePushMatcher:: 'profile!=""',
  // The selector of the probes' push_time_seconds: `matchers` plus probePushMatcher (which a
  // matcher on one profile in `extra` already implies).
  pushMatchers(c, extra=[])::
    local oneProfile = std.length([m for m in extra if std.startsWith(m, 'profile="')]) > 0;
    $.matchers(c, (if oneProfile then [] else [$.probePushMatcher]) + extra),

  // A matcher for a label that takes any of `values` (plain names, not patterns): `=` for one
  // value, as a regexp on a static string costs a regexp match for nothing (pint's
  // promql/regexp), `=~` for several.
  anyOf(label, values)::
    if std.length(values) == 1 then '%s="%s"' % [label, values[0]]
    else '%s=~"%s"' % [label, std.join('|', values)],

  // The Pushgateway grouping key after job, in the order fioprobe pushes it; node only on
  // node-local probes. exporter/fioprobe/grouping.py's PROBE_LABELS (tests/repo/test_single_home.py
  // holds the two equal). Never job/instance (see config).
  groupingLabels:: ['storageclass', 'profile', 'node'],

  // The labels that identify one probed volume: the grouping key without profile (every
  // profile of a StorageClass, or of a node-local path, probes the same kind of volume).
  volumeLabels:: std.filter(function(label) label != 'profile', $.groupingLabels),

  // The labels that identify one probe within one cluster: its volume's, then profile.
  probeLabels:: $.volumeLabels + ['profile'],

  // The labels that identify one probe, across clusters.
  probeBy(c):: std.join(', ', [c.clusterLabel] + $.probeLabels),

  // The disks that hold etcd: one series per target (cluster, storageclass, node) whose
  // configuration publishes etcd_disk="true" (alerts/recording.libsonnet). The etcd rules
  // join on it with volumeBy; nothing selects etcd disks by label shape.
  etcdDiskRecord:: 'probe:fioprobe_etcd_disk:info',
  // When each probe last pushed a role (etcd_disk="true"|"false"), and when each stream's role
  // was last scraped: the statements the role is computed from, latest first.
  etcdDiskPushedRecord:: 'probe:fioprobe_etcd_disk_stated:push_time_seconds',
  etcdDiskScrapedRecord:: 'stream:fioprobe_etcd_disk_stated:scrape_time_seconds',

  // The labels that identify one probed volume across clusters: volume-model gauges join on
  // these.
  volumeBy(c):: std.join(', ', [c.clusterLabel] + $.volumeLabels),

  // Anchors are the lower-cased alert names: GitHub's anchors for docs/runbooks.md headings.
  // Added to every alert by alerts/alerts.libsonnet, from the alert's name.
  runbookURL(c, alert):: '%s#%s' % [c.runbookURLBase, std.asciiLower(alert)],

  // Alertmanager template text naming the probe in descriptions; node and cluster are
  // mentioned only when the series has them.
  probeText(c)::
    'storageclass {{ $labels.storageclass }}, profile {{ $labels.profile }}'
    + '{{ with $labels.node }} on node {{ . }}{{ end }}'
    + '{{ with $labels.%s }} in cluster {{ . }}{{ end }}' % c.clusterLabel,

  // A number as PromQL and template text. Plain %s would print jsonnet's 17 significant
  // digits (0.032000000000000001); 10 are exact for any threshold anyone writes down.
  // jsonnet 0.18's %g fails on 0 (it takes the logarithm), hence the special case.
  num(x):: if x == 0 then '0' else '%.10g' % x,

  // The latency histograms' bucket boundaries (the metric contract's `le`, the exporter's
  // metrics.LATENCY_BUCKETS_SECONDS). The continuous stream's objectives count the fsyncs at
  // or below one boundary, so every latency they use must be one of these.
  latencyBuckets:: [
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.002,
    0.004,
    0.005,
    0.008,
    0.01,
    0.016,
    0.02,
    0.032,
    0.064,
    0.128,
    0.256,
    0.512,
    1.024,
    2.048,
    4.096,
    8.192,
  ],

  // --- The continuous stream (alerts/continuous.libsonnet) -------------------------------------
  // A stream is identified like a probed volume (volumeBy: cluster, storageclass, node), with no
  // profile; its pod, namespace and the other target labels change when it restarts and are
  // summed away. Recording rules at that level are named stream:...

  // The stream's latency objective: value the threshold in seconds, label `le` the bucket
  // boundary that counts the fsyncs meeting it (the etcd objective on etcd disks, the volume
  // type's threshold elsewhere).
  streamObjectiveRecord:: 'stream:fioprobe_continuous_sync_latency_seconds:objective',
  // Fraction of the stream's completed fdatasyncs slower than its objective, over `window`.
  streamSlowRatioRecord(window):: 'stream:fioprobe_continuous_sync_slow:ratio_rate%s' % window,
  // fdatasyncs slower than the objective, and seconds stalled, within the stall window.
  streamSlowCountRecord(window):: 'stream:fioprobe_continuous_sync_slow:increase%s' % window,
  streamStallRecord(window):: 'stream:fioprobe_continuous_stall_seconds:increase%s' % window,
  // Static series of the streams the configuration deploys (group fioprobe.expected).
  expectedStreamRecord:: 'stream:fioprobe_continuous_expected:info',

  // Alertmanager template text naming a stream in descriptions.
  streamText(c)::
    'the continuous stream of storageclass {{ $labels.storageclass }}'
    + '{{ with $labels.node }} on node {{ . }}{{ end }}'
    + '{{ with $labels.%s }} in cluster {{ . }}{{ end }}' % c.clusterLabel,

  // Go template: the first value of a query on the alert's own stream, through `format`, as
  // probeLookup. `scraped`: a fioprobe_continuous_* series (the configured selector applies),
  // not a stream: recording rule.
  streamLookup(c, metric, format, scraped=false)::
    local stream = [c.clusterLabel + '="%s"', 'storageclass="%s"', 'node="%s"'];
    '{{ with printf `' + metric + '{'
    + (if scraped then $.matchers(c, stream) else $.matcherList(stream))
    + '}` $labels.' + c.clusterLabel + ' $labels.storageclass $labels.node | query }}'
    + format + '{{ end }}',

  // Name of the shared latency quantile recording rule (see recording.libsonnet).
  quantileRecord(op, quantile):: 'probe:fioprobe_%s_latency_seconds:%s' % [op, quantile],

  // Seconds as a Prometheus duration ("1h30m", "12s500ms"): windows are computed in seconds
  // from the probe interval, and Prometheus takes only integer units.
  duration(seconds)::
    local ms = std.floor(seconds * 1000 + 0.5);
    assert ms > 0 : 'a window of %s s is not a duration' % seconds;
    local units = [['h', 3600000], ['m', 60000], ['s', 1000], ['ms', 1]];
    local part(rest, i) =
      if i == std.length(units) then ''
      else
        local n = std.floor(rest / units[i][1]);
        (if n > 0 then '%d%s' % [n, units[i][0]] else '') + part(rest - n * units[i][1], i + 1);
    part(ms, 0),

  // A Prometheus duration ("1w", "1d", "90m", "1h30m") in seconds, for the checks of
  // alerts/windows.libsonnet.
  seconds(text)::
    local factors = { y: 31536000, w: 604800, d: 86400, h: 3600, m: 60, s: 1, ms: 0.001 };
    local digits = std.set(std.stringChars('0123456789'));
    local parse(chars, i, number, total) =
      if i == std.length(chars) then
        assert number == '' : 'duration %s ends without a unit' % text;
        total
      else if std.member(digits, chars[i]) then parse(chars, i + 1, number + chars[i], total)
      else
        local unit = if chars[i] == 'm' && i + 1 < std.length(chars) && chars[i + 1] == 's' then 'ms' else chars[i];
        assert number != '' && std.objectHas(factors, unit) : 'not a Prometheus duration: %s' % text;
        parse(chars, i + std.length(unit), '', total + std.parseInt(number) * factors[unit]);
    parse(std.stringChars(text), 0, '', 0),

  // Name of the per-probe recording rule holding the last run's fio p99 of `op`.
  lastRunRecord(op):: 'probe:fioprobe_last_%s_latency_seconds:p99' % op,

  // Static series of the probes the configuration deploys (alerts/recording.libsonnet's
  // group fioprobe.expected), which FioProbeStale and FioProbeMissing compare with: one per
  // probe {storageclass, profile, node (node-local only)}, and one per per-node probe
  // {storageclass, profile}, expected on every node of perNodeNodesRecord.
  expectedRecord:: 'probe:fioprobe_expected:info',
  expectedPerNodeRecord:: 'probe:fioprobe_expected_per_node:info',
  // One series per node (and cluster) that runs, or should run, the per-node probes.
  perNodeNodesRecord:: 'node:fioprobe_per_node:info',
  // One series per such node and per-node probe {storageclass, profile}: what it should push.
  expectedOnNodeRecord:: 'node:fioprobe_expected_per_node:info',

  // The etcd probes found by role: one series per {storageclass, profile}; the etcd nodes (the
  // node inventory's by role, or those that push them), remembered through gaps; and one series
  // per etcd node and probe: what it should push.
  expectedEtcdRecord:: 'probe:fioprobe_expected_etcd:info',
  etcdInventoryRecord:: 'node:fioprobe_etcd_inventory:info',
  etcdNodesRecord:: 'node:fioprobe_etcd:info',
  expectedOnEtcdNodeRecord:: 'node:fioprobe_expected_etcd:info',

  // The labels that identify one node across clusters.
  nodeBy(c):: std.join(', ', [c.clusterLabel, 'node']),

  // The recorded time of the probe's last push (any outcome), from the Pushgateway's own
  // push_time_seconds of the probe's group(s).
  pushTimeRecord:: 'probe:push_time_seconds:max',
  // When the probe's group was last scraped from the Pushgateway: the lost-group memory counts
  // from there.
  pushSeenRecord:: 'probe:push_seen_time_seconds:max',
  // The probe's last fioprobe_success (min over its series), carried through a push gap.
  successRecord:: 'probe:fioprobe_success:min',
  // The probe's run number while its last run failed (and is fresh).
  failedRunRecord:: 'probe:fioprobe_runs_total:failed',
  // The burst-ceiling probe's write IOPS while they sit at the baseline (carried likewise).
  burstDepletedRecord:: 'probe:fioprobe_write_iops:depleted',
  // The last run's fsync p99 over its siblings' median while it is an outlier (carried).
  outlierRecord:: 'probe:fioprobe_last_sync_latency_seconds:sibling_ratio',
  // The nodes the node inventory lists (kube-state-metrics), remembered through its gaps.
  perNodeInventoryRecord:: 'node:fioprobe_per_node_inventory:info',

  // "The probe pushed recently": its last push (success or failure) is younger than the
  // stale threshold. Every alert on pushed gauges requires it, so frozen values of a probe
  // that stopped never keep an alert firing; that probe is FioProbeStale instead.
  fresh(c)::
    'time() - %s < %s' % [$.pushTimeRecord, $.num(c.windows.staleAfterSeconds)],

  // A per-probe recording rule of `live` (an expression of the probe's pushed series, by
  // probe) that keeps its last value while the probe's group is absent from the Pushgateway
  // (a restart without persistence or a new pod, until the probe's next push) and the probe
  // is fresh: rules on it see no gap, and an alert's `for` goes on. Once the group is back,
  // `live` alone decides. `live` must have a value for every probe whose group is there
  // (the last value is what is carried, so an absence would carry an older one); where it is
  // a filter, `otherwise` is the value recorded for the probes of `presentMatchers` it drops.
  carried(c, record, live, otherwise=null, presentMatchers=[]):: {
    record: record,
    expr: |||
      %(live)s
      or
      (
        last_over_time(%(record)s[%(chain)s])
        unless on (%(by)s)
        push_time_seconds{%(matchers)s}
        and on (%(by)s)
        (%(fresh)s)
      )
    ||| % {
      live: std.rstripChars(live, '\n') + (
        if otherwise == null then ''
        else '\nor on (%s)\n%s * group by (%s) (push_time_seconds{%s})'
             % [$.probeBy(c), $.num(otherwise), $.probeBy(c), $.pushMatchers(c, presentMatchers)]
      ),
      record: record,
      chain: c.windows.memoryChain,
      by: $.probeBy(c),
      matchers: $.pushMatchers(c),
      fresh: $.fresh(c),
    },
  },

  // "At least `slow` of the last `of` runs were slow", from a recorded series that holds
  // the probe's run number (fioprobe_runs_total) while its current run is slow and fresh,
  // and is absent otherwise. Over `window` ((of - 1) intervals plus the push margin):
  //   distinct slow runs = changes() + 1 (a fast run in between is a gap, not a change);
  //   the run just before the last `of` is in view during the margin after a push; if it
  //   was slow it is the oldest number, and it is taken off again by comparing with the
  //   probe's current run number (the highest in the window, so a Pushgateway restart that
  //   hides the series until the next push neither resolves nor re-fires the alert).
  // $value is the number of slow runs among the last `of`.
  // `by` and `runs`: the identity and run counter of another kind of group (provisioning's);
  // `perStep`: the record has a label of its own besides `by` (a provisioning step), many
  // series per group, each counted alone.
  slowRunsAtLeast(c, record, window, slow, of, by=$.probeBy(c), runs='fioprobe_runs_total', perStep=false)::
    |||
      (
        changes(%(record)s[%(window)s]) + 1
        - (
          min_over_time(%(record)s[%(window)s])
          <= bool on (%(by)s)%(group)s
          (max by (%(by)s) (max_over_time(%(runs)s{%(matchers)s}[%(window)s])) - %(of)d)
        )
      ) >= %(slow)d
    ||| % {
      record: record,
      window: window,
      by: by,
      group: if perStep then ' group_left ()' else '',
      runs: runs,
      matchers: $.matchers(c),
      of: of,
      slow: slow,
    },

  // Go template: the first value of a PromQL query on the alert's own probe (absent labels
  // render as "", which matches series without them), through `format` ("{{ . | first |
  // value | humanizeDuration }}" and the like).
  // `pushed`: the metric is a pushed fioprobe_* one (the configured selector applies), not
  // a recording rule (whose other labels were aggregated away).
  probeLookup(c, metric, format, pushed=true)::
    local probe = [c.clusterLabel + '="%s"', 'storageclass="%s"', 'profile="%s"', 'node="%s"'];
    '{{ with printf `' + metric + '{'
    + (if pushed then $.matchers(c, probe) else $.matcherList(probe))
    + '}` $labels.' + c.clusterLabel + ' $labels.storageclass $labels.profile $labels.node | query }}'
    + format + '{{ end }}',

  // --- The provisioning probe (alerts/provisioning.libsonnet) ---------------------------------
  // A provisioning group is one StorageClass, and node for a class bound to nodes: the labels
  // of a probed volume (volumeBy), with no profile. Its series are told from the probes' by
  // their names (fioprobe_provision_*), never by job. Records at that level: provision:...

  // The steps of a provisioning run, in order: exporter/fioprobe/provision/steps.py's Step
  // (tests/mixin/test_provisioning.py holds the two equal).
  provisionSteps:: [
    'created',
    'scheduled',
    'bound',
    'attached',
    'running',
    'written',
    'pod_deleted',
    'detached',
    'volume_deleted',
  ],
  // The labels that identify one provisioning group across clusters.
  provisionBy(c):: $.volumeBy(c),
  // When the group was last scraped from the Pushgateway (the memory's clock, as pushSeenRecord).
  provisionSeenRecord:: 'provision:fioprobe_provision_seen_time_seconds:max',
  // When the group's last run (or skip) ended, remembered for lostGroupMemory after its group
  // left the Pushgateway (as pushTimeRecord).
  provisionLastRunRecord:: 'provision:fioprobe_provision_last_run_timestamp_seconds:max',
  // The last run's number, its success (1, 0, or -1 while the class is skipped), the objects
  // it left, and per step its duration over the step's threshold: carried through a push gap.
  provisionRunsRecord:: 'provision:fioprobe_provision_runs_total:max',
  provisionSuccessRecord:: 'provision:fioprobe_provision_success:max',
  provisionObjectsRecord:: 'provision:fioprobe_provision_objects_left:max',
  provisionStepRatioRecord:: 'provision:fioprobe_provision_last_step_duration_seconds:threshold_ratio',
  // The run number while the last run failed (fresh, not skipped).
  provisionFailedRecord:: 'provision:fioprobe_provision_runs_total:failed',
  // Per step: the warning threshold of the group's volume type, seconds.
  provisionThresholdRecord:: 'provision:fioprobe_provision_step_duration_seconds:warning_threshold',
  // Per step: the run number while the last run's step took longer than its threshold.
  provisionSlowRecord:: 'provision:fioprobe_provision_runs_total:slow_step',
  // The run number while the last run left objects after its deadlines.
  provisionObjectsLeftRecord:: 'provision:fioprobe_provision_runs_total:objects_left',
  // Static series of the provisioning groups the configuration deploys (fioprobe.expected).
  expectedProvisionRecord:: 'provision:fioprobe_provision_expected:info',

  // "The group ran recently": its last run (or skip) ended less than the stale threshold ago.
  provisionFresh(c)::
    'time() - %s < %s' % [$.provisionLastRunRecord, $.num(c.windows.provisionStaleAfterSeconds)],

  // Alertmanager template text naming a provisioning group in descriptions.
  provisionText(c)::
    'StorageClass {{ $labels.storageclass }}'
    + '{{ with $labels.node }} on node {{ . }}{{ end }}'
    + '{{ with $labels.%s }} in cluster {{ . }}{{ end }}' % c.clusterLabel,

  // Go template: the first value of a query on the alert's own provisioning group, through
  // `format`, as probeLookup. `pushed`: a fioprobe_provision_* series (the configured selector
  // applies), not a provision: record; `extra`: more matchers, with their own `%s` filled from
  // `extraLabels` (template expressions, e.g. '$labels.step').
  provisionLookup(c, metric, format, pushed=true, extra=[], extraLabels=[])::
    local group = [c.clusterLabel + '="%s"', 'storageclass="%s"', 'node="%s"'] + extra;
    '{{ with printf `' + metric + '{'
    + (if pushed then $.matchers(c, group) else $.matcherList(group))
    + '}` $labels.' + c.clusterLabel + ' $labels.storageclass $labels.node'
    + std.join('', [' ' + l for l in extraLabels]) + ' | query }}'
    + format + '{{ end }}',

  // --- Unknown keys ---------------------------------------------------------------------

  // Edit distance, for "did you mean": only computed for a key that is already wrong. Each
  // cell is computed before it is appended (the `>= 0` test): left lazy, the last cell would
  // be a chain of len(a) x len(b) thunks, beyond jsonnet's stack for two 30-letter keys.
  local distance(a, b) =
    local n = std.length(b);
    local row(prev, i) = std.foldl(
      function(cur, j)
        local cell = std.min(std.min(cur[j - 1] + 1, prev[j] + 1), prev[j - 1] + (if a[i - 1] == b[j - 1] then 0 else 1));
        if cell >= 0 then cur + [cell] else error 'unreachable',
      std.range(1, n),
      [i],
    );
    std.foldl(row, std.range(1, std.length(a)), std.range(0, n))[n],
  // ", did you mean <the nearest allowed key>?" when one is near enough, else ''.
  suggestion(key, allowed)::
    local scored = std.sort(
      [{ d: distance(std.asciiLower(key), std.asciiLower(a)), key: a } for a in allowed],
      function(s) s.d,
    );
    // Else the one key that begins with it: a key that gained a unit or a suffix
    // (latencyWindow, now latencyWindowRuns) is too far by edit distance.
    local longer = [a for a in allowed if std.startsWith(std.asciiLower(a), std.asciiLower(key))];
    if std.length(scored) > 0 && scored[0].d <= std.max(2, std.floor(std.length(key) / 4)) then
      ', did you mean %s?' % scored[0].key
    else if std.length(longer) == 1 then ', did you mean %s?' % longer[0]
    else '',
  // The one message for a key that is not known, wherever a configuration is checked (the
  // mixin's and the manifests'), naming its path, the nearest known key and every known one.
  unknownKey(at, key, allowed)::
    '%s: unknown key%s (expected one of: %s)' % [at, $.suggestion(key, allowed), std.join(', ', allowed)],
  // One message per key of `value` that is not in `allowed`, each named `prefix` + key.
  unknownKeys(prefix, value, allowed)::
    [$.unknownKey(prefix + key, key, allowed) for key in std.objectFieldsAll(value) if !std.member(allowed, key)],
  // An object assertion for each output of the mixin (rules, alerts, dashboards): the
  // configuration's key problems, if any, stop the rendering with all of them named.
  configChecked(problems):: std.length(problems) == 0 || error 'fioprobe mixin config: ' + std.join('; ', problems),
}
