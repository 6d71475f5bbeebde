// Every fioprobe object, as {component: {key: object}}: defaults + params, kube-prometheus
// style. The params are a configuration (manifests/config.libsonnet by default) and
// overrides over it; both are checked against lib/defaults.libsonnet, the schema of every
// key, before anything is rendered (an unknown key or a value of the wrong type stops the
// rendering and names the key), then merged over the defaults: nested objects key by key, so
// a config that sets `etcd: { nodes: [...] }` keeps the default tolerations; lists replace.
// Each component is a function of the merged configuration.
local monitoringConfig = import 'lib/monitoring-config.libsonnet';
local params = import 'lib/params.libsonnet';

// monitoring.mixinConfig may only set keys the mixin has: a misspelt key would be ignored.
// Checked here rather than in lib/defaults.libsonnet, which the mixin's config reads.
local schema = (import 'lib/defaults.libsonnet') + {
  monitoring+: {
    mixinConfig: params.map({}, keys=std.objectFieldsAll((import '../mixin.libsonnet')._config)),
  },
};

function(config=(import 'config.libsonnet'), overrides={})
  local c = monitoringConfig.merged(config, overrides, schema);
  // Locals, not fields: jsonnet caches a local's value but re-evaluates a field on every
  // access, and the monitoring component (the mixin's dashboards) takes seconds.
  local pushgateway = (import 'components/pushgateway.libsonnet')(c);
  local probes = (import 'components/probes.libsonnet')(c);
  local monitoring = (import 'components/monitoring.libsonnet')(c);
  local perNode = (import 'components/pernode.libsonnet')(c, probes);
  local continuous = (import 'components/continuous.libsonnet')(c);
  local provisioning = (import 'components/provisioning.libsonnet')(c, probes).objects;
  local openshift = (import 'components/openshift.libsonnet')(c, [
    pushgateway,
    probes.storageClasses,
    probes.etcd,
    perNode,
    continuous.etcd,
    continuous.storageClasses,
    provisioning,
  ]);
  {
    config:: c,
    // The monitoring mixin's _config keys this configuration implies (probe interval,
    // expected probes), for a mixin rendered elsewhere (kube-prometheus' addMixin).
    mixinConfig:: monitoringConfig.mixinConfig(c),
    pushgateway: pushgateway,
    probes: probes,
    perNode: perNode,
    continuous: continuous,
    provisioning: provisioning,
    openshift: openshift,
    monitoring: monitoring,
  }
