// Defaults of every key of manifests/config.libsonnet (which overrides them with `+`).
// docs/MANIFESTS.md describes each key; the comments here say why a default is what it is.
{
  version: '0.1.0',  // app.kubernetes.io/version; the probe image tag defaults to it too
  image: { name: 'registry.example.com/fioprobe', tag: $.version, pullPolicy: 'IfNotPresent' },
  namespace: 'fioprobe',

  everyMinutes: 5,
  // A run that could not start within this time after its slot is skipped, not started late:
  // a late start would overlap the next slot on the same disk.
  startingDeadlineSeconds: 120,
  // fioprobe's own per-profile wall-clock limit (fio is killed after it; a failure is pushed).
  profileTimeoutSeconds: 60,
  successfulJobsHistoryLimit: 1,
  failedJobsHistoryLimit: 3,
  // Numeric IDs so that runAsNonRoot can be checked by the kubelet; the Dockerfile creates
  // this user. fsGroup makes the PVC writable by it.
  probeUser: 65532,
  probeResources: {
    requests: { cpu: '50m', memory: '64Mi' },
    limits: { cpu: '1', memory: '256Mi' },
  },

  storageClasses: [],
  // Mount point of the probe volume inside the pod: the config's `directory`.
  probeMountPath: '/probe',
  configMountPath: '/etc/fioprobe',

  etcd: {
    name: 'etcd-disk',
    nodes: [],
    hostPath: '/var/lib/etcd-fioprobe',
    namespace: 'fioprobe-etcd',
    volume: { type: 'unknown' },
    profiles: ['etcd-fsync'],
    // Control-plane taints of kubeadm (control-plane), older clusters (master) and
    // OpenShift (master); NoExecute is not tolerated: evicted nodes are not probed.
    tolerations: [
      { key: 'node-role.kubernetes.io/control-plane', operator: 'Exists', effect: 'NoSchedule' },
      { key: 'node-role.kubernetes.io/master', operator: 'Exists', effect: 'NoSchedule' },
    ],
  },

  pushgateway: {
    name: 'fioprobe-pushgateway',
    image: 'quay.io/prometheus/pushgateway:v1.11.1',
    port: 9091,
    user: 65534,  // nobody, as in the upstream image
    storage: '1Gi',
    storageClassName: null,  // null: the cluster's default StorageClass
    persistenceInterval: '1m',
    resources: {
      requests: { cpu: '20m', memory: '32Mi' },
      limits: { cpu: '500m', memory: '256Mi' },
    },
    // Basic auth of pushes: a Secret with keys `username` and `password`, mounted into the
    // probes as files (never in env or args). The Pushgateway checks it through web-config.
    auth: { enabled: false, secretName: 'fioprobe-pushgateway-auth' },
    // TLS: the Pushgateway serves https with the certificate in its web-config Secret; probes
    // and the ServiceMonitor verify it with `ca.crt` from this Secret.
    tls: { enabled: false, caSecretName: 'fioprobe-pushgateway-ca', serverName: null },
    // Secret with key `web-config.yml` (exporter-toolkit format: basic_auth_users with bcrypt
    // hashes, tls_server_config); mounted only when auth or tls is enabled.
    webConfigSecretName: 'fioprobe-pushgateway-web-config',
    timeoutSeconds: 10,
    attempts: 3,
    // 'auto': as many replicas as the expected groups need by the sizing rule
    // (lib/sizing.libsonnet, docs/SIZING.md); or a number. More than one: a StatefulSet, each
    // replica with its own volume, and the probes pick a group's replica by hashing.
    replicas: 'auto',
    // Groups one replica holds; null: from the probe interval by the measured push cost
    // (lib/sizing.libsonnet, docs/SIZING.md): 1,000 at 5 minutes.
    groupsPerReplica: null,
  },

  // Per-node probes: a DaemonSet probing every node, on its local disks (hostPath) and on
  // each StorageClass through a generic ephemeral volume the scheduler binds on that node.
  // Every group carries `node`. docs/MANIFESTS.md, "Per-node probes".
  perNode: {
    enabled: false,
    name: 'fioprobe-node',
    // hostPath volumes need the "privileged" Pod Security level: a namespace of its own.
    namespace: 'fioprobe-nodes',
    // How many nodes to expect: sizes the Pushgateway (groups = nodes x targets x profiles).
    expectedNodes: 0,
    nodeSelector: {},
    tolerations: [],
    // A directory per node, prepared once (owned by the probe user), as the etcd one. It
    // holds the local-disk probe directories and every target's state, so a replaced pod
    // continues its counters without reading the Pushgateway back.
    hostPath: '/var/lib/fioprobe',
    // {name, profiles}: fio writes in <hostPath>/<name> (prepared like hostPath).
    localDisks: [],
    // {name, storageClassName?, volume: {type, size, ...}, profiles}: one generic ephemeral
    // volume of volume.size per StorageClass and pod.
    storageClasses: [],
    resources: {
      requests: { cpu: '20m', memory: '64Mi' },
      limits: { cpu: '1', memory: '256Mi' },
    },
  },

  // Where the cluster's DNS answers: the probes' only egress besides the Pushgateway.
  // OpenShift: namespace openshift-dns, pods dns.operator.openshift.io/daemonset-dns=default,
  // port 5353.
  dns: {
    namespace: 'kube-system',
    podSelector: { 'k8s-app': 'kube-dns' },
    port: 53,
  },

  monitoring: {
    // Namespace of the Prometheus that scrapes the Pushgateway (NetworkPolicy ingress).
    // OpenShift user-workload monitoring: openshift-user-workload-monitoring.
    prometheusNamespace: 'monitoring',
    serviceMonitor: { enabled: true, interval: '30s', labels: {} },
    prometheusRule: { enabled: true, labels: { prometheus: 'k8s', role: 'alert-rules' } },
    dashboards: {
      enabled: true,
      // The Grafana sidecar watches ConfigMaps with these labels, in its own namespace or in
      // every namespace (its searchNamespace); null: the fioprobe namespace.
      namespace: null,
      labels: { grafana_dashboard: '1' },
      folder: 'fioprobe',
    },
    // Overrides of the monitoring mixin's _config (config.libsonnet at the repository root).
    mixinConfig: {},
  },
}
