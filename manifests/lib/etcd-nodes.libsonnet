// What the pods on the etcd nodes share (the etcd probes of components/probes.libsonnet and the
// stream of components/continuous.libsonnet): which nodes they run on, the node directories
// they write and the step that creates them, and etcd's data directory they check against.
local common = import 'common.libsonnet';

{
  // Whether the etcd parts are deployed at all (etcd.enabled).
  enabled(config):: config.etcd.enabled,

  // Found by role (etcd.nodes empty): the members are the nodes carrying any of
  // etcd.roleLabels, read from the API before every run (the stagger needs them all).
  byRole(config):: std.length(config.etcd.nodes) == 0,

  // Exactly the etcd nodes: those that carry a role label (terms are ORed), or the named ones,
  // by their object name (the name the pod's NODE_NAME and the stagger's members compare:
  // the kubernetes.io/hostname label can differ from it). Elsewhere the directory is not on
  // an etcd disk. A DaemonSet places a pod on a node that gains the label and removes it from
  // one that loses it.
  affinity(config):: {
    local e = config.etcd,
    nodeAffinity: {
      requiredDuringSchedulingIgnoredDuringExecution: {
        nodeSelectorTerms: if $.byRole(config) then [
          { matchExpressions: [{ key: label, operator: 'Exists' }] }
          for label in e.roleLabels
        ] else [
          { matchFields: [{ key: 'metadata.name', operator: 'In', values: e.nodes }] },
        ],
      },
    },
  },

  // The `fioprobe run --every` options that keep the members' runs apart (one member's IO at a
  // time): the members by role label, or by name.
  memberArgs(config)::
    local e = config.etcd;
    if $.byRole(config) then std.flattenArrays([['--members-label', label] for label in e.roleLabels])
    else std.flattenArrays([['--member', node] for node in e.nodes]),

  // The API token of the pods that read the API (the members by role), as the kubelet would
  // mount it, but in the probe's container alone: not in the prepare step (root), and as a
  // volume of the pod spec, so that an SCC derived from it (OpenShift) allows it.
  apiTokenVolume:: {
    name: 'kube-api-access',
    projected: {
      sources: [
        { serviceAccountToken: { path: 'token', expirationSeconds: 3607 } },
        { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
        { downwardAPI: { items: [{ path: 'namespace', fieldRef: { fieldPath: 'metadata.namespace' } }] } },
      ],
    },
  },
  apiTokenMount:: {
    name: 'kube-api-access',
    mountPath: '/var/run/secrets/kubernetes.io/serviceaccount',
    readOnly: true,
  },

  // etcd's data directory, read-only, only ever stat'ed: the probe and the stream refuse to
  // run when their directory is on another filesystem (a dedicated etcd disk mounted there).
  // Type Directory: on a node without it the pod does not start, and the kubelet's event names
  // the path; the kubelet never creates it.
  dataDirMountPath:: '/etcd-data',
  dataDirVolume(config):: { name: 'etcd-data', hostPath: { path: config.etcd.dataDir, type: 'Directory' } },
  dataDirMount:: { name: 'etcd-data', mountPath: $.dataDirMountPath, readOnly: true },

  // Whether the deployment creates the node directories (the prepare step below). Not on
  // OpenShift: there a container may write only files labelled container_file_t, the kubelet
  // does not relabel hostPath volumes, and changing a label needs SELinux relabel permissions
  // that no SCC should give a pod; the MachineConfig that creates the directories labels them
  // (docs/MANIFESTS.md, OpenShift).
  prepares(config):: config.platform != 'openshift',

  // A node directory of the etcd pods: where the deployment creates it, DirectoryOrCreate (the
  // kubelet makes a missing one and its missing parents, root's, 0755; only this path is
  // mounted, and only it is given to the probe user by the prepare step); else Directory (the
  // kubelet creates nothing).
  hostPathVolume(config, name, path):: {
    name: name,
    hostPath: { path: path, type: if $.prepares(config) then 'DirectoryOrCreate' else 'Directory' },
  },


  // The one privileged step (docs/SAFETY.md, "Node directories"): uid 0 with only CAP_CHOWN and
  // CAP_FOWNER, on exactly the mounted directories, before the probe's own container starts.
  // `fioprobe prepare-dirs` refuses a path that was a symlink on the host, a file, or a
  // directory someone else owns, before it changes anything; it only sets owner and mode.
  // `volumes`: [{name, hostPath}] of this pod's DirectoryOrCreate volumes.
  prepareContainer(config, volumes):: {
    local mountPath(v) = '/prepare/' + v.name,
    name: 'prepare',
    image: '%s:%s' % [config.image.name, config.image.tag],
    imagePullPolicy: config.image.pullPolicy,
    command: ['fioprobe', 'prepare-dirs', '--owner', '%d' % config.probeUser] + std.flattenArrays([
      ['--path', '%s=%s' % [mountPath(v), v.hostPath.path]]
      for v in volumes
    ]),
    resources: { requests: { cpu: '10m', memory: '32Mi' }, limits: { cpu: '500m', memory: '96Mi' } },
    securityContext: common.containerSecurityContext {
      runAsUser: 0,
      runAsGroup: 0,
      runAsNonRoot: false,
      capabilities: { drop: ['ALL'], add: ['CHOWN', 'FOWNER'] },
    },
    // Its refusal is the pod's status (kubectl describe), not only its log.
    terminationMessagePolicy: 'FallbackToLogsOnError',
    volumeMounts: [{ name: v.name, mountPath: mountPath(v) } for v in volumes],
  },
}
