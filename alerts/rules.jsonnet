// Renders the mixin's rules as one Prometheus rule file (YAML), the file
// scripts/generate.d/10-mixin.sh commits as alerts/out/rules.yaml:
//   jsonnet -S -J . alerts/rules.jsonnet
// `config` overrides _config keys, e.g. short windows for an end-to-end test:
//   jsonnet -S -J . --tla-code config='{ latencyWindow: "1m", etcdFsyncWarningFor: "0s" }' alerts/rules.jsonnet
function(config={})
  local mixin = (import '../mixin.libsonnet') + { _config+:: config };
  std.manifestYamlDoc(
    { groups: mixin.prometheusRules.groups + mixin.prometheusAlerts.groups },
    indent_array_in_object=true,
    quote_keys=false,
  )
