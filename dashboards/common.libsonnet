// What the three fioprobe dashboards share, one file per role: selectors, thresholds and the
// texts that say which number a panel shows (selectors.libsonnet), the template variables
// (variables.libsonnet), the panel kinds, queries and layout (panels.libsonnet) and the
// continuous stream's panels (stream-panels.libsonnet). Merged into one object, so each part
// reaches the others through `self` and `$`. A function of the mixin's _config, so that every
// label name, selector and threshold comes from config.libsonnet.
function(c)
  (import 'selectors.libsonnet')(c)
  + (import 'variables.libsonnet')(c)
  + (import 'panels.libsonnet')(c)
  + (import 'stream-panels.libsonnet')(c)
