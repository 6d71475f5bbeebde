// FioProbeFailing, FioProbeStale and FioProbeMissing: the probe itself is not delivering
// measurements, so every other fioprobe alert for it is blind. A probe in trouble is in
// exactly one of them, one cause one alert:
//   Failing  runs happen and fail: the last `failingRuns` runs failed, and the probe still
//            pushes (fioprobe_failure_reason_info says why);
//   Stale    the probe's series are there but nothing (success or failure) was pushed for
//            `staleAfterRuns` intervals: the probe stopped running or cannot reach the
//            Pushgateway, and its group was left behind;
//   Missing  an expected probe (config.libsonnet's expectedProbes, from the manifests) has no
//            series at all for as long: it never pushed, its group was deleted, or the
//            Pushgateway lost it while the probe was not running.
// Failing requires a fresh push, Stale a push older than the same threshold, Missing no push
// at all, so they never overlap, and a probe that stops after a failed run ends as Stale
// instead of Failing forever. Where the deployment lists its probes (the `fioprobe.expected`
// group), only they can be Stale: a probe removed from the configuration whose group was left
// behind stays silent (delete it with `fioprobe gc`); where it lists none (the mixin alone),
// every stale group is Stale and nothing can be Missing. The rules are the same either way:
// they join on the listed series, never on a list rendered into them.
//
// Per-node probes (config.libsonnet's expectedPerNodeProbes) run on nodes known only at run
// time, so they are expected per (storageclass, profile) on every node that runs per-node
// probes (node:fioprobe_per_node:info: the nodes that push any of them, or the node
// inventory's). The same three causes, each group in exactly one:
//   Stale    one of its groups is there but old (the node's pod stopped pushing);
//   Missing  (label scope="per-node") on a node: a node that runs per-node probes has no
//            group of one of them while other nodes push it (that target does not run there,
//            or the node never pushed); without a node: no node pushes it at all (the
//            DaemonSet runs nowhere, or none of its pods runs that target), one alert instead
//            of one per node.
local u = import '../lib/util.libsonnet';

{
  prometheusAlerts+:: {
    local c = $._config,
    local w = c.windows,
    local by = u.probeBy(c),
    local identity = std.join(', ', u.groupingLabels),
    local perNodeIdentity = std.join(', ', [c.clusterLabel] + u.groupingLabels),
    local staleAfter = u.num(w.staleAfterSeconds),
    // A group the Pushgateway lost (restart without persistence, `fioprobe gc`) is remembered
    // (probe:push_time_seconds:max) for lostGroupMemory after it was last seen there
    // (probe:push_seen_time_seconds:max): Stale while it is, and Missing from the moment it
    // is forgotten, its `for` (the stale threshold) already served by then. Before that, a
    // probe is not Missing.
    local forgetting = u.num(w.lostGroupMemorySeconds - w.staleAfterSeconds),
    local remembered = '(%s > time() - %s)' % [u.pushSeenRecord, forgetting],
    local rememberedPerNode = '(%s{node!=""} > time() - %s)' % [u.pushSeenRecord, forgetting],
    // Listed probes whose groups stopped pushing; per-node groups only on the nodes that
    // should run the probes (with the node inventory, a removed node's groups are not a probe
    // to repair; without it, every node that pushed is such a node); and, where the
    // deployment lists no probe at all, every group that stopped.
    local stale = |||
      (
        time() - %(pushTime)s > %(staleAfter)s
        and on (%(identity)s)
        %(expected)s
      )
      or
      (
        time() - %(pushTime)s{node!=""} > %(staleAfter)s
        and on (storageclass, profile)
        %(expectedPerNode)s
        and on (%(nodeBy)s)
        %(nodes)s
      )
      or
      (
        time() - %(pushTime)s{node!=""} > %(staleAfter)s
        and on (storageclass, profile)
        %(expectedEtcd)s
        and on (%(nodeBy)s)
        %(etcdNodes)s
      )
      or
      (
        time() - %(pushTime)s > %(staleAfter)s
        unless on ()
        (%(expected)s or %(expectedPerNode)s or %(expectedEtcd)s)
      )
    ||| % {
      pushTime: u.pushTimeRecord,
      staleAfter: staleAfter,
      identity: identity,
      expected: u.expectedRecord,
      expectedPerNode: u.expectedPerNodeRecord,
      expectedEtcd: u.expectedEtcdRecord,
      nodeBy: u.nodeBy(c),
      nodes: u.perNodeNodesRecord,
      etcdNodes: u.etcdNodesRecord,
    },
    // The etcd probes found by role: on every etcd node (kube-state-metrics' nodes with the
    // role, or the nodes that push them), each expected etcd probe less the groups that exist
    // or are remembered. A managed control plane has no etcd node: nothing is expected there.
    local etcdMissing = {
      alert: 'FioProbeMissing',
      expr: |||
        %(onNodes)s
        unless on (%(identity)s)
        push_time_seconds{%(matchers)s}
        unless on (%(identity)s)
        %(remembered)s
      ||| % {
        onNodes: u.expectedOnEtcdNodeRecord,
        identity: perNodeIdentity,
        matchers: u.pushMatchers(c),
        remembered: remembered,
      },
      'for': w.staleAfter,
      labels: { severity: 'warning', scope: 'etcd' },
      annotations: {
        summary: 'An etcd node has no fioprobe probe of its disk.',
        description: (
          'fioprobe %(probe)s, the probe of the etcd disk, has had no series in Prometheus for '
          + '%(runs)d probe intervals (%(for)s), while the node holds etcd (kube-state-metrics '
          + 'lists it with the role, or it pushed before): its pod does not run there (not '
          + 'scheduled, the node directories refused by the prepare step, etcd.dataDir missing '
          + 'on the node) or cannot reach the Pushgateway.'
        ) % { probe: u.probeText(c), runs: c.staleAfterRuns, 'for': w.staleAfter },
      },
    },
    // Per-node probes: on a node that runs per-node probes, every expected per-node probe (the
    // `fioprobe.expected` group's cross product of nodes and probes) less the groups that
    // exist or are remembered, only where some node of the cluster pushes the probe; or, where
    // no node pushes it, the probe once, without a node, instead of once per node. Every alert of this rule carries scope="per-node": without a node, its labels would
    // otherwise equal the first FioProbeMissing's for a StorageClass probed both by a CronJob
    // and per node with one profile.
    local perNodeMissing = {
      alert: 'FioProbeMissing',
      expr: |||
        (
          %(onNodes)s
          unless on (%(identity)s)
          push_time_seconds{%(matchers)s}
          unless on (%(identity)s)
          %(remembered)s
          and on (%(cluster)s, storageclass, profile)
          %(pushTime)s{node!=""}
        )
        or
        (
          %(expected)s
          unless on (storageclass, profile)
          push_time_seconds{%(perNodeMatchers)s}
          unless on (storageclass, profile)
          %(rememberedPerNode)s
        )
      ||| % {
        onNodes: u.expectedOnNodeRecord,
        identity: perNodeIdentity,
        cluster: c.clusterLabel,
        expected: u.expectedPerNodeRecord,
        matchers: u.pushMatchers(c),
        perNodeMatchers: u.pushMatchers(c, ['node!=""']),
        pushTime: u.pushTimeRecord,
        remembered: remembered,
        rememberedPerNode: rememberedPerNode,
      },
      'for': w.staleAfter,
      labels: { severity: 'warning', scope: 'per-node' },
      annotations: {
        summary: 'A per-node fioprobe probe has no data from a node that runs per-node probes, or from any node.',
        description: (
          'fioprobe %(probe)s, a per-node probe, has had no series in Prometheus for %(runs)d '
          + 'probe intervals (%(for)s)'
          + '{{ if $labels.node }}, while the node runs per-node probes (it pushes others, or the '
          + 'node inventory lists it) '
          + 'and other nodes push this one: the per-node pod of that node does not run (not '
          + 'scheduled, crashing, its volumes not mounted) or runs a configuration without this '
          + 'target (a rollout in progress).'
          + '{{ else }} from any node: the per-node DaemonSet runs nowhere (deleted, no pod '
          + 'scheduled or running) or none of its pods runs this target, or the Pushgateway lost '
          + 'every group while the probes were not running.{{ end }}'
        ) % {
          probe: u.probeText(c),
          runs: c.staleAfterRuns,
          'for': w.staleAfter,
        },
      },
    },
    // Go template appending the last failure's reason, looked up at notification time
    // (fioprobe_failure_reason_info exists only while the last run failed).
    local reasonText = u.probeLookup(
      c, 'fioprobe_failure_reason_info', '{{ range . }} Reason of the last failure: {{ .Labels.reason }}.{{ end }}'
    ),
    groups+: [
      {
        name: 'fioprobe-probe-health',
        rules: [
          {
            alert: 'FioProbeFailing',
            expr: |||
              %(success)s == 0
              and on (%(by)s)
              (%(fresh)s)
            ||| % { by: by, success: u.successRecord, fresh: u.fresh(c) },
            'for': w.failingFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A fioprobe probe keeps failing, so its disk is not being measured.',
              description: (
                'The last %(runs)d runs of fioprobe %(probe)s failed.%(reason)s'
              ) % { probe: u.probeText(c), runs: c.failingRuns, reason: reasonText },
            },
          },
          {
            alert: 'FioProbeStale',
            expr: stale,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A fioprobe probe stopped pushing results, so its disk is not being measured.',
              description: (
                'fioprobe %(probe)s last pushed a result {{ $value | humanizeDuration }} ago, '
                + 'more than %(runs)d probe intervals: it is not running or cannot reach the '
                + 'Pushgateway. Its last values are kept there but no alert uses them.'
              ) % { probe: u.probeText(c), runs: c.staleAfterRuns },
            },
          },
        ] + [
          {
            alert: 'FioProbeMissing',
            expr: |||
              %(expected)s
              unless on (%(identity)s)
              push_time_seconds{%(matchers)s}
              unless on (%(identity)s)
              %(remembered)s
            ||| % {
              expected: u.expectedRecord,
              identity: identity,
              matchers: u.pushMatchers(c),
              remembered: remembered,
            },
            'for': w.staleAfter,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A deployed fioprobe probe has no data in Prometheus at all.',
              description: (
                'fioprobe %(probe)s is deployed but Prometheus has had none of its series '
                + 'for %(runs)d probe intervals (%(for)s): it never pushed, or its Pushgateway '
                + 'group is gone (deleted, or a Pushgateway restart without persistence) '
                + 'while the probe is not running.'
              ) % { probe: u.probeText(c), runs: c.staleAfterRuns, 'for': w.staleAfter },
            },
          },
        ] + [perNodeMissing, etcdMissing],
      },
    ],
  },
}
