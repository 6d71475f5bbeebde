// The mixin's rules for a deployment with per-node probes, as alerts/rules.jsonnet renders
// them for the shipped configuration: manifests/config.libsonnet with the per-node DaemonSet
// on (a local disk and a StorageClass, also probed by its CronJob; tolerating the taint of a
// dedicated pool of nodes), the expected probes from
// the manifests (their mixinConfig), and the node inventory on, as in the kube-prometheus
// example. scripts/generate.d/10-mixin.sh writes alerts/out/rules-per-node.yaml from it, which
// the per-node promtool scenarios (alerts/tests/probe-health-per-node.yaml) test.
//   jsonnet -J . --tla-code config='{ probeIntervalSeconds: 600 }' alerts/rules-per-node.jsonnet
function(config={})
  local manifests = (import '../manifests/main.libsonnet')(overrides={
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
  });
  (import 'rules.jsonnet')(manifests.mixinConfig { perNodeInventory: true } + config)
