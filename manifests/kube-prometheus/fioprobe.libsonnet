// fioprobe's objects for a kube-prometheus deployment: the probes, the Pushgateway and its
// ServiceMonitor from manifests/main.libsonnet, without their own PrometheusRule and dashboard
// ConfigMaps (kube-prometheus's addMixin makes those, and its Grafana loads the dashboards).
// `config` goes over manifests/config.libsonnet with the same keys and the same checks
// (docs/MANIFESTS.md, "Configuration keys"): an unknown key stops the build and names it.
function(namespace='monitoring', config={})
  (import '../main.libsonnet')(overrides=[
    {
      monitoring: {
        prometheusNamespace: namespace,
        prometheusRule: { enabled: false },
        dashboards: { enabled: false },
      },
    },
    config,
  ])
