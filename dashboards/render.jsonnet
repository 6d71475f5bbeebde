// Renders the dashboards: {file name: dashboard JSON text}, for
// `jsonnet -J . -S -m <dir> dashboards/render.jsonnet` (scripts/generate.d/20-dashboards.sh).
// Through the mixin, so the dashboards see the same _config as the alerts.
// Until mixin.libsonnet mixes the dashboards in itself, they are added here (adding the
// fragment twice is harmless: it only sets the same fields again).
local mixin = (import '../mixin.libsonnet') + (import 'dashboards.libsonnet');

{
  [name]: std.manifestJsonEx(mixin.grafanaDashboards[name], '  ') + '\n'
  for name in std.objectFields(mixin.grafanaDashboards)
}
