// Renders the dashboards: {file name: dashboard JSON text}, for
// `jsonnet -J . -S -m <dir> dashboards/render.jsonnet` (scripts/generate.d/20-dashboards.sh).
// Through the mixin, so the dashboards see the same _config as the alerts.
local mixin = import '../mixin.libsonnet';

{
  [name]: std.manifestJsonEx(mixin.grafanaDashboards[name], '  ') + '\n'
  for name in std.objectFields(mixin.grafanaDashboards)
}
