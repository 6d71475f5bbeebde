// The one file a user edits: what to probe, how often, and where the Pushgateway is.
// After editing, run `make generate` (or scripts/generate.d/30-manifests.sh) and apply with
// `kubectl apply -k manifests/`. docs/MANIFESTS.md explains every key.
//
// Everything not set here comes from manifests/lib/defaults.libsonnet: the same keys with
// their defaults and types (docs/MANIFESTS.md, "Configuration keys", has the table). A key
// that is not there or a value of the wrong type stops `make generate` with a line naming it.
{
  // Image of the probe: the release's (publish.json) unless set here to where you pushed your
  // own build (`make image`, README "Installing in a cluster"). Its tag is fioprobe's version
  // unless `tag` is set too.
  // image: { name: 'registry.example.org/you/fioprobe' },

  // Namespace of the Pushgateway and the StorageClass probes (Pod Security "restricted").
  namespace: 'fioprobe',

  // How often every probe runs. Each CronJob gets its own minute offset inside the interval
  // (derived from its name, so regenerating is stable): probes spread instead of starting
  // together. Must divide 60. A StorageClass may set `schedule: '<cron>'` instead (no offset).
  everyMinutes: 5,

  // One persistent probe PVC and one CronJob per entry. `volume.size` is also the PVC's size:
  // gp2's baseline IOPS depend on it, so the model and the real volume cannot disagree.
  // volume: type (one of fioprobe's volume types, listed in the README), size, iops /
  // throughput (provisioned, gp3/io1/io2), provisioner (for fioprobe_info), dedicated (only
  // the probe does IO on it, so gp2's burst balance can be modelled).
  // profiles: jobs/<name>.fio, as a name or {name, size?, io_size?, runtime?} (overrides).
  storageClasses: [
    {
      name: 'gp2',
      volume: { type: 'gp2', size: '100Gi', provisioner: 'ebs.csi.aws.com', dedicated: true },
      profiles: ['etcd-fsync', 'randread-iops', 'burst-ceiling'],
    },
    {
      name: 'gp3',
      volume: {
        type: 'gp3',
        size: '20Gi',
        iops: 3000,
        throughput: '125Mi',
        provisioner: 'ebs.csi.aws.com',
        dedicated: true,
      },
      profiles: ['etcd-fsync', 'randread-iops'],
    },
  ],

  // The disks that hold etcd: a DaemonSet on every node that carries the control-plane role
  // (node-role.kubernetes.io/control-plane or .../master), whatever it is called, so a node
  // that joins later is probed too; `nodes: [...]` names them instead. Each pod writes into
  // `hostPath`, a dedicated directory beside etcd's data directory `dataDir`, on the same
  // filesystem (checked before every run); the deployment creates it. Managed control planes
  // (EKS, GKE, AKS) have no such node: nothing runs there. `enabled: false` turns it off.
  etcd: {
    name: 'etcd-disk',  // the storageclass label of these node-local probes
    dataDir: '/var/lib/etcd',
    hostPath: '/var/lib/etcd-fioprobe',
    namespace: 'fioprobe-etcd',
    volume: { type: 'unknown' },
    profiles: ['etcd-fsync'],
  },
}
