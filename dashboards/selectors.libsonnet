// The dashboards' selectors, thresholds and the texts that say which number a panel shows
// (part of common.libsonnet). A function of the mixin's _config: every label name, selector
// and threshold comes from config.libsonnet.
local u = import '../lib/util.libsonnet';

function(c) {
  local d = c.dashboards,
  local cluster = '%s=~"$cluster"' % c.clusterLabel,

  // --- Selectors ---------------------------------------------------------------------------
  // Raw fioprobe_* series: the configured selector, the cluster, and `extra` matchers.
  raw(extra=[]):: '{%s}' % u.matchers(c, [cluster] + extra),
  // Recording-rule series probe:fioprobe_*: the configured selector was applied inside the
  // rule (and its labels may be aggregated away), so only the cluster and `extra` here.
  rec(extra=[]):: '{%s}' % u.matcherList([cluster] + extra),
  // A distributed benchmark's series (`fioprobe distributed`, its own group): the configured
  // selector, benchmarks only, the cluster, and `extra`.
  bench(extra=[]):: '{%s}' % u.matcherList([c.fioprobeSelector, u.benchmarkMatcher, cluster] + extra),
  // Series of other exporters (etcd, CloudWatch): the cluster, an optional configured
  // selector, and `extra`.
  ext(selector, extra=[]):: '{%s}' % u.matcherList([cluster, selector] + extra),

  // The usual probe filter of the overview: every probe variable.
  probeMatchers:: ['storageclass=~"$storageclass"', 'node=~"$node"', 'profile=~"$profile"'],

  // Labels that identify one probe within the chosen cluster (never job/instance).
  probeBy:: std.join(', ', u.probeLabels),
  // Labels that identify one probed volume, for joins: the volume gauges are pushed with
  // every profile's group of a target, so profile is left out (and the cluster kept, so a
  // join never pairs two clusters' volumes).
  volumeBy:: u.volumeBy(c),

  // --- Thresholds --------------------------------------------------------------------------
  // The benchmark tables' colours: green, yellow from 5 ms, red from 10 ms.
  latencySteps:: [
    { color: 'green', value: null },
    { color: 'yellow', value: d.latencyYellowSeconds },
    { color: 'red', value: d.latencyRedSeconds },
  ],
  latencyStepsText::
    'Yellow from %s s, red from %s s (etcd needs a WAL fsync p99 below 10 ms).'
    % [u.num(d.latencyYellowSeconds), u.num(d.latencyRedSeconds)],

  // --- Which number a latency panel shows --------------------------------------------------
  // The same percentile reaches the dashboards two ways, and they disagree for good reasons;
  // every latency panel says which one it shows.
  //   last run: fio's own percentile of the most recent run, exact, from that run alone;
  //   estimate: histogram_quantile over the cumulative histogram's rate across a window of
  //             runs, which pools their operations and interpolates inside one bucket.
  lastRunText(q, op='sync')::
    "fio's exact p%s of each probe's most recent run, from all %ss of that one run " % [q.name, u.opTitle[op]]
    + '(fioprobe_last_%s_latency_seconds{quantile="%s"}); it holds until the next run pushes.'
      % [op, q.q],
  estimateText(what)::
    'A histogram estimate over %s: histogram_quantile over the rate of the ' % what
    + 'cumulative histogram pools the operations of every run in it and interpolates inside '
    + 'the bucket the percentile falls into, so it is exact at bucket boundaries (5, 10 and '
    + '20 ms are ones) and otherwise only known to lie in that bucket (e.g. between 32 and 64 ms).',
  // Why the two differ, said on each of the two panels that show them side by side.
  differFromEstimateText(estimatePanel)::
    '"%s" shows a histogram estimate over %s instead, ' % [estimatePanel, self.latencyWindowText]
    + 'so the two differ: a last run of 46 ms can read 61 ms there when its fsyncs lie between '
    + '32 and 64 ms.',
  differFromLastRunText(lastRunPanel)::
    'It differs from "%s", fio\'s exact percentile of the last run alone: it pools ' % lastRunPanel
    + 'several runs, interpolates within a bucket (a last run of 46 ms can read 61 ms here '
    + 'when its fsyncs lie between 32 and 64 ms), and moves only as runs enter and leave the window.',
  // The recording rules' window, as panels name it.
  latencyWindowText:: 'the last %d runs (%s)' % [c.latencyWindowRuns, c.windows.latency],
  // The last-run gauges (IOPS, bandwidth, duration) step once per run.
  lastRunGaugeText:: 'Value of the most recent run, held until the next run pushes.',

  // The percentiles panels show: name in titles, quantile label value of the summaries.
  quantiles:: {
    p50: { name: '50', q: '0.5', record: 'p50' },
    p99: { name: '99', q: '0.99', record: 'p99' },
    p999: { name: '99.9', q: '0.999', record: 'p999' },
  },
}
