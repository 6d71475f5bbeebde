// Every window and `for` of the rules, derived from the one probe interval (the provisioning
// probe's from its own, provisionIntervalSeconds) and the numbers of runs in config.libsonnet.
// Pushgateway series step once per run and are flat in between, so each window is chosen by
// how many runs it holds:
//   - a rate window must hold at least two pushes, or rate() sees no increase at all;
//   - "N of the last M runs" looks back (M - 1) intervals plus the push margin: the last M
//     runs are always in view, and the run before them only during the margin after a push
//     (the rules subtract it by its run number, see lib/util.libsonnet's slowRunsAtLeast);
//   - a `for` that waits for N consecutive runs holds (N - 1) intervals plus the margin, so
//     it ends after the N-th run had time to push, never just before.
// Rendering fails with the reason when a configuration breaks one of these. The continuous
// stream's windows are durations of their own (it is scraped, not pushed); they are checked
// here too, with its objectives, which must be bucket boundaries.
local u = import '../lib/util.libsonnet';

function(c)
  local interval = c.probeIntervalSeconds;
  local margin = interval * c.pushMarginFraction;
  local runs(n) = n * interval;
  local check(ok, message) = if ok then true else error 'fioprobe mixin config: ' + message;
  local atLeastTwo(key) = check(
    c[key] >= 2,
    '%s = %s: this window would span fewer than two probe runs (probeIntervalSeconds = %s), '
    % [key, c[key], interval]
    + 'so a rate() over it sees no increase or one run decides alone. Use 2 or more.'
  );
  local baselineSeconds = u.seconds(c.regressionBaselineWindow);
  // The continuous stream's objectives count the fsyncs in one histogram bucket: a latency
  // between two boundaries would have to be interpolated, which is exactly what the bucket
  // layout (10 ms a boundary) is there to avoid.
  local bucketList = std.join(', ', [u.num(b) for b in u.latencyBuckets]);
  local isBucket(seconds) = std.member(u.latencyBuckets, seconds);
  local isBucketCheck(key, seconds) = check(
    isBucket(seconds),
    '%s = %s is not a bucket boundary of the latency histograms (%s): the continuous stream '
    % [key, u.num(seconds), bucketList]
    + 'counts the fsyncs meeting its objective with the bucket of that boundary. Use one of them.'
  );
  local typeThresholds = c.storageClassFsyncP99WarningSeconds;
  local budget = 1 - c.continuousObjectiveRatio;
  local burnChecks = [
    check(
      u.seconds(b.short) < u.seconds(b.long),
      'continuousBurnRates: the short window (%s) must be shorter than the long one (%s)' % [b.short, b.long]
    )
    && check(
      b.factor > 0 && b.factor * budget < 1,
      'continuousBurnRates: factor %s times the error budget %s is %s; above 0 and below 1 (all fsyncs slow) or it never fires'
      % [u.num(b.factor), u.num(budget), u.num(b.factor * budget)]
    )
    && check(std.member(['critical', 'warning', 'info'], b.severity),
             'continuousBurnRates: severity %s is none of critical, warning, info' % b.severity)
    for b in c.continuousBurnRates
  ];
  local pairs = ['%s/%s' % [b.long, b.short] for b in c.continuousBurnRates];
  local stepThresholds = c.provisionStepWarningSeconds;
  local provisionInterval = c.provisionIntervalSeconds;
  local provisionMargin = provisionInterval * c.pushMarginFraction;
  local provisionRuns(n) = n * provisionInterval;
  local provisionStale = provisionRuns(c.provisionStaleAfterRuns) + provisionMargin;
  local ok = std.foldl(function(all, one) all && one, [
    check(interval > 0, 'probeIntervalSeconds must be positive, got %s' % interval),
    check(c.pushMarginFraction > 0 && c.pushMarginFraction < 1,
          'pushMarginFraction must lie strictly between 0 and 1 (a fraction of one interval)'),
    atLeastTwo('latencyWindowRuns'),
    atLeastTwo('etcdFsyncSlowRuns'),
    atLeastTwo('storageClassSlowRuns'),
    check(c.intermittentSlowRuns > c.etcdFsyncSlowRuns && c.intermittentSlowRuns > c.storageClassSlowRuns,
          "intermittentSlowRuns (%s) must exceed etcdFsyncSlowRuns and storageClassSlowRuns: fewer slow runs are the sustained rules' business"
          % c.intermittentSlowRuns),
    check(c.intermittentOfRuns >= c.intermittentSlowRuns,
          'intermittentOfRuns (%s) must be >= intermittentSlowRuns (%s)' % [c.intermittentOfRuns, c.intermittentSlowRuns]),
    atLeastTwo('burstDepletedRuns'),
    atLeastTwo('staleAfterRuns'),
    atLeastTwo('outlierRuns'),
    check(c.outlierRatio > 1, 'outlierRatio must be above 1, got %s' % u.num(c.outlierRatio)),
    check(c.outlierMinSiblings >= 3,
          'outlierMinSiblings must be at least 3: the median of two probes is their mean, which one outlier moves'),
    check(c.etcdRoleMemoryRuns >= 1, 'etcdRoleMemoryRuns must be at least 1'),
    check(u.seconds(c.kubeStateMetricsGapTolerance) > 0, 'kubeStateMetricsGapTolerance must be positive'),
    check(c.failingRuns >= 1, 'failingRuns must be at least 1'),
    check(c.etcdFsyncOfRuns >= c.etcdFsyncSlowRuns,
          'etcdFsyncOfRuns (%s) must be >= etcdFsyncSlowRuns (%s)' % [c.etcdFsyncOfRuns, c.etcdFsyncSlowRuns]),
    check(c.storageClassOfRuns >= c.storageClassSlowRuns,
          'storageClassOfRuns (%s) must be >= storageClassSlowRuns (%s)' % [c.storageClassOfRuns, c.storageClassSlowRuns]),
    check(c.regressionForRuns > c.latencyWindowRuns,
          'regressionForRuns (%s) must exceed latencyWindowRuns (%s): a shorter `for` lets one slow run, '
          % [c.regressionForRuns, c.latencyWindowRuns] + 'which stays in the latency window that long, fire the regression'),
    check(baselineSeconds >= 2 * interval,
          'regressionBaselineWindow (%s) spans fewer than two probe runs (probeIntervalSeconds = %s)'
          % [c.regressionBaselineWindow, interval]),
    // The continuous stream.
    check(c.continuousObjectiveRatio > 0 && c.continuousObjectiveRatio < 1,
          'continuousObjectiveRatio must lie strictly between 0 and 1, got %s' % u.num(c.continuousObjectiveRatio)),
    isBucketCheck('continuousEtcdObjectiveSeconds', c.continuousEtcdObjectiveSeconds),
    isBucketCheck('storageClassFsyncP99DefaultWarningSeconds', c.storageClassFsyncP99DefaultWarningSeconds),
    check(std.length(c.continuousBurnRates) > 0, 'continuousBurnRates must have at least one row'),
    check(c.continuousBurnMinSyncs >= 1, 'continuousBurnMinSyncs must be at least 1'),
    check(std.length(std.set(pairs)) == std.length(pairs),
          'continuousBurnRates: each long/short pair once (the alerts are told apart by them)'),
    check(c.continuousHangCriticalSeconds > 0 && c.continuousStorageClassHangWarningSeconds > 0,
          'continuousHangCriticalSeconds and continuousStorageClassHangWarningSeconds must be positive'),
    check(c.continuousStallSlowSyncs >= 1, 'continuousStallSlowSyncs must be at least 1'),
    check(c.continuousStallSeconds > 0 && c.continuousStallSeconds <= u.seconds(c.continuousStallWindow),
          'continuousStallSeconds (%s) must be positive and at most continuousStallWindow (%s): the stream '
          % [u.num(c.continuousStallSeconds), c.continuousStallWindow]
          + 'has one operation outstanding at a time, so it stalls at most that long within the window'),
    check(u.seconds(c.continuousGapTolerance) > 0, 'continuousGapTolerance must be positive'),
    check(u.seconds(c.continuousFailingAfter) > 0, 'continuousFailingAfter must be positive'),
    check(u.seconds(c.continuousMissingAfter) >= u.seconds(c.continuousGapTolerance),
          'continuousMissingAfter (%s) must be at least continuousGapTolerance (%s): a tolerated gap '
          % [c.continuousMissingAfter, c.continuousGapTolerance] + 'must never make a stream Missing'),
    check(u.seconds(c.lostGroupMemory) >= 2 * (runs(c.staleAfterRuns) + margin),
          'lostGroupMemory (%s) must be at least twice the stale threshold (%s): a lost group is '
          % [c.lostGroupMemory, u.duration(runs(c.staleAfterRuns) + margin)]
          + 'Stale for that long before it may turn Missing'),
    // The provisioning probe: its own schedule, the same rules for its windows.
    check(c.provisionIntervalSeconds > 0, 'provisionIntervalSeconds must be positive, got %s' % c.provisionIntervalSeconds),
    atLeastTwo('provisionFailingRuns'),
    atLeastTwo('provisionSlowRuns'),
    atLeastTwo('provisionObjectsLeftRuns'),
    atLeastTwo('provisionStaleAfterRuns'),
    check(c.provisionOfRuns >= c.provisionFailingRuns,
          'provisionOfRuns (%s) must be >= provisionFailingRuns (%s)' % [c.provisionOfRuns, c.provisionFailingRuns]),
    check(c.provisionSlowOfRuns >= c.provisionSlowRuns,
          'provisionSlowOfRuns (%s) must be >= provisionSlowRuns (%s)' % [c.provisionSlowOfRuns, c.provisionSlowRuns]),
    check(std.objectHas(stepThresholds, 'default')
          && std.length([s for s in u.provisionSteps if !std.objectHas(stepThresholds.default, s)]) == 0,
          'provisionStepWarningSeconds.default must give every step a threshold (%s): it is what every '
          % std.join(', ', u.provisionSteps) + 'volume type not listed, and every step a type does not list, is judged by'),
    // A count of the bad ones: jsonnet 0.18 (Debian's), which the mixin supports, has no "all".
    check(std.length([
            s
            for t in std.objectFields(stepThresholds)
            for s in std.objectFields(stepThresholds[t])
            if !(std.isNumber(stepThresholds[t][s]) && stepThresholds[t][s] > 0)
          ]) == 0,
          'provisionStepWarningSeconds: every threshold must be a positive number of seconds'),
    check(u.seconds(c.lostGroupMemory) >= 2 * provisionStale,
          'lostGroupMemory (%s) must be at least twice the provisioning stale threshold (%s): a lost '
          % [c.lostGroupMemory, u.duration(provisionStale)]
          + 'group is Stale for that long before it may turn Missing'),
  ] + [
    isBucketCheck('storageClassFsyncP99WarningSeconds.%s' % t, typeThresholds[t])
    for t in std.objectFields(typeThresholds)
  ] + burnChecks, true);
  assert ok;
  {
    interval: u.duration(interval),
    margin: u.duration(margin),
    latency: u.duration(runs(c.latencyWindowRuns)),
    etcdRuns: u.duration(runs(c.etcdFsyncOfRuns - 1) + margin),
    storageClassRuns: u.duration(runs(c.storageClassOfRuns - 1) + margin),
    intermittentRuns: u.duration(runs(c.intermittentOfRuns - 1) + margin),
    // Back to the run before the current one, whenever the current one pushed.
    previousRun: u.duration(runs(1) + margin),
    burstFor: u.duration(runs(c.burstDepletedRuns - 1) + margin),
    failingFor: u.duration(runs(c.failingRuns - 1) + margin),
    outlierFor: u.duration(runs(c.outlierRuns - 1) + margin),
    staleAfterSeconds: runs(c.staleAfterRuns) + margin,
    staleAfter: u.duration(self.staleAfterSeconds),
    etcdRoleMemorySeconds: runs(c.etcdRoleMemoryRuns) + margin,
    etcdRoleMemory: u.duration(self.etcdRoleMemorySeconds),
    // How far back a remembered record looks for its own last value: one stale threshold, so
    // a Prometheus restart shorter than that picks every memory up again.
    memoryChain: self.staleAfter,
    lostGroupMemorySeconds: u.seconds(c.lostGroupMemory),
    regressionFor: u.duration(runs(c.regressionForRuns)),
    regressionMinBaselineRuns: std.ceil(c.regressionMinBaselineFraction * baselineSeconds / interval),
    // The continuous stream's error budget: the fraction of fsyncs allowed above the objective.
    continuousBudget: budget,
    // The provisioning probe's, from provisionIntervalSeconds as the probes' from theirs.
    provisionInterval: u.duration(provisionInterval),
    provisionFailingRuns: u.duration(provisionRuns(c.provisionOfRuns - 1) + provisionMargin),
    provisionSlowRuns: u.duration(provisionRuns(c.provisionSlowOfRuns - 1) + provisionMargin),
    provisionObjectsLeftRuns: u.duration(provisionRuns(c.provisionObjectsLeftRuns - 1) + provisionMargin),
    provisionStaleAfterSeconds: provisionStale,
    provisionStaleAfter: u.duration(provisionStale),
    // How far back a remembered provisioning record looks for its own last value.
    provisionMemoryChain: self.provisionStaleAfter,
  }
