// fioprobe inside kube-prometheus (https://github.com/prometheus-operator/kube-prometheus):
// kube-prometheus's own example.jsonnet, plus addMixin for fioprobe's alerts, recording rules
// and dashboards, fioprobe's objects, and fioprobe's namespaces for kube-prometheus's Prometheus.
// Vendor both with jsonnet-bundler, then build as kube-prometheus's build.sh does:
//   jb install github.com/prometheus-operator/kube-prometheus/jsonnet/kube-prometheus@v0.18.0
//   (this repository vendored as `fioprobe/`, e.g. jb install <fioprobe repo>@<tag>)
//   mkdir -p manifests/setup
//   jsonnet -J vendor -m manifests example.jsonnet | xargs -I{} sh -c 'gojsontoyaml < {} > {}.yaml' -- {}
// Rendered with kube-prometheus v0.18.0 and applied to a kube-apiserver by
// tests/deploy/test_kube_prometheus.py (manifests/kube-prometheus/README.md says what it checks).
// See docs/MANIFESTS.md.
local addMixin = import 'kube-prometheus/lib/mixin.libsonnet';

local namespace = 'monitoring';

// The mixin at the repository root: prometheusAlerts, prometheusRules, grafanaDashboards.
local fioprobe = (import 'fioprobe/manifests/kube-prometheus/fioprobe.libsonnet')(namespace);

local fioprobeMixin = addMixin({
  name: 'fioprobe',
  namespace: namespace,
  dashboardFolder: 'fioprobe',
  mixin: (import 'fioprobe/mixin.libsonnet') + {
    // The probe interval and the expected probes of the deployed probes, so the alerts'
    // windows follow their schedule. Add your own keys (clusterLabel, thresholds: see
    // config.libsonnet) in a second `_config+::` after this object.
    _config+:: fioprobe.mixinConfig {
      // kube-prometheus runs kube-state-metrics: the per-node probes (perNode) are expected
      // on the nodes it lists, so a node that never pushed is Missing and a removed node's
      // groups are not Stale. With a perNode.nodeSelector, set perNodeInventorySelector to
      // match it (docs/MIXIN.md, "Per-node probes").
      perNodeInventory: true,
    },
  },
});

local kp = (import 'kube-prometheus/main.libsonnet') + {
  values+:: {
    common+: { namespace: namespace },
    grafana+: { folderDashboards+: fioprobeMixin.grafanaDashboards },
    // kube-prometheus's Prometheus may discover targets only in the namespaces listed here
    // (a Role in each): the Pushgateway's and those of the continuous stream's pods. Without
    // them it selects fioprobe's ServiceMonitor and PodMonitor but never scrapes them.
    prometheus+: {
      namespaces+: std.set([fioprobe.config.namespace] + fioprobe.continuous.namespaces),
    },
  },
};

{ 'setup/0namespace-namespace': kp.kubePrometheus.namespace } +
{
  ['setup/prometheus-operator-' + name]: kp.prometheusOperator[name]
  for name in std.filter((function(name) name != 'serviceMonitor' && name != 'prometheusRule'), std.objectFields(kp.prometheusOperator))
} +
{ 'prometheus-operator-serviceMonitor': kp.prometheusOperator.serviceMonitor } +
{ 'prometheus-operator-prometheusRule': kp.prometheusOperator.prometheusRule } +
{ 'kube-prometheus-prometheusRule': kp.kubePrometheus.prometheusRule } +
{ ['alertmanager-' + name]: kp.alertmanager[name] for name in std.objectFields(kp.alertmanager) } +
{ ['blackbox-exporter-' + name]: kp.blackboxExporter[name] for name in std.objectFields(kp.blackboxExporter) } +
{ ['grafana-' + name]: kp.grafana[name] for name in std.objectFields(kp.grafana) } +
{ ['kube-state-metrics-' + name]: kp.kubeStateMetrics[name] for name in std.objectFields(kp.kubeStateMetrics) } +
{ ['kubernetes-' + name]: kp.kubernetesControlPlane[name] for name in std.objectFields(kp.kubernetesControlPlane) } +
{ ['node-exporter-' + name]: kp.nodeExporter[name] for name in std.objectFields(kp.nodeExporter) } +
{ ['prometheus-' + name]: kp.prometheus[name] for name in std.objectFields(kp.prometheus) } +
{ ['prometheus-adapter-' + name]: kp.prometheusAdapter[name] for name in std.objectFields(kp.prometheusAdapter) } +
// fioprobe: the mixin's PrometheusRule (from addMixin) and every fioprobe object (`openshift`:
// the hostPath probes' SCC and its bindings, present only with platform: 'openshift';
// `provisioning`: the provisioning probe's CronJob, its namespace and its RBAC).
{ 'fioprobe-prometheusRule': fioprobeMixin.prometheusRules } +
{
  ['fioprobe-' + component + '-' + key]: fioprobe[component][key]
  for component in ['pushgateway', 'monitoring', 'perNode', 'continuous', 'provisioning', 'openshift']
  for key in std.objectFields(fioprobe[component])
  if fioprobe[component][key] != null && std.objectHas(fioprobe[component][key], 'kind')
} +
{
  ['fioprobe-' + group + '-' + key]: fioprobe.probes[group][key]
  for group in ['storageClasses', 'etcd']
  for key in std.objectFields(fioprobe.probes[group])
} +
// The continuous stream: its pods (the PodMonitor is above, with the component's objects).
{
  ['fioprobe-continuous-' + group + '-' + key]: fioprobe.continuous[group][key]
  for group in ['storageClasses', 'etcd']
  for key in std.objectFields(fioprobe.continuous[group])
}
