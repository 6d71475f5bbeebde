// The continuous stream (`fioprobe continuous`, docs/CONTINUOUS.md): a small write and an
// fdatasync about once a second per target, served on /metrics and scraped, so that stalls
// between the scheduled runs, and hangs while they last, are seen. A DaemonSet on the etcd
// nodes (those of the etcd probes) writes in the etcd probes' directory (the same hostPath); a
// one-replica StatefulSet per StorageClass writes on a small PVC of its own. Returns
// {etcd: {key: object}, storageClasses: {key: object}, podMonitor: object or null} and a
// hidden `scrapeConfig` (a Prometheus scrape configuration, not a Kubernetes object).
//
// Why long-running pods rather than more CronJobs: a hang must be visible while it lasts
// (the in-flight age at scrape time), which only a process that keeps running can report.
// Why scraped rather than pushed: the Pushgateway is for batch jobs; a push every second
// per target would be its busiest client, and a hung push path would hide the very hang.
local common = import '../lib/common.libsonnet';
local etcdNodes = import '../lib/etcd-nodes.libsonnet';
local sizing = import '../lib/sizing.libsonnet';

function(config) {
  local c = config,
  local s = c.continuous,
  local e = c.etcd,
  local component = 'continuous',
  local name = 'fioprobe-continuous',
  local configFile = 'config.yaml',
  local port = s.port,

  // The stream rotates through its file a write at a time; `fioprobe continuous` refuses a
  // file that holds none.
  assert !s.enabled || common.quantityBytes(s.fileSize) >= s.writeSize : 'fioprobe manifests config: continuous.fileSize (%s) must hold at least one write of continuous.writeSize (%d bytes)' % [s.fileSize, s.writeSize],

  local etcdOn = s.enabled && s.etcd && etcdNodes.enabled(c),
  local scs = if s.enabled && s.storageClasses then c.storageClasses else [],
  local namespaces = std.set(
    (if etcdOn then [e.namespace] else [])
    + (if std.length(scs) > 0 then [c.namespace] else [])
  ),

  // Where stream pods run: what a Prometheus must be allowed to discover pods in.
  namespaces:: namespaces,

  // --- fioprobe's configuration (the ConfigMap content) ---------------------------------
  // The same format as `fioprobe run`'s, so one loader checks both. Its loader requires a
  // Pushgateway; the stream never pushes, so only the URLs are given: no credential file is
  // named, and none is mounted.
  local urls = sizing.urls(c),
  local fioprobeConfig(target) = {
    pushgateway: if std.length(urls) == 1 then { url: urls[0] } else { shards: urls },
    targets: [target],
  },

  local configMap(namespace, data) = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: common.metadata(c, component, name, namespace),
    data: {
      [key]: std.manifestYamlDoc(data[key], indent_array_in_object=false, quote_keys=false) + '\n'
      for key in std.objectFields(data)
    },
  },

  // --- pod template ----------------------------------------------------------------------
  // Seconds as a user writes them: std.toString(0.005) is 0.0050000000000000001. Ten
  // significant digits are more than the bounds (0.0001 to 3600) can use.
  local seconds(value) = '%.10g' % value,
  local metricsProbe = { httpGet: { path: '/metrics', port: 'metrics' }, timeoutSeconds: 5 },
  local container = {
    name: 'continuous',
    image: '%s:%s' % [c.image.name, c.image.tag],
    imagePullPolicy: c.image.pullPolicy,
    command: [
      'fioprobe',
      'continuous',
      '--config',
      c.configMountPath + '/' + configFile,
      '--listen',
      ':%d' % port,
      '--interval',
      seconds(s.intervalSeconds),
      '--write-size',
      '%d' % s.writeSize,
      '--file-size',
      s.fileSize,
      '--stall-threshold',
      seconds(s.stallThresholdSeconds),
    ],
    env: [
      // Node-local targets are labelled node=<this node>; every stream reports ran_on_node.
      { name: 'NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
    ],
    ports: [{ name: 'metrics', containerPort: port, protocol: 'TCP' }],
    readinessProbe: metricsProbe { periodSeconds: 10 },
    // /metrics never waits for a writer (each runs in a child process), so it answers while
    // the disk hangs; a restart would end the hang's in-flight series and reveal nothing.
    // Generous: only a server that has stopped answering for minutes is restarted.
    livenessProbe: metricsProbe { periodSeconds: 30, failureThreshold: 6 },
    resources: s.resources,
    securityContext: common.containerSecurityContext,
    volumeMounts: [
      { name: 'config', mountPath: c.configMountPath, readOnly: true },
      { name: 'probe', mountPath: c.probeMountPath },
      // Python may want a scratch directory; the root filesystem is read-only.
      { name: 'tmp', mountPath: '/tmp' },
    ],
  },

  // `security`: common.podSecurity's, for the pod's volume (hostPath or its own PVC).
  local podSpec(configKey, security, extra) = {
    serviceAccountName: name,
    automountServiceAccountToken: false,
    enableServiceLinks: false,
    // SIGTERM ends the stream within 2 s (a writer stuck in the kernel is abandoned).
    terminationGracePeriodSeconds: 10,
    securityContext: security.securityContext,
    containers: [container],
    volumes: [
      {
        name: 'config',
        configMap: { name: name, items: [{ key: configKey, path: configFile }] },
      },
      { name: 'tmp', emptyDir: { sizeLimit: '16Mi' } },
    ],
  } + extra,

  local serviceAccount(namespace) = {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: common.metadata(c, component, name, namespace),
    automountServiceAccountToken: false,
  },

  // Prometheus may reach the metrics port; the stream opens no connection at all (it pushes
  // nothing and resolves no name).
  local networkPolicy(namespace) = {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: common.metadata(c, component, name, namespace),
    spec: {
      podSelector: { matchLabels: common.selectorLabels(component) },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [{
        from: [common.prometheusPeer(c)],
        ports: [{ protocol: 'TCP', port: port }],
      }],
      egress: [],
    },
  },

  // --- on each etcd node -----------------------------------------------------------------
  local etcdSecurity = common.podSecurity(c, c.probeUser, hostPath=true),
  local etcdProbeVolume = etcdNodes.hostPathVolume(c, 'probe', e.hostPath),
  etcd: if !etcdOn then {} else {
    serviceAccount: serviceAccount(e.namespace),
    networkPolicy: networkPolicy(e.namespace),
    configMap: configMap(e.namespace, {
      [e.name + '.yaml']: fioprobeConfig({
        name: e.name,
        directory: c.probeMountPath,
        node_local: true,
        etcd_disk: true,
        etcd_data_dir: etcdNodes.dataDirMountPath,
        volume: e.volume,
        // Required by the loader; the stream runs no profile.
        profiles: e.profiles,
      }),
    }),
    daemonSet: {
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: common.metadata(c, component, name, e.namespace, e.name),
      spec: {
        selector: { matchLabels: common.selectorLabels(component, e.name) },
        // One node at a time: the old pod has removed its file before the new one starts.
        updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } },
        template: {
          metadata: { labels: common.labels(c, component, e.name) } + etcdSecurity.metadata,
          spec: podSpec(e.name + '.yaml', etcdSecurity, {
            // The etcd probes' directory, created by the same step as theirs (whichever pod
            // starts first); the stream writes only in its own subdirectory of it.
            [if etcdNodes.prepares(c) then 'initContainers']: [etcdNodes.prepareContainer(c, [etcdProbeVolume])],
            containers: [container { volumeMounts+: [etcdNodes.dataDirMount] }],
            volumes+: [etcdProbeVolume, etcdNodes.dataDirVolume(c)],
            // Exactly the etcd probes' nodes.
            affinity: etcdNodes.affinity(c),
            tolerations: e.tolerations,
          }),
        },
      },
    },
  },

  // --- per StorageClass ------------------------------------------------------------------
  local scName(sc) = common.dnsName('fioprobe-continuous-' + sc.name),
  local pvcSecurity = common.podSecurity(c, c.probeUser),

  storageClasses: if std.length(scs) == 0 then {} else {
    serviceAccount: serviceAccount(c.namespace),
    networkPolicy: networkPolicy(c.namespace),
    configMap: configMap(c.namespace, {
      [sc.name + '.yaml']: fioprobeConfig({
        name: sc.name,
        directory: c.probeMountPath,
        node_local: false,
        etcd_disk: sc.etcdDisk,
        // The StorageClass's model (its type is what the stream publishes), though the
        // stream's own PVC is smaller: one write a second is far below any baseline.
        volume: sc.volume,
        profiles: sc.profiles,
      })
      for sc in scs
    }),
    // The StatefulSets' governing Service: older API schemas list serviceName as required
    // (schema validators refuse a StatefulSet without it). One headless Service serves every
    // stream of the namespace: pod DNS names only, no cluster IP.
    service: {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: common.metadata(c, component, name, c.namespace),
      spec: {
        clusterIP: 'None',
        selector: common.selectorLabels(component),
        ports: [{ name: 'metrics', port: port, targetPort: 'metrics', protocol: 'TCP' }],
      },
    },
  } + {
    ['statefulSet-' + sc.name]: {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: common.metadata(c, component, scName(sc), c.namespace, sc.name),
      spec: {
        replicas: 1,
        serviceName: name,
        selector: { matchLabels: common.selectorLabels(component, sc.name) },
        // The volume holds nothing worth keeping (one rotating file, no state): deleting
        // the StatefulSet deletes its PVC.
        persistentVolumeClaimRetentionPolicy: { whenDeleted: 'Delete' },
        template: {
          metadata: { labels: common.labels(c, component, sc.name) } + pvcSecurity.metadata,
          spec: podSpec(sc.name + '.yaml', pvcSecurity, {}),
        },
        volumeClaimTemplates: [{
          metadata: { name: 'probe', labels: common.labels(c, component, sc.name) },
          spec: {
            accessModes: ['ReadWriteOnce'],
            storageClassName: std.get(sc, 'storageClassName', sc.name),
            resources: { requests: { storage: s.pvcSize } },
          },
        }],
      },
    }
    for sc in scs
  },

  // --- scraping ----------------------------------------------------------------------------
  local pm = c.monitoring.podMonitor,
  local selector = common.selectorLabels(component),

  podMonitor: if std.length(namespaces) == 0 || !c.monitoring.operator || !pm.enabled then null else {
    apiVersion: 'monitoring.coreos.com/v1',
    kind: 'PodMonitor',
    metadata: common.metadata(c, component, name, c.namespace) + { labels+: pm.labels },
    spec: {
      selector: { matchLabels: selector },
      namespaceSelector: { matchNames: namespaces },
      podMetricsEndpoints: [{
        port: 'metrics',
        path: '/metrics',
        interval: pm.interval,
        // The stream sets storageclass and node itself, as the pushed series carry them;
        // the scrape's own labels must not overwrite them.
        honorLabels: true,
      }],
    },
  },

  // The same pods, for a Prometheus without prometheus-operator (docs/MANIFESTS.md): the
  // PodMonitor's selector and port as relabelling rules.
  local metaLabel(label) =
    '__meta_kubernetes_pod_label_' + std.join('', [
      if std.member('abcdefghijklmnopqrstuvwxyz0123456789', std.asciiLower(ch)) then ch else '_'
      for ch in std.stringChars(label)
    ]),
  local selectorKeys = std.objectFields(selector),
  scrapeConfig:: if std.length(namespaces) == 0 then null else {
    scrape_configs: [{
      job_name: name,
      honor_labels: true,
      scrape_interval: pm.interval,
      metrics_path: '/metrics',
      kubernetes_sd_configs: [{ role: 'pod', namespaces: { names: namespaces } }],
      relabel_configs: [
        {
          action: 'keep',
          source_labels: [metaLabel(k) for k in selectorKeys],
          regex: std.join(';', [selector[k] for k in selectorKeys]),
        },
        { action: 'keep', source_labels: ['__meta_kubernetes_pod_container_port_name'], regex: 'metrics' },
        // Finished pods keep their IP in the API for a while, and it may be reused.
        { action: 'drop', source_labels: ['__meta_kubernetes_pod_phase'], regex: 'Failed|Succeeded' },
        { source_labels: ['__meta_kubernetes_namespace'], target_label: 'namespace' },
        { source_labels: ['__meta_kubernetes_pod_name'], target_label: 'pod' },
        { source_labels: ['__meta_kubernetes_pod_container_name'], target_label: 'container' },
      ],
    }],
  },
}
