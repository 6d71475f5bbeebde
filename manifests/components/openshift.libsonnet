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
// the two cannot drift. The pods whose init container creates their node directories (the
// etcd probes and stream: uid 0 with CAP_CHOWN and CAP_FOWNER in that one container) get a
// second SCC that allows that too, so the per-node probes' stays as narrow as it was.
// docs/MANIFESTS.md, "OpenShift", says which field means what.
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
  local allHostPathPods = [
    { namespace: o.metadata.namespace, spec: podSpec(o) }
    for o in objects
    if std.member(workloadKinds, o.kind)
       && std.length([v for v in podSpec(o).volumes if std.objectHas(v, 'hostPath')]) > 0
  ];
  // A volume's type: its one field besides the name (configMap, emptyDir, hostPath, ...):
  // the names the SCC's `volumes` lists.
  local volumeType(v) = [k for k in std.objectFields(v) if k != 'name'][0];
  local preparing(p) = std.length(std.get(p.spec, 'initContainers', [])) > 0;
  local restricted(k) =
    k.securityContext.readOnlyRootFilesystem && !k.securityContext.allowPrivilegeEscalation
    && k.securityContext.capabilities == { drop: ['ALL'] };
  // The prepare step (lib/etcd-nodes.libsonnet): uid 0, CAP_CHOWN and CAP_FOWNER, nothing else.
  local prepareStep(k) =
    k.securityContext.readOnlyRootFilesystem && !k.securityContext.allowPrivilegeEscalation
    && k.securityContext.runAsUser == 0
    && k.securityContext.capabilities == { drop: ['ALL'], add: ['CHOWN', 'FOWNER'] };

  // One SCC for the pods `pods`: `prepare` adds what their init container needs (uid 0 and two
  // capabilities, in that container only: every other container pins the probe user and
  // drops everything, as the asserts check).
  local scc(name, pods, prepare) =
    local volumeTypes = std.set(std.flattenArrays([[volumeType(v) for v in p.spec.volumes] for p in pods]));
    local users = std.set([p.spec.securityContext.runAsUser for p in pods]);
    local fsGroups = std.set([p.spec.securityContext.fsGroup for p in pods]);
    local containers = std.flattenArrays([p.spec.containers for p in pods]);
    local initContainers = std.flattenArrays([std.get(p.spec, 'initContainers', []) for p in pods]);
    // One user and one fsGroup (probeUser), and containers that ask for no more than the
    // restricted settings: what the SCC below allows.
    assert std.length(users) == 1 && users == fsGroups : 'hostPath pods pin users %s and fsGroups %s' % [users, fsGroups];
    assert std.all([restricted(k) for k in containers]) : 'a hostPath container asks for more than the restricted settings';
    assert std.all([prepareStep(k) for k in initContainers]) : 'an init container of a hostPath pod is not the prepare step';
    {
      apiVersion: 'security.openshift.io/v1',
      kind: 'SecurityContextConstraints',
      metadata: common.metadata(c, 'probe', name),
      // Granted through RBAC only (the ClusterRole below), never to users or groups here.
      users: [],
      groups: [],
      // Required fields that may be null, but `kubectl apply` drops a null and the API
      // server then refuses the object: 0 is what an unset priority counts as.
      priority: 0,
      allowPrivilegedContainer: false,
      allowPrivilegeEscalation: false,
      defaultAllowPrivilegeEscalation: false,
      allowHostDirVolumePlugin: true,
      allowHostIPC: false,
      allowHostNetwork: false,
      allowHostPID: false,
      allowHostPorts: false,
      // The prepare step's two capabilities may be asked for (by it alone: every other
      // container drops ALL itself); none is added by default.
      allowedCapabilities: if prepare then ['CHOWN', 'FOWNER'] else [],
      defaultAddCapabilities: [],
      requiredDropCapabilities: if prepare then [] else ['ALL'],
      readOnlyRootFilesystem: true,
      seccompProfiles: ['runtime/default'],
      volumes: volumeTypes,
      // The prepared directories' owner, and nothing else; with the prepare step, also uid 0
      // (a range from 0 to it: an SCC cannot list two users), which only that step asks for.
      runAsUser: if prepare then { type: 'MustRunAsRange', uidRangeMin: 0, uidRangeMax: users[0] }
      else { type: 'MustRunAs', uid: users[0] },
      fsGroup: { type: 'MustRunAs', ranges: [{ min: fsGroups[0], max: fsGroups[0] }] },
      supplementalGroups: { type: 'MustRunAs', ranges: [{ min: fsGroups[0], max: fsGroups[0] }] },
      // The namespace's MCS level, as restricted-v2: the pods can write only files labelled
      // container_file_t (the prepared directories, docs/MANIFESTS.md).
      seLinuxContext: { type: 'MustRunAs' },
    };
  local sccs = [
    { name: common.hostPathScc, prepare: false, pods: [p for p in allHostPathPods if !preparing(p)] },
    { name: common.prepareScc, prepare: true, pods: [p for p in allHostPathPods if preparing(p)] },
  ];
  local used = [x for x in sccs if x.pods != []];
  local roleName(sccName) = sccName + '-scc';
  if !common.assignsIds(c) || used == [] then {} else {
    [if x.prepare then 'securityContextConstraintsPrepare' else 'securityContextConstraints']: scc(x.name, x.pods, x.prepare)
    for x in used
  } + {
    [if x.prepare then 'clusterRolePrepare' else 'clusterRole']: {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: common.metadata(c, 'probe', roleName(x.name)),
      rules: [{
        apiGroups: ['security.openshift.io'],
        resources: ['securitycontextconstraints'],
        resourceNames: [x.name],
        verbs: ['use'],
      }],
    }
    for x in used
  } + {
    ['roleBinding-' + (if x.prepare then 'prepare-' else '') + ns]: {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: common.metadata(c, 'probe', roleName(x.name), ns),
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: roleName(x.name) },
      subjects: [
        { kind: 'ServiceAccount', name: sa, namespace: ns }
        for sa in std.set([p.spec.serviceAccountName for p in x.pods if p.namespace == ns])
      ],
    }
    for x in used
    for ns in std.set([p.namespace for p in x.pods])
  }
