// OpenShift (platform: 'openshift'): a SecurityContextConstraints object for the pods with a
// hostPath volume (the etcd probes, the continuous stream on the etcd nodes, the per-node
// probes), a ClusterRole that may `use` it and, in each of their namespaces, a RoleBinding of
// that ClusterRole to exactly their ServiceAccounts. Every other pod pins no IDs and is
// admitted by OpenShift's restricted-v2 (lib/common.libsonnet, podSecurity).
//
// Why an SCC of their own: restricted-v2 allows no hostPath and assigns a UID from the
// namespace's range, while the prepared node directories belong to probeUser (fioprobe
// refuses state it does not own). hostmount-anyuid would allow both, but also any UID, root
// included, and a writable root filesystem. This one allows what the pods ask for and
// nothing more: the SCC is derived from their pod specs (volume types, user, fsGroup), so
// the two cannot drift. docs/MANIFESTS.md, "OpenShift", says which field means what.
// Returns {key: object}; empty unless platform is 'openshift' and a hostPath pod exists.
local common = import '../lib/common.libsonnet';

// `workloads`: the components' {key: object} maps; pods are found in every workload kind.
function(config, workloads)
  local c = config;
  local objects = std.flattenArrays([
    [o for o in std.objectValues(group) if std.isObject(o) && std.objectHas(o, 'kind')]
    for group in workloads
  ]);
  local podSpec(o) =
    if o.kind == 'CronJob' then o.spec.jobTemplate.spec.template.spec else o.spec.template.spec;
  local workloadKinds = ['CronJob', 'DaemonSet', 'Deployment', 'StatefulSet'];
  local hostPathPods = [
    { namespace: o.metadata.namespace, spec: podSpec(o) }
    for o in objects
    if std.member(workloadKinds, o.kind)
       && std.length([v for v in podSpec(o).volumes if std.objectHas(v, 'hostPath')]) > 0
  ];
  // A volume's type: its one field besides the name (configMap, emptyDir, hostPath, ...):
  // the names the SCC's `volumes` lists.
  local volumeType(v) = [k for k in std.objectFields(v) if k != 'name'][0];
  local volumeTypes = std.set(std.flattenArrays([[volumeType(v) for v in p.spec.volumes] for p in hostPathPods]));
  local users = std.set([p.spec.securityContext.runAsUser for p in hostPathPods]);
  local fsGroups = std.set([p.spec.securityContext.fsGroup for p in hostPathPods]);
  local containers = std.flattenArrays([p.spec.containers for p in hostPathPods]);
  local namespaces = std.set([p.namespace for p in hostPathPods]);
  local accounts(namespace) = std.set([p.spec.serviceAccountName for p in hostPathPods if p.namespace == namespace]);
  local sccName = common.hostPathScc;
  local roleName = sccName + '-scc';
  if !common.assignsIds(c) || hostPathPods == [] then {} else {
    // One user and one fsGroup (probeUser), and containers that ask for no more than the
    // restricted settings: what the SCC below allows.
    assert std.length(users) == 1 && users == fsGroups : 'hostPath pods pin users %s and fsGroups %s' % [users, fsGroups],
    assert std.all([
      k.securityContext.readOnlyRootFilesystem && !k.securityContext.allowPrivilegeEscalation
      && k.securityContext.capabilities == { drop: ['ALL'] }
      for k in containers
    ]) : 'a hostPath container asks for more than the restricted settings',

    securityContextConstraints: {
      apiVersion: 'security.openshift.io/v1',
      kind: 'SecurityContextConstraints',
      metadata: common.metadata(c, 'probe', sccName),
      // Granted through RBAC only (the ClusterRole below), never to users or groups here.
      users: [],
      groups: [],
      // Required fields that may be null, but `kubectl apply` drops a null and the API
      // server then refuses the object: 0 is what an unset priority counts as, and no
      // capability is added or allowed.
      priority: 0,
      allowPrivilegedContainer: false,
      allowPrivilegeEscalation: false,
      defaultAllowPrivilegeEscalation: false,
      allowHostDirVolumePlugin: true,
      allowHostIPC: false,
      allowHostNetwork: false,
      allowHostPID: false,
      allowHostPorts: false,
      allowedCapabilities: [],
      defaultAddCapabilities: [],
      requiredDropCapabilities: ['ALL'],
      readOnlyRootFilesystem: true,
      seccompProfiles: ['runtime/default'],
      volumes: volumeTypes,
      // The prepared directories' owner, and nothing else.
      runAsUser: { type: 'MustRunAs', uid: users[0] },
      fsGroup: { type: 'MustRunAs', ranges: [{ min: fsGroups[0], max: fsGroups[0] }] },
      supplementalGroups: { type: 'MustRunAs', ranges: [{ min: fsGroups[0], max: fsGroups[0] }] },
      // The namespace's MCS level, as restricted-v2: the pods can write only files labelled
      // container_file_t (the prepared directories, docs/MANIFESTS.md).
      seLinuxContext: { type: 'MustRunAs' },
    },

    clusterRole: {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: common.metadata(c, 'probe', roleName),
      rules: [{
        apiGroups: ['security.openshift.io'],
        resources: ['securitycontextconstraints'],
        resourceNames: [sccName],
        verbs: ['use'],
      }],
    },
  } + {
    ['roleBinding-' + ns]: {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: common.metadata(c, 'probe', roleName, ns),
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: roleName },
      subjects: [
        { kind: 'ServiceAccount', name: sa, namespace: ns }
        for sa in accounts(ns)
      ],
    }
    for ns in namespaces
  }
