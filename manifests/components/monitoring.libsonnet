// The monitoring mixin (mixin.libsonnet at the repository root) as Kubernetes objects: a
// PrometheusRule with its alerts and recording rules, one with the deployment's expected
// probes and streams (`fioprobe.expected`), and one ConfigMap per dashboard
// labelled for the Grafana sidecar. Returns {key: object}.
local common = import '../lib/common.libsonnet';

// The mixin is expensive to evaluate (the dashboards take seconds), and jsonnet re-evaluates
// object fields and object-level locals on every access: function-level locals are computed
// once per call, so everything derived from the mixin is bound here.
function(config)
  local c = config;
  local m = c.monitoring;
  // The schedule and the expected probes of exactly this configuration (overrides
  // included), then the user's own mixin overrides.
  local deployed = (import '../lib/monitoring-config.libsonnet').mixinConfig(c);
  local mixin = (import '../../mixin.libsonnet') + { _config+:: deployed + m.mixinConfig };
  // The mixin's own groups, the same for every deployment (alerts/out/rules.yaml for the
  // same mixin keys), and the one group of this deployment's facts (the probes and streams it
  // runs), each in a PrometheusRule of its own.
  local isExpected(g) = g.name == 'fioprobe.expected';
  local allGroups = mixin.prometheusRules.groups + mixin.prometheusAlerts.groups;
  local groups = std.filter(function(g) !isExpected(g), allGroups);
  local expectedGroups = std.filter(isExpected, allGroups);
  local dashboards = mixin.grafanaDashboards;
  local dashboardJson = {
    [file]: std.manifestJsonEx(dashboards[file], '  ') + '\n'
    for file in std.objectFields(dashboards)
  };
  local dashboardNamespace = if m.dashboards.namespace == null then c.namespace
  else m.dashboards.namespace;
  {

    prometheusRule: if !m.operator || !m.prometheusRule.enabled then null else {
      apiVersion: 'monitoring.coreos.com/v1',
      kind: 'PrometheusRule',
      metadata: common.metadata(c, 'monitoring', 'fioprobe', c.namespace) + {
        labels+: m.prometheusRule.labels,
      },
      spec: { groups: groups },
    },

    expectedRule: if !m.operator || !m.prometheusRule.enabled || std.length(expectedGroups) == 0 then null else {
      apiVersion: 'monitoring.coreos.com/v1',
      kind: 'PrometheusRule',
      metadata: common.metadata(c, 'monitoring', 'fioprobe-expected', c.namespace) + {
        labels+: m.prometheusRule.labels,
      },
      spec: { groups: expectedGroups },
    },

    dashboards: if !m.dashboards.enabled then {} else {
      [std.strReplace(file, '.json', '')]: {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: common.metadata(c, 'monitoring', 'grafana-dashboard-' + std.strReplace(file, '.json', ''), dashboardNamespace) + {
          labels+: m.dashboards.labels,
          annotations: { grafana_folder: m.dashboards.folder },
        },
        data: { [file]: dashboardJson[file] },
      }
      for file in std.objectFields(dashboardJson)
    },
  }
