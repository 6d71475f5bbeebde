// OpenShift Data Foundation: probe the Ceph RBD StorageClass ODF creates, on OpenShift.
// Use as overrides of manifests/config.libsonnet:
//   bash scripts/generate.d/30-manifests.sh OUT --tla-code overrides="$(cat manifests/examples/odf.libsonnet)"
// or copy its keys into manifests/config.libsonnet. `ceph-rbd` judges the StorageClass's
// fsync p99 at 32 ms and models no burst credits (docs/CEPH.md says where both come from).
// etcd stays on the control-plane nodes' local disks: etcd on Ceph/ODF is not recommended.
{
  platform: 'openshift',
  storageClasses: [
    {
      name: 'ocs-storagecluster-ceph-rbd',
      volume: {
        type: 'ceph-rbd',
        size: '10Gi',
        provisioner: 'openshift-storage.rbd.csi.ceph.com',
        dedicated: true,
      },
      profiles: ['etcd-fsync', 'randread-iops'],
    },
  ],
}
