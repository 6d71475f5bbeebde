// A small, local stand-in for grafonnet (github.com/grafana/grafonnet), which cannot be
// installed in this project's build environment. Names and call shapes follow grafonnet's
// generated API, so that `local g = import 'lib/g.libsonnet';` can later become
// `local g = import 'github.com/grafana/grafonnet/gen/grafonnet-latest/main.libsonnet';`.
// Only what fioprobe's dashboards use is here. Known differences from grafonnet, all harmless
// for such a switch: `dashboard.withPanels` numbers panel ids (grafonnet leaves that to
// `util.panel.setPanelIDs`), and `queryOptions.withTargets` gives targets without a refId the
// ids A, B, C... (Grafana would do the same when it loads the dashboard).
{
  dashboard: import 'dashboard.libsonnet',
  panel: import 'panel.libsonnet',
  query: import 'query.libsonnet',
  util: import 'util.libsonnet',
}
