// Every fioprobe object, as {component: {key: object}}, from the defaults merged with a
// configuration (manifests/config.libsonnet by default). Nested objects merge key by key
// (std.mergePatch), so a config that sets `etcd: { nodes: [...] }` keeps the default
// tolerations; lists replace.
local defaults = import 'lib/defaults.libsonnet';

function(config=(import 'config.libsonnet'), overrides={})
  local c = std.mergePatch(std.mergePatch(defaults, config), overrides);
  // Locals, not fields: jsonnet caches a local's value but re-evaluates a field on every
  // access, and the monitoring component (the mixin's dashboards) takes seconds.
  local pushgateway = (import 'components/pushgateway.libsonnet')(c);
  local probes = (import 'components/probes.libsonnet')(c);
  local monitoring = (import 'components/monitoring.libsonnet')(c);
  {
    config:: c,
    pushgateway: pushgateway,
    probes: probes,
    monitoring: monitoring,
  }
