// Per-node probes: one DaemonSet pod per node runs `fioprobe run --every`, probing the
// node's local disks (directories under a prepared hostPath) and every configured
// StorageClass through a generic ephemeral volume, which the scheduler provisions for the pod
// on its node (WaitForFirstConsumer) and deletes with it. Every group carries `node`.
//
// Why a DaemonSet rather than a CronJob per node: 1,000 nodes x one CronJob every 5 minutes
// is 12,000 Jobs and Pods created and deleted per hour (API server, scheduler, kubelet,
// and a new ephemeral volume provisioned and deleted for each StorageClass every run). A
// DaemonSet pod lives as long as the node, keeps its volumes, and spreads its runs over the
// interval by itself (fioprobe.probe.schedule.spread_offset of the node name).
// Returns {key: object}; empty when perNode.enabled is false.
local common = import '../lib/common.libsonnet';

function(config, probes)
  local c = config;
  local p = c.perNode;
  local configKey = 'per-node.yaml';
  local nodeDir = '/node';
  local probeRoot = c.probeMountPath;
  local volumeName(sc) = common.dnsName('sc-' + sc.name, 63);
  local names = [t.name for t in p.localDisks + p.storageClasses];
  local fioprobeConfig = {
    owner: p.name,
    pushgateway: probes.pushgatewayConfig,
    targets: [
      {
        name: d.name,
        directory: '%s/%s' % [nodeDir, d.name],
        node_local: true,
        etcd_disk: d.etcdDisk,
        volume: d.volume,
        timeout_seconds: c.profileTimeoutSeconds,
        profiles: d.profiles,
      } + probes.nodeState(d.name)
      for d in p.localDisks
    ] + [
      {
        name: sc.name,
        directory: '%s/%s' % [probeRoot, sc.name],
        node_local: true,
        etcd_disk: sc.etcdDisk,
        // An unbound or unmounted ephemeral volume must not turn into a probe of the
        // container's own filesystem.
        require_mount_point: true,
        volume: sc.volume,
        timeout_seconds: c.profileTimeoutSeconds,
        profiles: sc.profiles,
        // On the node, not on the ephemeral volume: it outlives the pod.
      } + probes.nodeState(sc.name)
      for sc in p.storageClasses
    ],
  };
  local container = probes.container {
    command: [
      'fioprobe',
      'run',
      '--config',
      c.configMountPath + '/config.yaml',
      '--every',
      '%d' % (c.everyMinutes * 60),
    ],
    resources: p.resources,
    volumeMounts: [m for m in super.volumeMounts if m.name != 'probe'] + [
      { name: 'node', mountPath: nodeDir },
      probes.stateMount,
    ] + [
      { name: volumeName(sc), mountPath: '%s/%s' % [probeRoot, sc.name] }
      for sc in p.storageClasses
    ],
  };
  local volumes = [v for v in probes.volumes(configKey, {}) if v.name != 'probe'] + [
    // Type Directory: prepared once per node with the probe user as owner, never created
    // by the kubelet (it would be root's).
    { name: 'node', hostPath: { path: p.hostPath, type: 'Directory' } },
    probes.stateVolume,
  ] + [
    {
      name: volumeName(sc),
      ephemeral: {
        volumeClaimTemplate: {
          metadata: { labels: common.labels(c, 'probe', sc.name) },
          spec: {
            accessModes: ['ReadWriteOnce'],
            storageClassName: std.get(sc, 'storageClassName', sc.name),
            resources: { requests: { storage: sc.volume.size } },
          },
        },
      },
    }
    for sc in p.storageClasses
  ];
  // hostPath volumes: the pinned IDs on every platform (its prepared directories are probeUser's).
  local security = common.podSecurity(c, c.probeUser, hostPath=true);
  // The node's state directory must be no probed directory, nor hold one, nor be inside
  // one: fio and the probed directory's tenants would write the state.
  local within(a, b) = a == b || std.startsWith(a, b + '/');
  local overlapping = [d.name for d in p.localDisks if within(c.stateHostPath, '%s/%s' % [p.hostPath, d.name]) || within('%s/%s' % [p.hostPath, d.name], c.stateHostPath)];
  if !p.enabled then {} else {
    assert overlapping == [] : 'fioprobe manifests config: stateHostPath %s overlaps the directories of perNode.localDisks %s; give it a directory of its own' % [c.stateHostPath, std.join(', ', overlapping)],
    // Every target has profiles (lib/defaults.libsonnet checks that); an enabled DaemonSet
    // with no target at all would run pods that probe nothing.
    assert std.length(p.localDisks) + std.length(p.storageClasses) > 0 : 'fioprobe manifests config: perNode.enabled needs perNode.localDisks or perNode.storageClasses',
    // A target's name is the storageclass label of its groups: two targets of one name, or
    // one named like the etcd disks, would push the same grouping key from two writers, and
    // the mixin could not tell the per-node probes from the etcd ones.
    assert std.length(std.set(names)) == std.length(names) && !(c.etcd.enabled && std.member(names, c.etcd.name)) : 'fioprobe manifests config: perNode.localDisks and perNode.storageClasses need names of their own, different from each other and from etcd.name, got %s' % std.join(', ', names),
    // hostPath volumes are outside every Pod Security level but "privileged" (as the etcd
    // probes' namespace); warn/audit stay "restricted".
    namespace: {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: common.metadata(c, 'probe', p.namespace) + {
        labels+: {
          'pod-security.kubernetes.io/enforce': 'privileged',
          'pod-security.kubernetes.io/warn': 'restricted',
          'pod-security.kubernetes.io/audit': 'restricted',
        },
      },
    },
    serviceAccount: probes.serviceAccount(p.namespace),
    networkPolicy: probes.networkPolicy(p.namespace),
    configMap: probes.configMap(p.namespace, { [configKey]: fioprobeConfig }),
    daemonSet: {
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: common.metadata(c, 'probe', p.name, p.namespace, 'per-node'),
      spec: {
        selector: { matchLabels: common.selectorLabels('probe', 'per-node') },
        // A tenth of the nodes at a time. A new pod continues from the state on the node and
        // its first run waits for the node's slot, so a rollout makes no burst of pushes.
        updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: '10%' } },
        template: {
          metadata: { labels: common.labels(c, 'probe', 'per-node') } + security.metadata,
          spec: {
            serviceAccountName: 'fioprobe',
            automountServiceAccountToken: false,
            enableServiceLinks: false,
            // A run in progress pushes its failure (interrupted) before the pod goes.
            terminationGracePeriodSeconds: 60,
            securityContext: security.securityContext,
            containers: [container],
            volumes: volumes,
            nodeSelector: p.nodeSelector,
            tolerations: p.tolerations,
          },
        },
      },
    },
  }
