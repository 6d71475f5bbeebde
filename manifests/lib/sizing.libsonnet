// How many Pushgateway replicas a configuration needs, and their URLs for the probes.
// The rule is docs/SIZING.md's, from measurement (bench/sharded_load.py): one replica holds
// up to `pushgateway.groupsPerReplica` groups with a push p99 well under the push timeout.
{
  // Every Pushgateway group the configuration pushes: StorageClass CronJobs (one group per
  // profile), etcd disks (per node and profile: the named nodes, or, found by role, an HA
  // control plane's 3), and the per-node mode (per expected node, per local disk or
  // StorageClass, per profile).
  etcdMembersByRole:: 3,
  expectedGroups(c)::
    local profiles(list) = std.foldl(function(sum, t) sum + std.length(t.profiles), list, 0);
    local p = c.perNode;
    local etcdNodes = if !c.etcd.enabled then 0
    else if std.length(c.etcd.nodes) > 0 then std.length(c.etcd.nodes)
    else $.etcdMembersByRole;
    profiles(c.storageClasses)
    + etcdNodes * std.length(c.etcd.profiles)
    + (if p.enabled then p.expectedNodes * (profiles(p.localDisks) + profiles(p.storageClasses)) else 0),

  // A push costs the Pushgateway about `pushCostPerGroupSeconds` per group it already holds
  // (it checks every push against all of them): 81 ms into a replica holding 1,002 groups,
  // measured one push at a time (bench/sharded_load.py; 6 ms at 50 groups, 34 ms at 500).
  // A replica holding H groups that each push once per interval T is busy c*H*H/T of the
  // time; kept at `targetUtilization` or below, queues in front of it stay short. 5 minutes:
  // 900 groups per replica; 1 minute: 400; 15 minutes: 1,600 (rounded down to hundreds).
  pushCostPerGroupSeconds:: 0.000081,
  targetUtilization:: 0.25,
  groupsPerReplica(c)::
    local given = c.pushgateway.groupsPerReplica;
    if given != null then given
    else
      local t = c.everyMinutes * 60;
      std.max(100, std.floor(std.sqrt($.targetUtilization * t / $.pushCostPerGroupSeconds) / 100) * 100),

  replicas(c)::
    local wanted = c.pushgateway.replicas;
    if wanted == 'auto' then
      std.max(1, std.ceil($.expectedGroups(c) / $.groupsPerReplica(c)))
    else wanted,

  sharded(c):: $.replicas(c) > 1,

  // The CPU a replica of a sharded Pushgateway spends on its share of the groups, by the same
  // cost model (c*H*H/T of one CPU), in millicores rounded up to tens: what each replica
  // requests, so that the scheduler does not pack replicas that need a CPU between them onto
  // one node (measured: six replicas of 1,000 groups on two CPUs had a push p99 of 14 to 18 s,
  // one replica with a CPU to itself 0.3 s). A larger configured request wins; a configured
  // CPU limit caps it (the API server refuses a request above the limit, and past it the
  // limit's owner chose less than the rule's share).
  replicaCpuRequest(c)::
    local share = std.ceil($.expectedGroups(c) / $.replicas(c));
    local rule = 10 * std.ceil($.pushCostPerGroupSeconds * share * share / (c.everyMinutes * 60) * 100);
    local resources = c.pushgateway.resources;
    local wanted = std.max(rule, $.cpuMillis(std.get(resources.requests, 'cpu', '0')));
    local limit = std.get(resources.limits, 'cpu', null);
    '%dm' % (if limit == null then wanted else std.min(wanted, $.cpuMillis(limit))),

  // A CPU quantity ('250m', '0.5', '1', 2) in millicores.
  cpuMillis(quantity)::
    local q = std.toString(quantity);
    if std.endsWith(q, 'm') then std.parseJson(std.substr(q, 0, std.length(q) - 1))
    else std.parseJson(q) * 1000,

  // One replica: the Service. Several: each StatefulSet pod by its stable DNS name under the
  // headless Service (<name>-<ordinal>.<name>.<namespace>.svc), in ordinal order; the probes
  // hash over exactly these (fioprobe.gateway.shards), so the list must not be reordered.
  // An existing Pushgateway (pushgateway.url): that one.
  urls(c)::
    local pgw = c.pushgateway;
    local scheme = if pgw.tls.enabled then 'https' else 'http';
    if pgw.url != null then [pgw.url]
    else if !$.sharded(c) then ['%s://%s.%s.svc:%d' % [scheme, pgw.name, c.namespace, pgw.port]]
    else [
      '%s://%s-%d.%s.%s.svc:%d' % [scheme, pgw.name, i, pgw.name, c.namespace, pgw.port]
      for i in std.range(0, $.replicas(c) - 1)
    ],
}
