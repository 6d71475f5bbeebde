// Mixin fragment: fioprobe's Grafana dashboards. mixin.libsonnet adds it with
// `+ (import 'dashboards/dashboards.libsonnet')`; everything is read from $._config
// (config.libsonnet, the dashboards' own keys under `dashboards`).
local u = import '../lib/util.libsonnet';

{
  grafanaDashboards+:: {
    assert u.configChecked(std.get($, '_configProblems', [], inc_hidden=true)),
    'fioprobe-overview.json': (import 'overview.libsonnet')($._config),
    'fioprobe-comparison.json': (import 'comparison.libsonnet')($._config),
    'fioprobe-etcd-disks.json': (import 'etcd.libsonnet')($._config),
  },
}
