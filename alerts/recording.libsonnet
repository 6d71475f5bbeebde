// Recording rules shared by alerts and dashboards (docs/DESIGN.md, docs/MIXIN.md).
// Every probe series is first reduced to one series per probe (cluster, StorageClass, node,
// profile): the labels prometheus-operator adds (pod, service, endpoint, namespace) change
// when the Pushgateway pod is replaced, and per-probe series keep range functions
// continuous across that.
//
//   probe:fioprobe_<op>_latency_seconds:p50|p99|p999   latency over the last
//       latencyWindowRuns runs, from the cumulative histograms; exact at bucket boundaries
//       (10 ms is one). Dashboards and the regression alert. No value (not NaN) while the
//       window holds no run.
//   probe:fioprobe_last_sync_latency_seconds:p99       the last run's own fsync p99 (fio's)
//   probe:push_time_seconds:max                        when the probe last pushed anything
//       (remembered for lostGroupMemory once its group is gone)
//   probe:push_seen_time_seconds:max                   when its group was last seen on the
//       Pushgateway (the memory's clock, remembered as long)
//   probe:fioprobe_success:min                         the last run's success, carried
//       through a push gap while fresh
//   probe:fioprobe_runs_total:failed                   the run number while the last run failed
//   probe:fioprobe_runs_total:<check>_slow             the run number while the current run
//       is slow by <check>; what the "N of the last M runs" alerts count
//   probe:fioprobe_etcd_disk:info                     1 per target (cluster, storageclass,
//       node) whose configuration says it holds etcd (a probe's or a continuous stream's),
//       kept through a push gap
//   probe:fioprobe_last_sync_latency_seconds:p99_threshold   the StorageClass alert's
//       threshold for the probe's volume type
//   probe:fioprobe_expected:info                       one static series per expected probe
//   probe:fioprobe_expected_per_node:info              one static series per per-node probe
//       (storageclass, profile), expected on every node of ...
//   node:fioprobe_per_node_inventory:info              the nodes the node inventory lists
//   node:fioprobe_per_node:info                        ... one series per node that runs (or,
//       by the node inventory, should run) the per-node probes
//   node:fioprobe_expected_per_node:info               one series per such node and per-node
//       probe (storageclass, profile): what each node should push
//   stream:fioprobe_continuous_expected:info           one static series per expected
//       continuous stream (storageclass, node); the stream's own rules are in
//       alerts/continuous.libsonnet
//   provision:fioprobe_provision_expected:info         one static series per expected
//       provisioning group (storageclass, node); the provisioning probe's own records are in
//       alerts/provisioning.libsonnet
local u = import '../lib/util.libsonnet';

{
  prometheusRules+:: {
    local c = $._config,
    local by = u.probeBy(c),
    local quantiles = [
      { name: 'p50', q: '0.5' },
      { name: 'p99', q: '0.99' },
      { name: 'p999', q: '0.999' },
    ],
    local lastP99 = u.lastRunRecord('sync'),
    local thresholds = c.storageClassFsyncP99WarningSeconds,
    local knownTypes = std.objectFields(thresholds),
    local thresholdValues = std.set([thresholds[t] for t in knownTypes]),
    local scMatchers(extra) = u.matchers(c, ['profile="%s"' % c.storageClassLatencyProfile] + extra),

    // The run number of the probes selected by `matchers` while their last run satisfies
    // `condition`, succeeded and is fresh.
    local slowRun(check, matchers, condition, extra='') = {
      record: 'probe:fioprobe_runs_total:%s_slow' % check,
      expr: |||
        max by (%(by)s) (fioprobe_runs_total{%(matchers)s})
        and on (%(by)s)
        (%(condition)s)
        and on (%(by)s)
        (min by (%(by)s) (fioprobe_success{%(all)s}) == 1)
        and on (%(by)s)
        (%(fresh)s)%(extra)s
      ||| % {
        by: by,
        matchers: matchers,
        condition: condition,
        all: u.matchers(c),
        fresh: u.fresh(c),
        extra: extra,
      },
    },
    local etcdMatchers = u.matchers(c, ['profile="%s"' % c.etcdProfile]),
    local onEtcdDisk = '\nand on (%s)\n%s' % [u.volumeBy(c), u.etcdDiskRecord],

    // The targets whose configuration declares them etcd disks, from the pushed probes
    // (fioprobe_info) or the scraped continuous stream (fioprobe_continuous_info): either one
    // alone is enough, so a stream deployed without a probe of the same target still knows
    // its role. Each source's latest statement wins: the time a probe last pushed its role
    // (its group's push time) and the time a stream's role was last scraped are remembered
    // for etcdRoleMemoryRuns intervals, so a Pushgateway restart that empties a group until
    // its next push, failed scrapes of a stream that says "false", or a stream's pod that is
    // replaced change no alert, and a node that no longer runs the probes (it lost its
    // control-plane label) keeps its role no longer than that. Where the sources disagree,
    // "false" wins: a target that now publishes etcd_disk="false" from either source drops out
    // at once, as it does while any stream's pod says so (during a rollout the old pod and the
    // new one are scraped side by side); a group left behind by another profile, long stale,
    // says nothing any more.
    local statedTimes = [
      {
        record: u.etcdDiskPushedRecord,
        expr: |||
          max by (%(by)s, etcd_disk) (fioprobe_info{%(stated)s})
          * on (%(by)s) group_left
          %(pushTime)s
        ||| % { by: by, stated: u.matchers(c, ['etcd_disk=~"true|false"']), pushTime: u.pushTimeRecord },
      },
      {
        record: u.etcdDiskScrapedRecord,
        expr: |||
          max by (%(target)s, etcd_disk) (timestamp(fioprobe_continuous_info{%(stated)s}))
        ||| % { target: u.volumeBy(c), stated: u.matchers(c, ['etcd_disk=~"true|false"']) },
      },
    ],
    local etcdDisk =
      local target = u.volumeBy(c);
      local latest(record, role) =
        '(max by (%s) (max_over_time(%s{etcd_disk="%s"}[%s])) > time() - %s)'
        % [target, record, role, c.windows.etcdRoleMemory, u.num(c.windows.etcdRoleMemorySeconds)];
      // What one source says last, `role` over `other`: the later statement (a tie is "false").
      local says(record, role) =
        local mine = latest(record, role), theirs = latest(record, if role == 'true' then 'false' else 'true');
        if role == 'true'
        then '%s\nunless on (%s)\n(%s >= on (%s) %s)' % [mine, target, theirs, target, mine]
        else '%s\nunless on (%s)\n(%s > on (%s) %s)' % [mine, target, theirs, target, mine];
      local indent(text) = std.strReplace(text, '\n', '\n    ');
      {
        record: u.etcdDiskRecord,
        expr: |||
          group by (%(target)s) (
            (
              %(pushedTrue)s
            )
            or
            (
              %(scrapedTrue)s
            )
          )
          unless on (%(target)s)
          (
            (
              %(pushedFalse)s
            )
            or
            (
              %(scrapedFalse)s
            )
            or
            fioprobe_continuous_info{%(saysFalse)s}
          )
        ||| % {
          target: target,
          pushedTrue: indent(says(u.etcdDiskPushedRecord, 'true')),
          scrapedTrue: indent(says(u.etcdDiskScrapedRecord, 'true')),
          pushedFalse: indent(says(u.etcdDiskPushedRecord, 'false')),
          scrapedFalse: indent(says(u.etcdDiskScrapedRecord, 'false')),
          saysFalse: u.matchers(c, ['etcd_disk="false"']),
        },
      },

    // The nodes that run per-node probes: those that pushed any of them (a node's groups,
    // fresh or not, stay until `fioprobe gc` deletes them). With the node inventory, the
    // nodes it lists instead, so that a node that never pushed is known and a removed one is
    // not; where it lists nothing (kube-state-metrics down or absent in that cluster), the
    // pushing nodes again, so that no per-node alert goes blind with it.
    // Pushing: by the remembered push time, so a node whose groups the Pushgateway lost is
    // still one (and its probes Stale if it had stopped). The inventory is remembered through
    // a gap of kube-state-metrics (kubeStateMetricsGapTolerance).
    local perNodePushing = |||
      group by (%(nodeBy)s) (
        %(pushTime)s{node!=""}
        and on (storageclass, profile)
        %(expected)s
      )
    ||| % { nodeBy: u.nodeBy(c), pushTime: u.pushTimeRecord, expected: u.expectedPerNodeRecord },
    local inventory = {
      record: u.perNodeInventoryRecord,
      expr: |||
        group by (%(nodeBy)s) (
          %(inventory)s
        )
      ||| % { nodeBy: u.nodeBy(c), inventory: c.perNodeInventorySelector },
    },
    local perNodeNodes = {
      record: u.perNodeNodesRecord,
      expr: if !c.perNodeInventory then perNodePushing else |||
        group by (%(nodeBy)s) (
          last_over_time(%(inventory)s[%(gap)s])
        )
        or
        (
          %(pushing)s
          unless on (%(cluster)s)
          group by (%(cluster)s) (
            last_over_time(%(inventory)s[%(gap)s])
          )
        )
      ||| % {
        nodeBy: u.nodeBy(c),
        cluster: c.clusterLabel,
        inventory: u.perNodeInventoryRecord,
        gap: c.kubeStateMetricsGapTolerance,
        pushing: std.strReplace(std.rstripChars(perNodePushing, '\n'), '\n', '\n  '),
      },
    },

    // The etcd nodes of the etcd probes found by role: the nodes kube-state-metrics lists with
    // an etcd role (remembered through its gaps), or, where it lists none in a cluster
    // (kube-state-metrics absent or down, or no node with the role), the nodes that push the
    // probes; so a managed control plane, where no node has the role and none pushes, has none.
    local etcdPushing = |||
      group by (%(nodeBy)s) (
        %(pushTime)s{node!=""}
        and on (storageclass, profile)
        %(expected)s
      )
    ||| % { nodeBy: u.nodeBy(c), pushTime: u.pushTimeRecord, expected: u.expectedEtcdRecord },
    local etcdInventory = {
      record: u.etcdInventoryRecord,
      expr: |||
        group by (%(nodeBy)s) (
          kube_node_role{%(roles)s}
        )
      ||| % { nodeBy: u.nodeBy(c), roles: u.anyOf('role', c.etcdNodeRoles) },
    },
    // Roles kube-state-metrics can name (node-role.kubernetes.io/<role> labels): without any,
    // the etcd nodes are the pushing ones.
    local etcdInventoryOn = std.length(c.etcdNodeRoles) > 0,
    local etcdNodes = {
      record: u.etcdNodesRecord,
      expr: if !etcdInventoryOn then etcdPushing else |||
        group by (%(nodeBy)s) (
          last_over_time(%(inventory)s[%(gap)s])
        )
        or
        (
          %(pushing)s
          unless on (%(cluster)s)
          group by (%(cluster)s) (
            last_over_time(%(inventory)s[%(gap)s])
          )
        )
      ||| % {
        nodeBy: u.nodeBy(c),
        cluster: c.clusterLabel,
        inventory: u.etcdInventoryRecord,
        gap: c.kubeStateMetricsGapTolerance,
        pushing: std.strReplace(std.rstripChars(etcdPushing, '\n'), '\n', '\n  '),
      },
    },
    local etcdByRole = std.length(c.expectedEtcdProbes) + std.length(c.expectedEtcdStreams) > 0,

    // The deployment's facts (the expected probes and streams, the node inventory), the one
    // group that differs between deployments: it exists only when a deployment passes them.
    local expected = [
      {
        record: u.expectedRecord,
        expr: 'vector(1)',
        labels: { storageclass: p.storageclass, profile: p.profile }
                + (if std.objectHas(p, 'node') then { node: p.node } else {}),
      }
      for p in c.expectedProbes
    ] + [
      {
        record: u.expectedPerNodeRecord,
        expr: 'vector(1)',
        labels: { storageclass: p.storageclass, profile: p.profile },
      }
      for p in c.expectedPerNodeProbes
    ] + (if std.length(c.expectedPerNodeProbes) == 0 then [] else (
           (if c.perNodeInventory then [inventory] else []) + [perNodeNodes]
         )) + [
      // Every node of perNodeNodes times every per-node probe: PromQL joins cannot build a
      // cross product, one rule per probe can.
      {
        record: u.expectedOnNodeRecord,
        expr: u.perNodeNodesRecord + '\n',
        labels: { storageclass: p.storageclass, profile: p.profile },
      }
      for p in c.expectedPerNodeProbes
    ] + [
      {
        record: u.expectedStreamRecord,
        expr: 'vector(1)',
        labels: { storageclass: s.storageclass } + (if std.objectHas(s, 'node') then { node: s.node } else {}),
      }
      for s in c.expectedStreams
    ] + [
      {
        record: u.expectedEtcdRecord,
        expr: 'vector(1)',
        labels: { storageclass: p.storageclass, profile: p.profile },
      }
      for p in c.expectedEtcdProbes
    ] + (if etcdByRole then (if etcdInventoryOn then [etcdInventory] else []) + [etcdNodes] else []) + [
      // Every etcd node times every etcd probe, as for the per-node probes.
      {
        record: u.expectedOnEtcdNodeRecord,
        expr: u.etcdNodesRecord + '\n',
        labels: { storageclass: p.storageclass, profile: p.profile },
      }
      for p in c.expectedEtcdProbes
    ] + [
      // A stream expected on every etcd node: the same series as the static ones, with a node.
      {
        record: u.expectedStreamRecord,
        expr: u.etcdNodesRecord + '\n',
        labels: { storageclass: s.storageclass },
      }
      for s in c.expectedEtcdStreams
    ] + [
      // The provisioning groups (alerts/provisioning.libsonnet's Missing and Stale).
      {
        record: u.expectedProvisionRecord,
        expr: 'vector(1)',
        labels: { storageclass: p.storageclass } + (if std.objectHas(p, 'node') then { node: p.node } else {}),
      }
      for p in c.expectedProvisioning
    ],

    groups+: [
      {
        name: 'fioprobe.rules',
        rules: [
          {
            record: u.quantileRecord(op, quantile.name),
            expr: |||
              histogram_quantile(%(q)s, sum by (%(by)s, le) (
                rate(fioprobe_%(op)s_latency_seconds_bucket{%(matchers)s}[%(window)s])
              )) >= 0
            ||| % {
              q: quantile.q,
              by: by,
              op: op,
              matchers: u.matchers(c),
              window: c.windows.latency,
            },
          }
          for op in u.ops
          for quantile in quantiles
        ] + [
          // When Prometheus last saw the probe's group on the Pushgateway (the scrape's time),
          // remembered for lostGroupMemory after that: the clock of the memory below starts
          // when the group left (a restart without persistence, a new pod, `fioprobe gc`), not
          // at the probe's last push, so a probe that stopped long ago stays what it was through
          // a failed scrape of the Pushgateway or a restart of it.
          {
            record: u.pushSeenRecord,
            expr: |||
              max by (%(by)s) (timestamp(push_time_seconds{%(matchers)s}))
              or
              (
                last_over_time(%(record)s[%(chain)s])
                > time() - %(memory)s
              )
            ||| % {
              by: by,
              matchers: u.pushMatchers(c),
              record: u.pushSeenRecord,
              chain: c.windows.memoryChain,
              memory: u.num(c.windows.lostGroupMemorySeconds),
            },
          },
          // When the probe last pushed, remembered while its group is (lostGroupMemory after it
          // left the Pushgateway): a probe whose group is gone only until its next push is
          // neither Stale nor Missing meanwhile, and one that had stopped stays Stale instead of
          // turning Missing.
          {
            record: u.pushTimeRecord,
            expr: |||
              max by (%(by)s) (push_time_seconds{%(matchers)s})
              or
              (
                last_over_time(%(record)s[%(chain)s])
                and on (%(by)s)
                %(seen)s
              )
            ||| % {
              by: by,
              matchers: u.pushMatchers(c),
              record: u.pushTimeRecord,
              chain: c.windows.memoryChain,
              seen: u.pushSeenRecord,
            },
          },
          // Whether the last run succeeded, the last known value carried through a push gap
          // while the probe is fresh: FioProbeFailing neither resolves nor restarts its `for`
          // when the Pushgateway loses the group until the next push.
          u.carried(c, u.successRecord, 'min by (%s) (fioprobe_success{%s})\n' % [by, u.matchers(c)]),
          {
            record: u.failedRunRecord,
            expr: |||
              max by (%(by)s) (fioprobe_runs_total{%(matchers)s})
              and on (%(by)s)
              (%(success)s == 0)
              and on (%(by)s)
              (%(fresh)s)
            ||| % { by: by, matchers: u.matchers(c), success: u.successRecord, fresh: u.fresh(c) },
          },
          // The last run's p99, carried through a push gap (a Pushgateway restart), so what
          // compares probes with one another (FioProbeLatencyOutlier's median) does not lose
          // the siblings that have not pushed again yet.
          u.carried(c, lastP99, 'max by (%s) (fioprobe_last_sync_latency_seconds{%s})\n'
                                % [by, u.matchers(c, ['quantile="0.99"'])]),
          {
            record: lastP99 + '_threshold',
            expr: std.join('\nor\n', [
              '%s * max by (%s) (fioprobe_info{%s})' % [
                u.num(value),
                by,
                scMatchers([u.anyOf('volume_type', [t for t in knownTypes if thresholds[t] == value])]),
              ]
              for value in thresholdValues
            ] + [
              '%s * max by (%s) (fioprobe_info{%s})' % [
                u.num(c.storageClassFsyncP99DefaultWarningSeconds),
                by,
                scMatchers(['volume_type!~"%s"' % std.join('|', knownTypes)]),
              ],
            ]) + '\n',
          },
        ] + statedTimes + [
          etcdDisk,
          slowRun(
            'etcd_fsync_warning',
            etcdMatchers,
            '%s > %s' % [lastP99, u.num(c.etcdFsyncP99WarningSeconds)],
            onEtcdDisk,
          ),
          slowRun(
            'etcd_fsync_critical',
            etcdMatchers,
            '%s > %s' % [lastP99, u.num(c.etcdFsyncP99CriticalSeconds)],
            onEtcdDisk,
          ),
          slowRun(
            'storageclass_fsync',
            scMatchers([]),
            '%s > on (%s) %s_threshold' % [lastP99, by, lastP99],
            '\nunless on (%s)\n%s' % [u.volumeBy(c), u.etcdDiskRecord],
          ),
        ],
      },
    ] + (if std.length(expected) == 0 then [] else [
           {
             // Static: which probes and streams the deployment runs. FioProbeMissing, Stale
             // and ContinuousMissing compare with them; they carry no cluster label (each
             // cluster's Prometheus evaluates its own rules; its external label is added on
             // the way out). Then the nodes the per-node probes are expected on, after the
             // static series they join.
             name: 'fioprobe.expected',
             rules: expected,
           },
         ]),
  },
}
