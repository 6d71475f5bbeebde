// All fioprobe alert groups and the recording rules they share. Every alert gets its
// runbook_url here, from its own name (lib/util.libsonnet's runbookURL): one place, and an
// alert cannot link to another alert's runbook. (An alert group may open with the recording
// rules only its alert uses.)
local u = import '../lib/util.libsonnet';

(import 'recording.libsonnet')
+ (import 'etcd.libsonnet')
+ (import 'burst.libsonnet')
+ (import 'regression.libsonnet')
+ (import 'outlier.libsonnet')
+ (import 'probe-health.libsonnet')
+ (import 'continuous.libsonnet')
// Last: its group is the one whose windows follow the provisioning interval, not the probes'
// (the chart appends it, rendered per provisioning interval, to the rules of the probe interval).
+ (import 'provisioning.libsonnet')
+ {
  prometheusRules+:: { assert u.configChecked(std.get($, '_configProblems', [], inc_hidden=true)) },
  prometheusAlerts+:: {
    assert u.configChecked(std.get($, '_configProblems', [], inc_hidden=true)),
    groups: [
      group {
        rules: [
          if std.objectHas(rule, 'alert')
          then rule { annotations+: { runbook_url: u.runbookURL($._config, rule.alert) } }
          else rule
          for rule in super.rules
        ],
      }
      for group in super.groups
    ],
  },
}
