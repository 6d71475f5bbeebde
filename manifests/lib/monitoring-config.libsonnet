// What the monitoring mixin must know about the deployed probes, from the manifests'
// configuration (defaults merged with manifests/config.libsonnet and any overrides): the
// schedule, and every probe that should push. The manifests pass these values into the mixin
// (its config.libsonnet imports nothing from here) for the configuration they render, so the
// alerts' windows and the list of expected probes can never disagree with the CronJobs.
local defaults = import 'defaults.libsonnet';
local params = import 'params.libsonnet';
local provisioning = import 'provisioning.libsonnet';

{
  // The manifests' configuration as main.libsonnet merges it: defaults + config + overrides
  // (an object, or a list of them applied in order), each checked against the defaults first
  // (lib/params.libsonnet).
  // `schema`: the defaults, or an extension of them (main.libsonnet's).
  merged(config, overrides={}, schema=defaults)::
    params.apply(schema, [config] + (if std.isArray(overrides) then overrides else [overrides])),

  // _config keys of the mixin for a merged manifests configuration.
  mixinConfig(c):: {
    local profileName(p) = if std.isString(p) then p else p.name,
    local etcdByRole = c.etcd.enabled && std.length(c.etcd.nodes) == 0,
    local rolePrefix = 'node-role.kubernetes.io/',
    probeIntervalSeconds: c.everyMinutes * 60,
    expectedProbes: [
      { storageclass: sc.name, profile: profileName(p) }
      for sc in c.storageClasses
      for p in sc.profiles
    ] + (if !c.etcd.enabled then [] else [
           { storageclass: c.etcd.name, profile: profileName(p), node: node }
           for node in c.etcd.nodes
           for p in c.etcd.profiles
         ]),
    // The etcd probes found by role, without a node: which nodes hold etcd is known at run time
    // (kube-state-metrics' kube_node_role, or the nodes that push them); named nodes are above.
    expectedEtcdProbes: if !etcdByRole then [] else [
      { storageclass: c.etcd.name, profile: profileName(p) }
      for p in c.etcd.profiles
    ],
    // The roles of etcd.roleLabels as kube-state-metrics names them (kube_node_role{role}: the
    // part after node-role.kubernetes.io/ of a label key). Where a label is not of that form,
    // kube-state-metrics cannot list all the etcd nodes: none, and the mixin takes the nodes
    // that push instead (an inventory that leaves some out would hide their Stale).
    local roles = [
      std.substr(label, std.length(rolePrefix), std.length(label))
      for label in c.etcd.roleLabels
      if std.startsWith(label, rolePrefix)
    ],
    etcdNodeRoles: if !etcdByRole || std.length(roles) < std.length(c.etcd.roleLabels) then [] else roles,
    // The per-node DaemonSet's probes, without a node: which nodes run it is only known at
    // run time (the mixin expects each of them on every node that runs per-node probes).
    expectedPerNodeProbes: if !c.perNode.enabled then [] else [
      { storageclass: t.name, profile: profileName(p) }
      for t in c.perNode.localDisks + c.perNode.storageClasses
      for p in t.profiles
    ],
    // Which tainted nodes the DaemonSet runs on, for the mixin's node inventory.
    perNodeTolerations: if !c.perNode.enabled then [] else c.perNode.tolerations,
    // The continuous streams (`fioprobe continuous`, scraped): one per etcd node (the
    // DaemonSet on etcd.nodes, labelled like the etcd probes) and one per StorageClass (its
    // StatefulSet, no node), as the continuous.* keys deploy them.
    // The etcd streams found by role: expected on the nodes the etcd probes are expected on.
    expectedEtcdStreams: if !c.continuous.enabled || !c.continuous.etcd || !etcdByRole then [] else [
      { storageclass: c.etcd.name },
    ],
    // The provisioning probe (components/provisioning.libsonnet): its schedule, and one group
    // per class its CronJob provisions (no node: the scheduler places each run), or per node
    // of a class given provisioning.nodes.
    provisionIntervalSeconds: c.provisioning.everyMinutes * 60,
    expectedProvisioning: provisioning.groups(c),
    expectedStreams: if !c.continuous.enabled then [] else (
      (if c.continuous.etcd && c.etcd.enabled then [{ storageclass: c.etcd.name, node: node } for node in c.etcd.nodes] else [])
      + (if c.continuous.storageClasses then [{ storageclass: sc.name } for sc in c.storageClasses] else [])
    ),
  },
}
