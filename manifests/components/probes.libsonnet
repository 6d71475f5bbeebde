// Probes: a CronJob per StorageClass (its own persistent PVC) and a DaemonSet on the nodes
// that hold etcd (hostPath). The entrypoint is `fioprobe run --config ...`, whose
// YAML (exporter/fioprobe/target/config.py) is generated here from the same config, so the two
// cannot drift. Returns {object key: Kubernetes object}.
local common = import '../lib/common.libsonnet';
local sizing = import '../lib/sizing.libsonnet';

function(config) {
  local c = config,
  local pgw = c.pushgateway,
  local authDir = '/var/run/secrets/fioprobe/pushgateway-auth',
  local caDir = '/var/run/secrets/fioprobe/pushgateway-ca',
  local configFile = 'config.yaml',

  // --- fioprobe's own configuration (the ConfigMap content) ---------------------------
  // One Pushgateway, or its replicas in ordinal order (the probes hash over them).
  local urls = sizing.urls(c),
  local fioprobePushgateway = (if std.length(urls) == 1 then { url: urls[0] } else { shards: urls })
                              + {
                                timeout_seconds: pgw.timeoutSeconds,
                                attempts: pgw.attempts,
                              }
                              + (if pgw.auth.enabled then {
                                   username_file: authDir + '/username',
                                   password_file: authDir + '/password',
                                 } else {})
                              + (if pgw.tls.enabled then { ca_file: caDir + '/ca.crt' } else {}),

  // owner: one per configuration, so that `fioprobe gc` with one never deletes another's.
  // etcdDisk: the disk holds etcd's data, a fact of the deployment that every push publishes
  // (fioprobe_info{etcd_disk}) and the mixin's etcd alerts select by.
  // state: where the target's state lives (docs/SAFETY.md, "Where state lives"): a
  // StorageClass probe's own PVC is dedicated (its state on it, persisting with it); a
  // node-local probe's hostPath is shared, its state in the node's state directory.
  local fioprobeConfig(name, nodeLocal, volume, profiles, etcdDisk, state) = {
    owner: name,
    pushgateway: fioprobePushgateway,
    targets: [{
      name: name,
      directory: c.probeMountPath,
      node_local: nodeLocal,
      etcd_disk: etcdDisk,
      volume: volume,
      timeout_seconds: c.profileTimeoutSeconds,
      profiles: profiles,
    } + state],
  },

  // The node's state directory (stateHostPath), for node-local probes: type Directory, as
  // every hostPath here, prepared once with the probe user as owner (the kubelet would make
  // it root's). Each target keeps its state in <stateMountPath>/<target name>.
  local stateMountPath = '/var/lib/fioprobe-state',
  local stateVolume = { name: 'state', hostPath: { path: c.stateHostPath, type: 'Directory' } },
  local stateMount = { name: 'state', mountPath: stateMountPath },
  local nodeState(name) = { state_dir: '%s/%s' % [stateMountPath, name] },
  // The probe's own PVC: only the probe writes it, unless the config says otherwise.
  local dedicated(volume) = volume { dedicated: std.get(volume, 'dedicated', true) != false },

  // --- pod template -------------------------------------------------------------------
  // Worst case of one run, per profile: fio to its timeout plus the volume worker's margin
  // (VOLUME_MARGIN_SECONDS in exporter/fioprobe/probe/volume_run.py, 25 s), the publish on a
  // dedicated volume (its worker's limit, PUBLISH_ON_VOLUME_SECONDS in probe/prober.py, 60 s),
  // and two Pushgateway calls
  // (the read-back and the push), every attempt to its timeout; then a minute for the pod.
  // Past it the Job ends even while a pod stuck on a hung volume stays Terminating, and the
  // next scheduled run starts (tests/deploy/test_manifests.py keeps these in step with the two).
  local volumeMarginSeconds = 25,
  local publishOnVolumeSeconds = 60,
  local activeDeadline(profiles) =
    std.length(profiles) * (
      c.profileTimeoutSeconds + volumeMarginSeconds + publishOnVolumeSeconds
      + 2 * pgw.timeoutSeconds * pgw.attempts
    ) + 60,

  local container = {
    name: 'fioprobe',
    image: '%s:%s' % [c.image.name, c.image.tag],
    imagePullPolicy: c.image.pullPolicy,
    command: ['fioprobe', 'run', '--config', c.configMountPath + '/' + configFile],
    env: [
      // Node-local targets are labelled node=<this node>; every probe reports ran_on_node.
      { name: 'NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
    ],
    resources: c.probeResources,
    securityContext: common.containerSecurityContext,
    volumeMounts: [
                    { name: 'config', mountPath: c.configMountPath, readOnly: true },
                    { name: 'probe', mountPath: c.probeMountPath },
                    // Python and fio may want a scratch directory; the root filesystem is read-only.
                    { name: 'tmp', mountPath: '/tmp' },
                  ] + (if pgw.auth.enabled then [
                         { name: 'pushgateway-auth', mountPath: authDir, readOnly: true },
                       ] else [])
                  + (if pgw.tls.enabled then [
                       { name: 'pushgateway-ca', mountPath: caDir, readOnly: true },
                     ] else []),
  },

  local volumes(configKey, probeVolume) = [
                                            {
                                              name: 'config',
                                              configMap: { name: 'fioprobe-config', items: [{ key: configKey, path: configFile }] },
                                            },
                                            { name: 'probe' } + probeVolume,
                                            { name: 'tmp', emptyDir: { sizeLimit: '16Mi' } },
                                          ] + (if pgw.auth.enabled then [
                                                 {
                                                   name: 'pushgateway-auth',
                                                   secret: {
                                                     secretName: pgw.auth.secretName,
                                                     items: [{ key: 'username', path: 'username' }, { key: 'password', path: 'password' }],
                                                   },
                                                 },
                                               ] else [])
                                          + (if pgw.tls.enabled then [
                                               {
                                                 name: 'pushgateway-ca',
                                                 secret: { secretName: pgw.tls.caSecretName, items: [{ key: 'ca.crt', path: 'ca.crt' }] },
                                               },
                                             ] else []),

  // A hostPath probe keeps its pinned IDs on every platform: its prepared directories are
  // probeUser's.
  local cronJob(name, namespace, instance, schedule, profiles, configKey, probeVolume, podExtra) = {
    local security = common.podSecurity(c, c.probeUser, hostPath=std.objectHas(probeVolume, 'hostPath')),
    apiVersion: 'batch/v1',
    kind: 'CronJob',
    metadata: common.metadata(c, 'probe', name, namespace, instance),
    spec: {
      schedule: schedule,
      timeZone: 'Etc/UTC',
      concurrencyPolicy: 'Forbid',
      startingDeadlineSeconds: c.startingDeadlineSeconds,
      successfulJobsHistoryLimit: c.successfulJobsHistoryLimit,
      failedJobsHistoryLimit: c.failedJobsHistoryLimit,
      jobTemplate: {
        metadata: { labels: common.labels(c, 'probe', instance) },
        spec: {
          // A failed probe has already pushed its failure; retrying at once would double
          // its IO on a disk that is struggling. The next slot runs it again.
          backoffLimit: 0,
          activeDeadlineSeconds: activeDeadline(profiles),
          template: {
            metadata: {
              labels: common.labels(c, 'probe', instance),
            } + security.metadata,
            spec: {
              restartPolicy: 'Never',
              serviceAccountName: 'fioprobe',
              automountServiceAccountToken: false,
              enableServiceLinks: false,
              terminationGracePeriodSeconds: 30,
              securityContext: security.securityContext,
              containers: [container],
              volumes: volumes(configKey, probeVolume),
            } + podExtra,
          },
        },
      },
    },
  },

  // The token is mounted by the pods that read the API, never by default.
  local serviceAccount(namespace, name='fioprobe') = {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: common.metadata(c, 'probe', name, namespace),
    automountServiceAccountToken: false,
  },

  // Probes may reach the Pushgateway and the cluster DNS (to resolve the Pushgateway's
  // Service name), nothing else; nothing may reach them. An existing Pushgateway
  // (pushgateway.url) by its port, on the addresses of pushgateway.cidrs or any.
  local toPushgateway = if pgw.url != null then common.toExistingPushgateway(pgw) else {
    to: [{
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': c.namespace } },
      podSelector: { matchLabels: common.selectorLabels('pushgateway') },
    }],
    ports: [{ protocol: 'TCP', port: pgw.port }],
  },
  // `apiServer`: the pods also read the Kubernetes API (apiServer's ports, on its addresses
  // or any).
  local toApiServer = {
    ports: [{ protocol: 'TCP', port: port } for port in c.apiServer.ports],
  } + (if std.length(c.apiServer.cidrs) == 0 then {} else {
         to: [{ ipBlock: { cidr: cidr } } for cidr in c.apiServer.cidrs],
       }),
  local networkPolicy(namespace, apiServer=false) = {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: common.metadata(c, 'probe', 'fioprobe-probes', namespace),
    spec: {
      podSelector: { matchLabels: common.selectorLabels('probe') },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [],
      egress: [
        toPushgateway,
        {
          to: [{
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': c.dns.namespace } },
            podSelector: { matchLabels: c.dns.podSelector },
          }],
          ports: [{ protocol: 'UDP', port: c.dns.port }, { protocol: 'TCP', port: c.dns.port }],
        },
      ] + (if apiServer then [toApiServer] else []),
    },
  },

  local configMap(namespace, data) = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: common.metadata(c, 'probe', 'fioprobe-config', namespace),
    data: {
      [key]: std.manifestYamlDoc(data[key], indent_array_in_object=false, quote_keys=false) + '\n'
      for key in std.objectFields(data)
    },
  },

  // For the per-node mode (components/pernode.libsonnet): the same pod, config and policies.
  pushgatewayConfig:: fioprobePushgateway,
  container:: container,
  volumes:: volumes,
  stateVolume:: stateVolume,
  stateMount:: stateMount,
  nodeState:: nodeState,
  activeDeadline:: activeDeadline,
  serviceAccount:: serviceAccount,
  networkPolicy:: networkPolicy,
  configMap:: configMap,

  // --- StorageClass probes --------------------------------------------------------------
  local scs = c.storageClasses,
  local scName(sc) = common.dnsName('fioprobe-' + sc.name),

  storageClasses: if std.length(scs) == 0 then {} else {
    serviceAccount: serviceAccount(c.namespace),
    networkPolicy: networkPolicy(c.namespace),
    configMap: configMap(c.namespace, {
      [sc.name + '.yaml']: fioprobeConfig(sc.name, false, dedicated(sc.volume), sc.profiles, sc.etcdDisk, {})
      for sc in scs
    }),
  } + {
    ['pvc-' + sc.name]: {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: common.metadata(c, 'probe', scName(sc), c.namespace, sc.name),
      spec: {
        accessModes: ['ReadWriteOnce'],
        storageClassName: std.get(sc, 'storageClassName', sc.name),
        resources: { requests: { storage: sc.volume.size } },
      },
    }
    for sc in scs
  } + {
    ['cronJob-' + scs[i].name]: cronJob(
      scName(scs[i]),
      c.namespace,
      scs[i].name,
      common.schedule(c, i, std.get(scs[i], 'schedule')),
      scs[i].profiles,
      scs[i].name + '.yaml',
      { persistentVolumeClaim: { claimName: scName(scs[i]) } },
      {},
    )
    for i in std.range(0, std.length(scs) - 1)
  },

  // --- etcd disk probes: a DaemonSet on the etcd nodes ------------------------------------
  // Why a DaemonSet with the in-process schedule (`fioprobe run --every`) and not a CronJob per
  // node: the nodes are found by their role label, not named, so a node that joins later gets
  // its pod without a new install; and the members' runs must never overlap (a probe adds IO
  // to one member of the quorum at a time), which needs every member to know the others:
  // each pod lists them (by role, through the API, or the named ones) and runs only in its
  // own slot of the interval (exporter/fioprobe/probe/stagger.py, slot.py).
  local e = c.etcd,
  local etcdNodes = import '../lib/etcd-nodes.libsonnet',
  local byRole = etcdNodes.byRole(c),
  local etcdAccount = 'fioprobe-etcd',
  local etcdMembersRole = 'fioprobe-etcd-members',
  local etcdVolumes = [
    etcdNodes.hostPathVolume(c, 'probe', e.hostPath),
    etcdNodes.hostPathVolume(c, 'state', c.stateHostPath),
  ],

  local etcdStateOverlap = std.startsWith(c.stateHostPath + '/', e.hostPath + '/') || std.startsWith(e.hostPath + '/', c.stateHostPath + '/'),
  local overlaps(a, b) = std.startsWith(a + '/', b + '/') || std.startsWith(b + '/', a + '/'),
  local etcdDataOverlap = overlaps(e.dataDir, e.hostPath),
  local stateDataOverlap = overlaps(e.dataDir, c.stateHostPath),
  etcd: if !etcdNodes.enabled(c) then {} else {
    assert !etcdStateOverlap : 'fioprobe manifests config: stateHostPath %s overlaps etcd.hostPath %s, the probed directory; give it a directory of its own' % [c.stateHostPath, e.hostPath],
    // The probe directory is created and chowned by the deployment: inside etcd's data
    // directory it would hand etcd's files to the probe user; holding it, it would be etcd's.
    assert !etcdDataOverlap : "fioprobe manifests config: etcd.hostPath %s overlaps etcd.dataDir %s; give the probe a directory of its own beside etcd's data" % [e.hostPath, e.dataDir],
    assert !stateDataOverlap : "fioprobe manifests config: stateHostPath %s overlaps etcd.dataDir %s; the probe's state must not be among etcd's files" % [c.stateHostPath, e.dataDir],
    // hostPath volumes are outside every Pod Security level but "privileged", so these
    // probes live in their own namespace; the restricted settings are still set on the pod
    // (warn/audit stay "restricted": the reported violations are the hostPath volumes and the
    // prepare step's uid 0 with CAP_CHOWN and CAP_FOWNER).
    namespace: {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: common.metadata(c, 'probe', e.namespace) + {
        labels+: {
          'pod-security.kubernetes.io/enforce': 'privileged',
          'pod-security.kubernetes.io/warn': 'restricted',
          'pod-security.kubernetes.io/audit': 'restricted',
        },
      },
    },
    serviceAccount: serviceAccount(e.namespace, etcdAccount),
    networkPolicy: networkPolicy(e.namespace, apiServer=byRole),
    configMap: configMap(e.namespace, {
      [e.name + '.yaml']: fioprobeConfig(e.name, true, e.volume, e.profiles, true, nodeState(e.name) {
        etcd_data_dir: etcdNodes.dataDirMountPath,
      }),
    }),
    daemonSet: {
      local security = common.podSecurity(c, c.probeUser, hostPath=true),
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: common.metadata(c, 'probe', etcdAccount, e.namespace, e.name),
      spec: {
        selector: { matchLabels: common.selectorLabels('probe', e.name) },
        // One member at a time, as its runs: a new pod continues from the state on the node
        // and runs from the interval after the one it started in.
        updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } },
        template: {
          metadata: { labels: common.labels(c, 'probe', e.name) } + security.metadata,
          spec: {
            serviceAccountName: etcdAccount,
            // The token only where the API is read (to find the members by role), and there
            // only in the probe's container (etcdNodes.apiTokenVolume).
            automountServiceAccountToken: false,
            enableServiceLinks: false,
            // A run in progress pushes its failure (interrupted) before the pod goes.
            terminationGracePeriodSeconds: 60,
            securityContext: security.securityContext,
            [if etcdNodes.prepares(c) then 'initContainers']: [etcdNodes.prepareContainer(c, etcdVolumes)],
            containers: [container {
              command: [
                'fioprobe',
                'run',
                '--config',
                c.configMountPath + '/' + configFile,
                '--every',
                '%d' % (c.everyMinutes * 60),
              ] + etcdNodes.memberArgs(c),
              volumeMounts+: [stateMount, etcdNodes.dataDirMount]
                             + (if byRole then [etcdNodes.apiTokenMount] else []),
            }],
            volumes: [
                       v
                       for v in volumes(e.name + '.yaml', { hostPath: etcdVolumes[0].hostPath })
                     ] + [etcdVolumes[1], etcdNodes.dataDirVolume(c)]
                     + (if byRole then [etcdNodes.apiTokenVolume] else []),
            affinity: etcdNodes.affinity(c),
            tolerations: e.tolerations,
          },
        },
      },
    },
  } + (if !byRole then {} else {
         // Reading the members' names is all the API access the etcd probes have: get and
         // list of Node objects (their labels), nothing namespaced, nothing written.
         clusterRole: {
           apiVersion: 'rbac.authorization.k8s.io/v1',
           kind: 'ClusterRole',
           metadata: common.metadata(c, 'probe', etcdMembersRole),
           rules: [{ apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list'] }],
         },
         clusterRoleBinding: {
           apiVersion: 'rbac.authorization.k8s.io/v1',
           kind: 'ClusterRoleBinding',
           metadata: common.metadata(c, 'probe', etcdMembersRole),
           roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: etcdMembersRole },
           subjects: [{ kind: 'ServiceAccount', name: etcdAccount, namespace: e.namespace }],
         },
       }),
}
