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
  //   e2e-unbound   no volume at all (no StorageClass of that name): its probe never runs,
  //                 the deployed probe that is Missing
  // None of them is provisioned: their volumes are the local ones above, one per class, which a
  // provisioning run would take (the provisioning probe has classes of its own, below).
  storageClasses: [sc { provision: false } for sc in (import 'manifests/config.libsonnet').storageClasses] + [
    {
      name: 'e2e-slow',
      volume: { type: 'io2', size: '1Gi', iops: 3000, provisioner: 'kubernetes.io/no-provisioner' },
      profiles: ['etcd-fsync'],
      provision: false,
    },
    {
      name: 'e2e-full',
      volume: { type: 'unknown', size: '1Gi', provisioner: 'kubernetes.io/no-provisioner' },
      profiles: ['etcd-fsync'],
      provision: false,
    },
    {
      name: 'e2e-readonly',
      volume: { type: 'unknown', size: '1Gi', provisioner: 'kubernetes.io/no-provisioner' },
      profiles: ['etcd-fsync'],
      provision: false,
    },
    {
      name: 'e2e-unbound',
      volume: { type: 'unknown', size: '1Gi', provisioner: 'kubernetes.io/no-provisioner' },
      profiles: ['etcd-fsync'],
      provision: false,
    },
  ],

  // The node's etcd disk is slow too (a second FUSE filesystem with 15 ms per fsync). The etcd
  // probes find the node by its role label, as shipped (scripts/e2e/cluster.sh labels it); a
  // directory on that disk stands for etcd's data (the e2e's own etcd keeps its data elsewhere),
  // so the probe directory beside it passes the same-filesystem check. The deployment creates
  // the probe directory (its prepare step).
  etcd: { hostPath: run + '/disks/etcd/etcd-fioprobe', dataDir: run + '/disks/etcd/data' },

  // The node-local probes keep their state on the node, beside (not on) the probed disk: a
  // directory of the run, created by the deployment.
  stateHostPath: run + '/state',

  // Two failed runs in a row instead of three before FioProbeFailing fires: the root-owned etcd
  // directory can only be tried after the slow etcd disk's alert, and this keeps that chain
  // about a minute shorter. Every other window is the shipped one.
  monitoring: { mixinConfig: { failingRuns: 2 } },

  // The provisioning probe on the cluster's real dynamic provisioner (local-path, no attach), every
  // minute (tests/e2e/test_40_provisioning.py runs the class whose provisioner does not exist,
  // scripts/e2e/cluster.sh's e2e-noprovisioner, once from the same pod template): a claim not bound
  // within 30 s fails its run, and a volume the stopped provisioner cannot delete fails it within
  // a minute (the shipped 5 minutes each would outlast the test), so a run takes well under the
  // minute and the alert's count of the last runs sees one a minute.
  provisioning: {
    everyMinutes: 1,
    storageClasses: ['local-path'],
    deadlines: { bound: 30, volume_deleted: 60 },
  },

  // The continuous stream runs on the node's (slow) etcd disk, the DaemonSet a user gets, and
  // the test's Prometheus scrapes it from its pod. The StorageClass streams stay off here: the
  // local PersistentVolumes above are one per class, taken by the probes' PVCs (their
  // StatefulSets are checked by server-side validation, tests/deploy/test_manifests_apiserver.py).
  continuous: { storageClasses: false },
}
