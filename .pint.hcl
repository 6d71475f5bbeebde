// pint's configuration for the mixin's rendered rules (scripts/lint-mixin.sh runs
// `pint --offline lint --fail-on warning` over each set of rule files loaded together).
// No `prometheus` block: every check that needs a server is off, as in any mixin's CI.
// Every check pint runs offline stays on; the one exception below names the rules it covers,
// so a new rule with the same finding still fails.

// rule/dependency: a recording rule that reads another group's recording rule sees its value
// from that group's last evaluation, up to one evaluation interval old. These rules do so on
// purpose, and the lag changes none of their results:
// - the continuous stream's burn ratios (`fioprobe.continuous.burn`) read the objective of
//   `fioprobe.continuous`: a group of its own so that a deployment with hundreds of streams
//   can give the day-long ratios a longer `interval` (docs/MIXIN.md, "Cost"); the objective
//   is a configured threshold that changes only with a stream's configuration;
// - the objective reads the etcd role (`probe:fioprobe_etcd_disk:info`, `fioprobe.rules`),
//   remembered for runs of the 5-minute probes;
// - the burst and outlier records (`fioprobe-burst`, `fioprobe-latency-outlier`) read the
//   pushed probes' records of `fioprobe.rules`, whose inputs change once a probe run (every
//   5 minutes), beside the alerts that use them, one group per alert component;
// - the deployment's node set (`fioprobe.expected`, which a deployment loads on its own,
//   docs/MIXIN.md "Facts flow one way") reads the probes' push times of `fioprobe.rules`.
rule {
  match {
    kind = "recording"
    name = "stream:fioprobe_continuous_sync_latency_seconds:objective|stream:fioprobe_continuous_sync_slow:ratio_rate.+|probe:fioprobe_write_iops:depleted|probe:fioprobe_last_sync_latency_seconds:sibling_ratio|node:fioprobe_per_node:info"
  }
  disable = ["rule/dependency"]
}
