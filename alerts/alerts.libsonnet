// All fioprobe alert groups and the recording rules they share. Every alert gets its
// runbook_url here, from its own name (lib/util.libsonnet's runbookURL): one place, and an
// alert cannot link to another alert's runbook.
local u = import '../lib/util.libsonnet';

(import 'recording.libsonnet')
+ (import 'etcd.libsonnet')
+ (import 'burst.libsonnet')
+ (import 'regression.libsonnet')
+ (import 'probe-health.libsonnet')
+ (import 'continuous.libsonnet')
+ {
  prometheusAlerts+:: {
    groups: [
      group {
        rules: [
          rule { annotations+: { runbook_url: u.runbookURL($._config, rule.alert) } }
          for rule in super.rules
        ],
      }
      for group in super.groups
    ],
  },
}
