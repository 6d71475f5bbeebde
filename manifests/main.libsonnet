// Every fioprobe object, as {component: {key: object}}, from the defaults merged with a
// configuration (manifests/config.libsonnet by default). Nested objects merge key by key
// (std.mergePatch), so a config that sets `etcd: { nodes: [...] }` keeps the default
// tolerations; lists replace.
local defaults = import 'lib/defaults.libsonnet';

function(config=(import 'config.libsonnet'), overrides={})
  local c = std.mergePatch(std.mergePatch(defaults, config), overrides);
  {
    config:: c,
    pushgateway: (import 'components/pushgateway.libsonnet')(c),
    probes: (import 'components/probes.libsonnet')(c),
    monitoring: (import 'components/monitoring.libsonnet')(c),
  }
