// The Prometheus rules of a manifests configuration, as one rule file object (JSON, which
// Prometheus also reads as YAML): the mixin's own rules, the same for every deployment, and the
// `fioprobe.expected` group that holds this deployment's facts (its schedule reaches the mixin
// as probeIntervalSeconds; its probes, streams and per-node node inventory only that group).
// The manifests import the mixin, never the reverse.
//
// `part`: 'all', 'mixin' (must equal alerts/out/rules.yaml for the same mixin keys) or
// 'expected' (the deployment's group alone). `example`: 'shipped' (manifests/config.libsonnet:
// the etcd disks found by role), 'named-etcd' (the same with three etcd nodes named:
// control-plane-0, -1 and -2, the deployment most alert scenarios run in, whose facts are all
// static) or 'per-node' (named-etcd with the per-node DaemonSet on: a local disk and a
// StorageClass, also probed by its CronJob, tolerating the taint of a dedicated pool of nodes,
// and the node inventory on, as in the kube-prometheus example). `config` overrides mixin
// keys. scripts/generate.d/10-mixin.sh writes alerts/out/expected.yaml (named-etcd),
// alerts/out/expected-per-node.yaml and alerts/out/expected-etcd-by-role.yaml (shipped) from
// it, which the promtool tests load beside rules.yaml:
//   jsonnet -J . --tla-str part=expected --tla-str example=per-node manifests/rules.jsonnet
function(config={}, example='named-etcd', part='all')
  local namedEtcd = { etcd: { nodes: ['control-plane-0', 'control-plane-1', 'control-plane-2'] } };
  local overrides = {
    shipped: {},
    'named-etcd': namedEtcd,
    'per-node': namedEtcd {
      perNode: {
        enabled: true,
        expectedNodes: 3,
        tolerations: [{ key: 'fioprobe.example.com/pool', operator: 'Exists', effect: 'NoSchedule' }],
        localDisks: [{ name: 'node-disk', profiles: ['etcd-fsync'] }],
        storageClasses: [
          {
            name: 'gp3',
            volume: { type: 'gp3', size: '8Gi', iops: 3000, throughput: '125Mi' },
            profiles: ['etcd-fsync', 'randread-iops'],
          },
        ],
      },
    },
  };
  local inventory = { shipped: {}, 'named-etcd': {}, 'per-node': { perNodeInventory: true } };
  assert std.objectHas(overrides, example) : 'example must be one of %s' % [std.objectFields(overrides)];
  local manifests = (import 'main.libsonnet')(overrides=overrides[example]);
  local mixin = (import '../mixin.libsonnet') + {
    _config+:: manifests.mixinConfig + inventory[example] + config,
  };
  local groups = mixin.prometheusRules.groups + mixin.prometheusAlerts.groups;
  local isExpected(g) = g.name == 'fioprobe.expected';
  assert std.member(['all', 'mixin', 'expected'], part) : 'part must be all, mixin or expected';
  {
    groups: if part == 'all' then groups
    else if part == 'mixin' then std.filter(function(g) !isExpected(g), groups)
    else std.filter(isExpected, groups),
  }
