// fioprobe monitoring mixin: the entry point (https://monitoring.mixins.dev conventions).
//   _config            every threshold, window, selector and label name (config.libsonnet)
//   prometheusRules    recording rules probe:fioprobe_<op>_latency_seconds:p50|p99|p999
//   prometheusAlerts   FioProbe* alerts, one group per file under alerts/
//   grafanaDashboards  Overview, Comparison and etcd disks (dashboards/dashboards.libsonnet)
// Override keys with `(import 'mixin.libsonnet') + { _config+:: { clusterLabel: 'k8s_cluster' } }`.
(import 'config.libsonnet')
+ (import 'alerts/alerts.libsonnet')
+ { grafanaDashboards+:: {} }
+ (import 'dashboards/dashboards.libsonnet')
