// fioprobe monitoring mixin: the entry point (https://monitoring.mixins.dev conventions).
//   _config            every threshold, window, selector and label name (config.libsonnet)
//   prometheusRules    recording rules probe:fioprobe_<op>_latency_seconds:p50|p99|p999
//   prometheusAlerts   FioProbe* alerts, one group per file under alerts/
//   grafanaDashboards  filled by dashboards/dashboards.libsonnet, which mixes itself in by
//                      adding `+ (import 'dashboards/dashboards.libsonnet')` after the alerts
//                      line below (jsonnet cannot import a file only if it exists).
// Override keys with `(import 'mixin.libsonnet') + { _config+:: { clusterLabel: 'k8s_cluster' } }`.
(import 'config.libsonnet')
+ (import 'alerts/alerts.libsonnet')
+ { grafanaDashboards+:: {} }
+ (import 'dashboards/dashboards.libsonnet')
