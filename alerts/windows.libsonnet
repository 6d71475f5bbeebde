// Every window and `for` of the rules, derived from the one probe interval and the numbers of
// runs in config.libsonnet. Pushgateway series step once per run and are flat in between, so
// each window is chosen by how many runs it holds:
//   - a rate window must hold at least two pushes, or rate() sees no increase at all;
//   - "N of the last M runs" looks back (M - 1) intervals plus the push margin: the last M
//     runs are always in view, and the run before them only during the margin after a push
//     (the rules subtract it by its run number, see alerts/latency.libsonnet);
//   - a `for` that waits for N consecutive runs holds (N - 1) intervals plus the margin, so
//     it ends after the N-th run had time to push, never just before.
// Rendering fails with the reason when a configuration breaks one of these.
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
  local ok = std.foldl(function(all, one) all && one, [
    check(interval > 0, 'probeIntervalSeconds must be positive, got %s' % interval),
    check(c.pushMarginFraction > 0 && c.pushMarginFraction < 1,
          'pushMarginFraction must lie strictly between 0 and 1 (a fraction of one interval)'),
    atLeastTwo('latencyWindowRuns'),
    atLeastTwo('etcdFsyncSlowRuns'),
    atLeastTwo('storageClassSlowRuns'),
    atLeastTwo('burstDepletedRuns'),
    atLeastTwo('staleAfterRuns'),
    check(c.etcdRoleMemoryRuns >= 1, 'etcdRoleMemoryRuns must be at least 1'),
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
  ], true);
  assert ok;
  {
    interval: u.duration(interval),
    margin: u.duration(margin),
    latency: u.duration(runs(c.latencyWindowRuns)),
    etcdRuns: u.duration(runs(c.etcdFsyncOfRuns - 1) + margin),
    storageClassRuns: u.duration(runs(c.storageClassOfRuns - 1) + margin),
    burstFor: u.duration(runs(c.burstDepletedRuns - 1) + margin),
    failingFor: u.duration(runs(c.failingRuns - 1) + margin),
    staleAfterSeconds: runs(c.staleAfterRuns) + margin,
    staleAfter: u.duration(self.staleAfterSeconds),
    etcdRoleMemory: u.duration(runs(c.etcdRoleMemoryRuns) + margin),
    regressionFor: u.duration(runs(c.regressionForRuns)),
    regressionMinBaselineRuns: std.ceil(c.regressionMinBaselineFraction * baselineSeconds / interval),
  }
