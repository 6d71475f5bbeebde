// fioprobe monitoring mixin: the entry point (https://monitoring.mixins.dev conventions).
//   _config            every threshold, window, selector and label name (config.libsonnet)
//   prometheusRules    recording rules probe:fioprobe_<op>_latency_seconds:p50|p99|p999
//   prometheusAlerts   FioProbe* alerts, one group per file under alerts/
//   grafanaDashboards  Overview, Comparison and etcd disks (dashboards/dashboards.libsonnet)
// Override keys with `(import 'mixin.libsonnet') + { _config+:: { clusterLabel: 'k8s_cluster' } }`.
(import 'config.libsonnet')
+ {
  // What is wrong with the keys of _config (empty when nothing is), one message each; the
  // rules, the alerts and the dashboards refuse to render unless it is empty.
  _configProblems::
    if $._config.refuseUnknownKeys
    then (import 'lib/config-keys.libsonnet')($._config, (import 'config.libsonnet')._config)
    else [],
}
+ (import 'alerts/alerts.libsonnet')
+ { grafanaDashboards+:: {} }
+ (import 'dashboards/dashboards.libsonnet')
