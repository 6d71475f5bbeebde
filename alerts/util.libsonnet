// Helpers shared by the rule files. Each takes the mixin's _config, so that no label name,
// selector or threshold is written down anywhere but config.libsonnet.
{
  // PromQL matchers for inside braces: the configured selector plus `extra`, skipping empty
  // ones (the configured selector may be empty, and `{, a="b"}` is not PromQL).
  matchers(c, extra=[]):: std.join(', ', std.filter(function(m) m != '', [c.fioprobeSelector] + extra)),

  // The labels that identify one probe, across clusters. Never job/instance (see config).
  probeBy(c):: std.join(', ', [c.clusterLabel, 'storageclass', 'node', 'profile']),

  // The labels that identify one probed volume: every profile of a StorageClass (or of a
  // node-local path) probes the same kind of volume, so volume-model gauges join on these.
  volumeBy(c):: std.join(', ', [c.clusterLabel, 'storageclass', 'node']),

  // Anchors are the lower-cased alert names: GitHub's anchors for docs/runbooks.md headings.
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

  // Name of the shared latency quantile recording rule (see recording.libsonnet).
  quantileRecord(op, quantile):: 'probe:fioprobe_%s_latency_seconds:%s' % [op, quantile],
}
