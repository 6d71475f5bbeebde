// The configuration `make e2e` deploys: manifests/config.libsonnet (the file a user edits) with
// these overrides on top, passed by scripts/e2e/run.sh to scripts/generate.d/30-manifests.sh as
// `--tla-code overrides=(import 'scripts/e2e/config.jsonnet')('<run directory>')`. Nothing
// else differs from what a user renders: no generated YAML is edited.
function(run) {
  // One run a minute, so that every CronJob fires within the test's time. The alerts' windows
  // follow from it (probeIntervalSeconds = 60): "2 of the last 3 runs" is about 2 minutes.
  everyMinutes: 1,

  // The shipped StorageClasses plus one per fault, each backed by its own local
  // PersistentVolume (scripts/e2e/cluster.sh, storage_up):
  //   e2e-slow      a FUSE filesystem adding 15 ms to every fsync (fioprobe.demo.slowdisk),
  //                 modelled as io2, whose fsync p99 threshold is 5 ms
  //   e2e-full      a 16 MiB filesystem with 2 MiB free: less than the profile's budget
  //   e2e-readonly  a filesystem mounted read-only (as after ext4's errors=remount-ro)
  storageClasses: (import 'manifests/config.libsonnet').storageClasses + [
    {
      name: 'e2e-slow',
      volume: { type: 'io2', size: '1Gi', iops: 3000, provisioner: 'kubernetes.io/no-provisioner' },
      profiles: ['etcd-fsync'],
    },
    {
      name: 'e2e-full',
      volume: { type: 'unknown', size: '1Gi', provisioner: 'kubernetes.io/no-provisioner' },
      profiles: ['etcd-fsync'],
    },
    {
      name: 'e2e-readonly',
      volume: { type: 'unknown', size: '1Gi', provisioner: 'kubernetes.io/no-provisioner' },
      profiles: ['etcd-fsync'],
    },
  ],

  // The node's etcd disk is slow too (a second FUSE filesystem with 15 ms per fsync); the probe
  // directory on it is prepared as docs/MANIFESTS.md says. The node list stays as shipped: the
  // cluster's one node is control-plane-0, the other two are the "missing node" case.
  etcd: { hostPath: run + '/disks/etcd/etcd-fioprobe' },

  // The node-local probes keep their state on the node, beside (not on) the probed disk:
  // a directory of the run, prepared by scripts/e2e/run.sh as docs/MANIFESTS.md says.
  stateHostPath: run + '/state',

  // Two failed runs in a row instead of three before FioProbeFailing fires: the root-owned etcd
  // directory can only be tried after the slow etcd disk's alert, and this keeps that chain
  // about a minute shorter. Every other window is the shipped one.
  monitoring: { mixinConfig: { failingRuns: 2 } },

  // The continuous stream runs on the node's (slow) etcd disk, the DaemonSet a user gets, and
  // the test's Prometheus scrapes it from its pod. The StorageClass streams stay off here: the
  // local PersistentVolumes above are one per class, taken by the probes' PVCs (their
  // StatefulSets are checked by server-side validation, tests/test_manifests_apiserver.py).
  continuous: { storageClasses: false },
}
