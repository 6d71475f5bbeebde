// fioprobe's objects for a kube-prometheus deployment: the probes, the Pushgateway and its
// ServiceMonitor from manifests/main.libsonnet, without their own PrometheusRule and dashboard
// ConfigMaps (kube-prometheus's addMixin makes those, and its Grafana loads the dashboards).
// `config` is merged over manifests/config.libsonnet.
function(namespace='monitoring', config={})
  (import '../main.libsonnet')(overrides=std.mergePatch({
    monitoring: {
      prometheusNamespace: namespace,
      prometheusRule: { enabled: false },
      dashboards: { enabled: false },
    },
  }, config))
