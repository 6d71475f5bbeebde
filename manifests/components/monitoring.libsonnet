// The monitoring mixin (mixin.libsonnet at the repository root) as Kubernetes objects: a
// PrometheusRule with its alerts and recording rules, and one ConfigMap per dashboard
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
  local groups = mixin.prometheusAlerts.groups + mixin.prometheusRules.groups;
  local dashboards = mixin.grafanaDashboards;
  local dashboardJson = {
    [file]: std.manifestJsonEx(dashboards[file], '  ') + '\n'
    for file in std.objectFields(dashboards)
  };
  local dashboardNamespace = if m.dashboards.namespace == null then c.namespace
  else m.dashboards.namespace;
  {

    prometheusRule: if !m.prometheusRule.enabled then null else {
      apiVersion: 'monitoring.coreos.com/v1',
      kind: 'PrometheusRule',
      metadata: common.metadata(c, 'monitoring', 'fioprobe', c.namespace) + {
        labels+: m.prometheusRule.labels,
      },
      // Same order as kube-prometheus's addMixin: alerts, then recording rules.
      spec: { groups: groups },
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
