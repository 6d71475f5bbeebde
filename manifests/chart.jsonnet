// What the Helm chart (charts/fioprobe/) takes from the manifests, as one JSON object that
// scripts/generate.d/32-chart.sh writes into the chart's files: its values (the manifests'
// configuration, defaults + manifests/config.libsonnet, with the docs of every key), its
// values.schema.json (the same schema, lib/params.libsonnet's jsonSchema), and the mixin's
// rules and dashboards exactly as the manifests render them for each probe interval the chart
// offers. The templates compute only what depends on values; everything else is here, so the
// chart and the manifests have one source.
//
// The chart's values are the manifests' keys but these:
//   namespace              the release's namespace (helm --namespace): Helm's way
//   monitoring.mixinConfig the rules and dashboards are rendered here, not at install time:
//                          a changed threshold needs the mixin rendered again (manifests)
//   everyMinutes           only the intervals rendered below
// and three of its own: releaseLabel (the label kube-prometheus-stack's selectors match),
// defaultStorageClass (what is probed when storageClasses is empty: the cluster's default
// class, looked up at install) and benchmarks (distributed benchmarks,
// components/distributed.libsonnet's argument, each rendered as manifests/distributed.jsonnet
// renders it). Its storageClasses default to none.
local common = import 'lib/common.libsonnet';
local defaults = import 'lib/defaults.libsonnet';
local monitoringConfig = import 'lib/monitoring-config.libsonnet';
local p = import 'lib/params.libsonnet';
local sizing = import 'lib/sizing.libsonnet';

// Probe intervals (minutes) the chart's rules and dashboards are rendered for: the mixin's
// probeIntervalSeconds sets every window, so each interval has files of its own.
local intervals = [1, 5, 10, 15];
// Provisioning intervals (minutes) the provisioning probe's alert group is rendered for: its
// windows follow provisionIntervalSeconds alone, so it is a file of its own per interval,
// appended to the probe interval's rules (the mixin renders it last).
local provisionIntervals = [5, 10, 15, 30];
local provisioningGroup = 'fioprobe-provisioning';

// One distributed benchmark: components/distributed.libsonnet's argument, whose asserts the
// chart's templates repeat where JSON Schema cannot say it (a push with auth or TLS).
local benchmark = {
  '#name':: 'The benchmark: lowercase letters, digits and -, at most 37 (object names, its `benchmark` label).',
  name: p.required(p.check('string', function(v) true, '', { pattern: '^[a-z0-9]([a-z0-9-]{0,35}[a-z0-9])?$' })),
  '#storageclass':: "The StorageClass of the servers' PVCs.",
  storageclass: p.required(p.check('string', function(v) true, '', { minLength: 1 })),
  '#servers':: 'How many fio servers, 1 to 64 (spread over nodes where there are several).',
  servers: p.required(p.check('number', function(v) true, '', { type: 'integer', minimum: 1, maximum: 64 })),
  '#volumeSize':: "Each server's PVC, a quantity such as 40Gi; the plan's data set must fit on it.",
  volumeSize: p.required(defaults.kinds.quantity(p.type('string'))),
  '#nodeSelector':: 'Where the servers may run.',
  nodeSelector: p.map({}, 'string'),
  '#keepVolumes':: 'true: the PVCs stay when the benchmark is removed.',
  keepVolumes: false,
  '#push':: "Push the result to the release's Pushgateway (not with its auth or TLS).",
  push: true,
  '#plan':: 'The rest of the plan (jobs_per_server, file_size, block_size, runtime, phases, budget, ...), checked by fioprobe when the client starts; not name, storageclass, servers, node_selector or volume_size, which come from above.',
  plan: p.check(p.map({}), function(v) true, '', {
    not: { anyOf: [{ required: [k] } for k in ['name', 'storageclass', 'servers', 'node_selector', 'volume_size']] },
  }),
};

local schema = defaults {
  namespace:: null,
  '#everyMinutes':: "Probe interval in minutes: 1, 5, 10 or 15, the intervals the chart's rules are rendered for.",
  everyMinutes: p.check(
    5,
    function(v) std.member(intervals, v),
    "must be 1, 5, 10 or 15 (the chart's rules and dashboards are rendered for these)",
    { enum: intervals },
  ),
  monitoring+: {
    mixinConfig:: null,
    dashboards+: { '#namespace':: "Their namespace; null: the release's." },
  },
  provisioning+: {
    '#everyMinutes':: "Provisioning interval in minutes: 5, 10, 15 or 30, those the chart's rules are rendered for.",
    everyMinutes: p.check(
      10,
      function(v) std.member(provisionIntervals, v),
      "must be 5, 10, 15 or 30 (the chart's provisioning rules are rendered for these)",
      { enum: provisionIntervals },
    ),
  },
  // prometheus-community's releaseLabel (true: release=<this release>), or the release name
  // of the kube-prometheus-stack whose selectors must match (its default selectors take
  // only monitors and rules labelled release=<its own release>).
  '#releaseLabel':: 'Adds release=<value> to the monitors and rules: a kube-prometheus-stack release, true: this one.',
  releaseLabel: p.check(p.oneOf(false, ['boolean', 'string']), function(v) true, '', {}),
  // The first install probes what the cluster has: with no storageClasses given, the
  // cluster's default StorageClass, found at install time (Helm's lookup; `helm template`
  // cannot ask a cluster and renders none), labelled with its real name and the volume type its
  // provisioner and parameters say (EBS CSI, in-tree EBS, Ceph RBD), else `unknown`.
  '#defaultStorageClass':: "With storageClasses empty: probe the cluster's default StorageClass, found at install.",
  defaultStorageClass: {
    '#enabled':: 'Probe it (a CronJob with its own PVC, and a stream).',
    enabled: true,
    '#size':: "Size of the probe's PVC (gp2's baseline depends on it), a quantity.",
    size: defaults.kinds.quantity('20Gi'),
    '#profiles':: 'Profiles to run on it: names of jobs/*.fio, or profiles with overrides.',
    profiles: defaults.kinds.profiles(['etcd-fsync', 'randread-iops']),
  },
  '#benchmarks':: 'Distributed benchmarks (`fioprobe distributed`, docs/DISTRIBUTED.md); removing one deletes it.',
  benchmarks: p.list(benchmark, []),
};

local config = monitoringConfig.merged(import 'config.libsonnet');
// The chart's defaults are the manifests' but storageClasses: the manifests' example classes
// (gp2, gp3) exist on few clusters, so the chart names none and probes the default class.
local values = { [k]: config[k] for k in std.objectFields(config) if k != 'namespace' } + {
  monitoring+: { mixinConfig:: null },
  storageClasses: [],
  defaultStorageClass: { enabled: true, size: '20Gi', profiles: ['etcd-fsync', 'randread-iops'] },
  releaseLabel: false,
  benchmarks: [],
};

local rendered = {
  [std.toString(m)]: (import 'main.libsonnet')(overrides={ everyMinutes: m }).monitoring
  for m in intervals
};
local renderedProvisioning = {
  [std.toString(m)]: (import 'main.libsonnet')(overrides={ provisioning: { everyMinutes: m } }).monitoring
  for m in provisionIntervals
};

// The one rule of the `fioprobe.expected` group that is no static series: the nodes that run
// per-node probes, as the mixin writes it (without the node inventory, a mixinConfig key).
local perNodeNodes =
  local mixin = (import '../mixin.libsonnet') + {
    _config+:: { expectedPerNodeProbes: [{ storageclass: 'x', profile: 'y' }] },
  };
  local expected = [g for g in mixin.prometheusRules.groups + mixin.prometheusAlerts.groups if g.name == 'fioprobe.expected'][0];
  [r for r in expected.rules if r.record == 'node:fioprobe_per_node:info'][0];

// The rules of the etcd nodes found by role, as the mixin writes them; the roles are the
// values' (etcd.roleLabels), put in by the template where ROLES stands.
local etcdNodeRules =
  local mixin = (import '../mixin.libsonnet') + {
    _config+:: { expectedEtcdProbes: [{ storageclass: 'x', profile: 'y' }], etcdNodeRoles: ['ROLES'] },
  };
  local expected = [g for g in mixin.prometheusRules.groups + mixin.prometheusAlerts.groups if g.name == 'fioprobe.expected'][0];
  local u = import '../lib/util.libsonnet';
  local pushingOnly = (import '../mixin.libsonnet') + {
    _config+:: { expectedEtcdProbes: [{ storageclass: 'x', profile: 'y' }], etcdNodeRoles: [] },
  };
  local expectedPushing = [g for g in pushingOnly.prometheusRules.groups + pushingOnly.prometheusAlerts.groups if g.name == 'fioprobe.expected'][0];
  {
    inventory: [r for r in expected.rules if r.record == u.etcdInventoryRecord][0],
    nodes: [r for r in expected.rules if r.record == u.etcdNodesRecord][0],
    // Without a role kube-state-metrics can name: the nodes that push.
    pushing: [r for r in expectedPushing.rules if r.record == u.etcdNodesRecord][0],
  };

{
  // Chart.yaml. Its version is fioprobe's: the chart ships in this repository with the image
  // and the manifests of the same version, so one number names all three.
  chart: {
    apiVersion: 'v2',
    name: 'fioprobe',
    description: "Disk health monitoring for Kubernetes: budgeted fio probes of every StorageClass and etcd disk pushed to a Pushgateway, a continuous fsync stream scraped by Prometheus, and the fioprobe mixin's alerts and Grafana dashboards.",
    type: 'application',
    version: config.version,
    appVersion: config.version,
    // CronJob timeZone is GA from 1.27.
    kubeVersion: '>=1.27.0-0',
    keywords: ['fio', 'storage', 'etcd', 'disk', 'prometheus', 'pushgateway'],
  },
  values: values,
  // The order values.yaml is written in, for a reader: what a new user sets first (the image,
  // what to probe, the etcd disks, how often, where the results go), rarely changed knobs last.
  // Every key of the values is here (scripts/chart_files.py refuses one that is not); inside an
  // object, `enabled` comes first and the rest alphabetically.
  order: [
    'image',
    'storageClasses',
    'defaultStorageClass',
    'etcd',
    'everyMinutes',
    'monitoring',
    'releaseLabel',
    'platform',
    'pushgateway',
    'continuous',
    'provisioning',
    'perNode',
    'benchmarks',
    'probeResources',
    'profileTimeoutSeconds',
    'startingDeadlineSeconds',
    'successfulJobsHistoryLimit',
    'failedJobsHistoryLimit',
    'dns',
    'apiServer',
    'probeUser',
    'stateHostPath',
    'probeMountPath',
    'configMountPath',
    'version',
  ],
  docs: { [row.key]: row.doc for row in p.rows(schema) },
  schema: {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    title: 'fioprobe chart values (generated from manifests/lib/defaults.libsonnet)',
  } + p.jsonSchema(schema),
  rules: {
    [m]: [g for g in rendered[m].prometheusRule.spec.groups if g.name != provisioningGroup]
    for m in std.objectFields(rendered)
  },
  provisioningRules: {
    [m]: [g for g in renderedProvisioning[m].prometheusRule.spec.groups if g.name == provisioningGroup]
    for m in std.objectFields(renderedProvisioning)
  },
  dashboards: {
    [m]: {
      [file]: rendered[m].dashboards[name].data[file]
      for name in std.objectFields(rendered[m].dashboards)
      for file in std.objectFields(rendered[m].dashboards[name].data)
    }
    for m in std.objectFields(rendered)
  },
  // What the templates look up rather than compute: sprig has no square root (the sizing
  // rule's groups per replica), and the mixin's PromQL stays the mixin's.
  derived: {
    groupsPerReplica: {
      [std.toString(m)]: sizing.groupsPerReplica({ everyMinutes: m, pushgateway: { groupsPerReplica: null } })
      for m in intervals
    },
    perNodeNodesRule: perNodeNodes,
    etcdInventoryRule: etcdNodeRules.inventory,
    etcdNodesRule: etcdNodeRules.nodes,
    etcdNodesPushingRule: etcdNodeRules.pushing,
    // The names of the expected group's static series (lib/util.libsonnet).
    records: {
      local u = import '../lib/util.libsonnet',
      expected: u.expectedRecord,
      expectedPerNode: u.expectedPerNodeRecord,
      expectedOnNode: u.expectedOnNodeRecord,
      expectedStream: u.expectedStreamRecord,
      expectedEtcd: u.expectedEtcdRecord,
      expectedOnEtcdNode: u.expectedOnEtcdNodeRecord,
      expectedProvision: u.expectedProvisionRecord,
    },
    hostPathScc: common.hostPathScc,
    // The fio server's script of a distributed benchmark (components/distributed.libsonnet).
    distributedServerScript: importstr 'lib/distributed-server.sh',
  },
}
