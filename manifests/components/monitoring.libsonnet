// The monitoring mixin (mixin.libsonnet at the repository root) as Kubernetes objects: a
// PrometheusRule with its alerts and recording rules, and one ConfigMap per dashboard
// labelled for the Grafana sidecar. Returns {key: object}.
local common = import '../lib/common.libsonnet';

function(config) {
  local c = config,
  local m = c.monitoring,
  local mixin = (import '../../mixin.libsonnet') + { _config+:: m.mixinConfig },
  local dashboardNamespace = if m.dashboards.namespace == null then c.namespace
  else m.dashboards.namespace,

  prometheusRule: if !m.prometheusRule.enabled then null else {
    apiVersion: 'monitoring.coreos.com/v1',
    kind: 'PrometheusRule',
    metadata: common.metadata(c, 'monitoring', 'fioprobe', c.namespace) + {
      labels+: m.prometheusRule.labels,
    },
    // Same order as kube-prometheus's addMixin: alerts, then recording rules.
    spec: { groups: mixin.prometheusAlerts.groups + mixin.prometheusRules.groups },
  },

  dashboards: if !m.dashboards.enabled then {} else {
    [std.strReplace(file, '.json', '')]: {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: common.metadata(c, 'monitoring', 'grafana-dashboard-' + std.strReplace(file, '.json', ''), dashboardNamespace) + {
        labels+: m.dashboards.labels,
        annotations: { grafana_folder: m.dashboards.folder },
      },
      data: { [file]: std.manifestJsonEx(mixin.grafanaDashboards[file], '  ') + '\n' },
    }
    for file in std.objectFields(mixin.grafanaDashboards)
  },
}
