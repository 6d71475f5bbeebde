// The mixin's rules as one Prometheus rule file object (JSON, which Prometheus also reads
// as YAML); scripts/generate.d/10-mixin.sh turns it into the committed alerts/out/rules.yaml:
//   jsonnet -J . alerts/rules.jsonnet
// `config` overrides _config keys (an unknown key stops the rendering, naming it), e.g. a
// short schedule for an end-to-end test, from which every window follows:
//   jsonnet -J . --tla-code config='{ probeIntervalSeconds: 5 }' alerts/rules.jsonnet
function(config={})
  local mixin = (import '../mixin.libsonnet') + { _config+:: config };
  { groups: mixin.prometheusRules.groups + mixin.prometheusAlerts.groups }
