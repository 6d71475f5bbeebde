// The provisioning probe (`fioprobe provision`, docs/PROVISIONING.md): a CronJob that, on its
// own schedule, creates a small claim and a pod of each StorageClass that has `provision`
// on, times every step from claim to first fdatasync and the deletion, and pushes each
// class's run (job="fioprobe_provision", storageclass).
//
// Where what runs, and why:
// - the CronJob runs in the probes' namespace, with a ServiceAccount of its own whose token
//   is mounted (it is the only pod of the namespace that talks to the API server);
// - the claims and pods it makes live in provisioning.namespace, which holds nothing else:
//   Pod Security "restricted" enforced (the test pod is built to pass it), no Secret (the
//   pods mount no token), and a NetworkPolicy that lets nothing in or out of its pods;
// - its RBAC is exactly what a run needs: in that namespace, create, get, list, watch and
//   delete of claims and pods, list and watch of events; cluster-wide, get, list and watch
//   of StorageClasses (the binding mode, the reclaim policy), PersistentVolumes (the bound
//   volume and its deletion) and VolumeAttachments (attach and detach). Nothing else: no
//   Secret, no node, nothing written outside that namespace.
// The classes run one after the other in one Job (the command's order): two runs the
// scheduler places may share a node's attach slots and time each other's waits. A class given
// provisioning.nodes runs once per node, up to maxParallel at once (runs on different nodes
// share no node). The state (the groups'
// counters) is the invocation's own (--ephemeral-state, a private directory in the emptyDir
// at /tmp): a state that is new at every run reads its group back from the Pushgateway
// before it pushes (exporter/fioprobe/publish/outcome.py), so no volume of any class is
// needed to count runs, and a class that cannot provision never blocks the probe that
// reports it. Returns {object key: Kubernetes object}; empty when nothing is
// provisioned.
local common = import '../lib/common.libsonnet';
local etcdNodes = import '../lib/etcd-nodes.libsonnet';
local provisioning = import '../lib/provisioning.libsonnet';
local sizing = import '../lib/sizing.libsonnet';

function(config, probes) {
  local c = config,
  local p = c.provisioning,
  local pgw = c.pushgateway,
  local classNames = provisioning.classes(c),
  local unknownNodeClasses = [n for n in std.objectFields(p.nodes) if !std.member(classNames, n)],
  local badNames = [n for n in classNames if !common.isSubdomain(n)],
  local name = 'fioprobe-provision',
  local labels = common.labels(c, 'provision'),
  local authDir = '/var/run/secrets/fioprobe/pushgateway-auth',
  local caDir = '/var/run/secrets/fioprobe/pushgateway-ca',

  // The longest one class may take: every step of the run and of the deletion to its
  // deadline (exporter/fioprobe/provision/runner.py's DEADLINES, tests/deploy keep them in
  // step), then the Pushgateway calls of a push from a new state (publish/outcome.py: the
  // read-back, the second look, the push and the check that it held), every attempt to its
  // timeout. The Job ends past it; the next slot starts a new run, which removes what this
  // one left.
  local pushCalls = 4,
  local defaultDeadlines = {
    created: 30,
    scheduled: 120,
    bound: 300,
    attached: 300,
    running: 300,
    written: 120,
    pod_deleted: 120,
    detached: 420,
    volume_deleted: 300,
  },
  local stepDeadlinesSeconds = std.foldl(function(sum, v) sum + v, std.objectValues(defaultDeadlines + p.deadlines), 0),
  local activeDeadline = provisioning.rounds(c) * (stepDeadlinesSeconds + pushCalls * pgw.timeoutSeconds * pgw.attempts) + 60,

  // The groups go to the first replica: one home per group whatever the replica count, so
  // nothing moves when it changes (the probes' groups are spread by their key instead).
  local gatewayArgs = ['--gateway', sizing.urls(c)[0], '--timeout', std.toString(pgw.timeoutSeconds), '--attempts', '%d' % pgw.attempts]
                      + (if pgw.auth.enabled then ['--username-file', authDir + '/username', '--password-file', authDir + '/password'] else [])
                      + (if pgw.tls.enabled then ['--ca-file', caDir + '/ca.crt'] else []),

  local security = common.podSecurity(c, c.probeUser),

  local roleRules = [
    { apiGroups: [''], resources: ['persistentvolumeclaims', 'pods'], verbs: ['create', 'get', 'list', 'watch', 'delete'] },
    { apiGroups: [''], resources: ['events'], verbs: ['list', 'watch'] },
  ],
  local clusterRules = [
    { apiGroups: [''], resources: ['persistentvolumes'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: ['storage.k8s.io'], resources: ['storageclasses', 'volumeattachments'], verbs: ['get', 'list', 'watch'] },
  ],
  local subject = { kind: 'ServiceAccount', name: name, namespace: c.namespace },

  // Namespaces the test namespace must not be: the deployment's own (its Role may create any
  // pod there, which could run as any of that namespace's ServiceAccounts, and its policy
  // isolates every pod there) and the cluster's.
  local taken = std.set([c.namespace, c.etcd.namespace, c.perNode.namespace, c.dns.namespace, 'default']
                        + (if c.monitoring.prometheusNamespace == null then [] else [c.monitoring.prometheusNamespace])),
  objects: if !p.enabled || std.length(classNames) == 0 then {} else {
    assert !std.member(taken, p.namespace) && !std.startsWith(p.namespace, 'kube-') && !std.startsWith(p.namespace, 'openshift') :
           "fioprobe manifests config: provisioning.namespace %s is a namespace of its own use (the deployment's, the cluster's or Prometheus'); the test claims and pods need one that holds nothing else" % p.namespace,
    assert badNames == [] :
           'fioprobe manifests config: provisioning: %s is not a StorageClass name (lower-case letters, digits, - and .), which every run would refuse; set provision: false on its storageClasses entry'
           % std.join(', ', badNames),
    assert unknownNodeClasses == [] :
           'fioprobe manifests config: provisioning.nodes names %s, not a class the probe provisions (%s)'
           % [std.join(', ', unknownNodeClasses), std.join(', ', classNames)],
    namespace: {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: common.metadata(c, 'provision', p.namespace) + {
        labels+: {
          'pod-security.kubernetes.io/enforce': 'restricted',
          'pod-security.kubernetes.io/warn': 'restricted',
          'pod-security.kubernetes.io/audit': 'restricted',
        },
      },
    },
    // The test pods write into their own volume and exit: nothing reaches them, they reach
    // nothing (their image is pulled by the kubelet, not by the pod).
    isolation: {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: common.metadata(c, 'provision', 'fioprobe-provision-isolated', p.namespace),
      spec: { podSelector: {}, policyTypes: ['Ingress', 'Egress'], ingress: [], egress: [] },
    },
    serviceAccount: probes.serviceAccount(c.namespace, name) + {
      metadata+: { labels: labels },
    },
    role: {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: common.metadata(c, 'provision', name, p.namespace),
      rules: roleRules,
    },
    roleBinding: {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: common.metadata(c, 'provision', name, p.namespace),
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: name },
      subjects: [subject],
    },
    clusterRole: {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: common.metadata(c, 'provision', name),
      rules: clusterRules,
    },
    clusterRoleBinding: {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: common.metadata(c, 'provision', name),
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: name },
      subjects: [subject],
    },
    // The Pushgateway, the cluster DNS and the API server; nothing reaches the pod.
    networkPolicy: probes.networkPolicy(c.namespace, apiServer=true) + {
      metadata+: { name: name, labels: labels },
      spec+: { podSelector: { matchLabels: common.selectorLabels('provision') } },
    },
    cronJob: {
      apiVersion: 'batch/v1',
      kind: 'CronJob',
      metadata: common.metadata(c, 'provision', name, c.namespace),
      spec: {
        // After the probes' own start offsets, so that it does not start with them.
        schedule: common.schedule(c { everyMinutes: p.everyMinutes }, std.length(c.storageClasses), p.schedule),
        timeZone: 'Etc/UTC',
        concurrencyPolicy: 'Forbid',
        startingDeadlineSeconds: c.startingDeadlineSeconds,
        successfulJobsHistoryLimit: c.successfulJobsHistoryLimit,
        failedJobsHistoryLimit: c.failedJobsHistoryLimit,
        jobTemplate: {
          metadata: { labels: labels },
          spec: {
            // A failed run has pushed its failure; the next slot runs again.
            backoffLimit: 0,
            activeDeadlineSeconds: activeDeadline,
            template: {
              metadata: { labels: labels } + security.metadata,
              spec: {
                restartPolicy: 'Never',
                serviceAccountName: name,
                // The token only in the probe's container (the projected volume below).
                automountServiceAccountToken: false,
                enableServiceLinks: false,
                // A run stopped mid-way leaves its objects to the next run, which removes them.
                terminationGracePeriodSeconds: 30,
                securityContext: security.securityContext,
                containers: [{
                  name: 'fioprobe',
                  image: '%s:%s' % [c.image.name, c.image.tag],
                  imagePullPolicy: c.image.pullPolicy,
                  command: [
                             'fioprobe',
                             'provision',
                             '--namespace',
                             p.namespace,
                             '--owner',
                             name,
                             '--image',
                             '%s:%s' % [c.image.name, c.image.tag],
                             '--ephemeral-state',
                           ]
                           + std.flattenArrays([['--storageclass', n] for n in classNames])
                           + std.flattenArrays([
                             ['--nodes', '%s=%s' % [n, std.join(',', provisioning.nodesOf(c, n))]]
                             for n in classNames
                             if provisioning.nodesOf(c, n) != []
                           ])
                           + (if std.length(std.objectFields(p.nodes)) == 0 then [] else ['--max-parallel', '%d' % p.maxParallel])
                           + std.flattenArrays([['--deadline', '%s=%d' % [step, p.deadlines[step]]] for step in std.objectFields(p.deadlines)])
                           // The platform assigns the test pods' user and fsGroup, as this pod's.
                           + (if common.assignsIds(c) then ['--platform', 'openshift'] else [])
                           + gatewayArgs,
                  resources: c.probeResources,
                  securityContext: common.containerSecurityContext,
                  volumeMounts: [
                                  // Python's scratch space and the run's private state directory.
                                  { name: 'tmp', mountPath: '/tmp' },
                                  etcdNodes.apiTokenMount,
                                ]
                                + (if pgw.auth.enabled then [{ name: 'pushgateway-auth', mountPath: authDir, readOnly: true }] else [])
                                + (if pgw.tls.enabled then [{ name: 'pushgateway-ca', mountPath: caDir, readOnly: true }] else []),
                }],
                volumes: [
                           { name: 'tmp', emptyDir: { sizeLimit: '16Mi' } },
                           etcdNodes.apiTokenVolume,
                         ]
                         + (if pgw.auth.enabled then [{
                              name: 'pushgateway-auth',
                              secret: {
                                secretName: pgw.auth.secretName,
                                items: [{ key: 'username', path: 'username' }, { key: 'password', path: 'password' }],
                              },
                            }] else [])
                         + (if pgw.tls.enabled then [{
                              name: 'pushgateway-ca',
                              secret: { secretName: pgw.tls.caSecretName, items: [{ key: 'ca.crt', path: 'ca.crt' }] },
                            }] else []),
              },
            },
          },
        },
      },
    },
  },
}
