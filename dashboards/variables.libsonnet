// The dashboards' template variables: datasource, cluster and the probes' labels (part of
// common.libsonnet; the selectors they query with are selectors.libsonnet's, through self).
local g = import 'g.libsonnet';

local var = g.dashboard.variable;

function(c) {
  local d = c.dashboards,

  // --- Variables ---------------------------------------------------------------------------
  datasourceVar::
    var.datasource.new('datasource', 'prometheus')
    + var.datasource.generalOptions.withLabel('Data source')
    + var.datasource.generalOptions.withDescription(
      'Prometheus (or Thanos/Cortex/Mimir) that holds the fioprobe series.'
    ),

  // A label_values variable on the datasource variable, refreshed when the time range
  // changes (a new StorageClass or node shows up without a reload), sorted alphabetically.
  queryVar(name, label, metric, label_text, description)::
    var.query.new(name)
    + var.query.withDatasourceFromVariable(self.datasourceVar)
    + var.query.queryTypes.withLabelValues(label, metric)
    + var.query.refresh.onTime()
    + var.query.withSort(type='alphabetical')
    + var.query.generalOptions.withLabel(label_text)
    + var.query.generalOptions.withDescription(description),

  // One cluster at a time. Without a cluster label (a single Prometheus) the query finds no
  // values, the variable is empty and `cluster=~""` matches the series without the label.
  clusterVar::
    self.queryVar(
      'cluster',
      c.clusterLabel,
      'fioprobe_success{%s}' % c.fioprobeSelector,
      'Cluster',
      'Value of the `%s` label (a Prometheus external label); empty in a single Prometheus.'
      % c.clusterLabel,
    )
    // Hidden where there is one cluster only (showClusterVariable: false); the variable
    // stays, so every query keeps its cluster matcher.
    + (if d.showClusterVariable then {} else var.query.generalOptions.showOnDashboard.withNothing()),

  // A multi-value variable over a label of fioprobe_success; "All" is the regex `.*`, which
  // also matches series without the label (node is present only on node-local probes).
  labelVar(name, label, label_text, description, extra=[], metric='fioprobe_success')::
    self.queryVar(name, label, metric + self.raw(extra), label_text, description)
    + var.query.selectionOptions.withMulti()
    + var.query.selectionOptions.withIncludeAll(true, '.*')
    + var.query.generalOptions.withCurrent('All', '$__all'),

  storageclassVar(extra=[])::
    self.labelVar(
      'storageclass',
      'storageclass',
      'StorageClass',
      'StorageClass probed (or the configured name of a node-local path).',
      extra
    ),
  nodeVar(extra=['storageclass=~"$storageclass"'])::
    self.labelVar(
      'node',
      'node',
      'Node',
      'Node of a node-local probe (hostPath on a control-plane node); '
      + '"All" includes the probes of PersistentVolumes, which have no node.',
      extra
    ),
  profileVar(extra=['storageclass=~"$storageclass"', 'node=~"$node"'])::
    self.labelVar(
      'profile', 'profile', 'Profile', 'Probe profile (jobs/<profile>.fio).', extra
    ),
}
