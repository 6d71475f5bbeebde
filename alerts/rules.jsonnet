// The mixin's rules as one Prometheus rule file object (JSON, which Prometheus also reads
// as YAML); scripts/generate.d/10-mixin.sh turns it into the committed alerts/out/rules.yaml:
//   jsonnet -J . alerts/rules.jsonnet
// `config` overrides _config keys, e.g. short windows for an end-to-end test:
//   jsonnet -J . --tla-code config='{ latencyWindow: "1m", etcdFsyncWarningFor: "0s" }' alerts/rules.jsonnet
function(config={})
  local mixin = (import '../mixin.libsonnet') + { _config+:: config };
  { groups: mixin.prometheusRules.groups + mixin.prometheusAlerts.groups }
