// Helpers shared by the components: common labels and the restricted security settings.
{
  // The subset that selects pods: stable across versions (a selector cannot change).
  selectorLabels(component, instance=null):: {
    'app.kubernetes.io/name': 'fioprobe',
    'app.kubernetes.io/component': component,
  } + (if instance == null then {} else { 'app.kubernetes.io/instance': instance }),

  // Labels on every object and pod template (kube-prometheus style: name, component,
  // instance, part-of, version): the selector's labels and those that may change.
  labels(config, component, instance=null):: $.selectorLabels(component, instance) + {
    'app.kubernetes.io/part-of': 'fioprobe',
    'app.kubernetes.io/version': config.version,
  },

  metadata(config, component, name, namespace=null, instance=null):: {
    name: name,
    labels: $.labels(config, component, instance),
  } + (if namespace == null then {} else { namespace: namespace }),

  // Pod Security Standard "restricted", pod level. fsGroup makes PVCs writable by the user.
  // `pinIds` false: no user, group or fsGroup, for a platform that assigns them (OpenShift's
  // SCCs refuse a pod that pins IDs outside the namespace's range); runAsNonRoot stays, and
  // OnRootMismatch applies to the fsGroup the platform sets.
  podSecurityContext(user, pinIds=true):: {
    runAsNonRoot: true,
    seccompProfile: { type: 'RuntimeDefault' },
    fsGroupChangePolicy: 'OnRootMismatch',
  } + (if pinIds then { runAsUser: user, runAsGroup: user, fsGroup: user } else {}),

  // Whether the platform assigns user and fsGroup to pods that pin none (lib/defaults.libsonnet,
  // `platform`).
  assignsIds(config):: config.platform == 'openshift',

  // The SCC of the hostPath probes on OpenShift (components/openshift.libsonnet).
  hostPathScc:: 'fioprobe-hostpath',

  // A pod's securityContext, and what its template's metadata adds, on the configured platform.
  // On OpenShift every pod names the SCC it must be admitted by (openshift.io/required-scc,
  // a constant of github.com/openshift/api security/v1): the hostPath probes theirs, every
  // other pod restricted-v2, the SCC that assigns an fsGroup; without the annotation an SCC
  // of higher priority that a ServiceAccount may also use (anyuid assigns no fsGroup) could
  // admit the pod with a volume it cannot write.
  podSecurity(config, user, hostPath=false):: {
    securityContext: $.podSecurityContext(user, pinIds=hostPath || !$.assignsIds(config)),
    metadata: if !$.assignsIds(config) then {} else {
      annotations: { 'openshift.io/required-scc': if hostPath then $.hostPathScc else 'restricted-v2' },
    },
  },

  // The NetworkPolicy peer of the Prometheus that scrapes (monitoring.prometheusNamespace and
  // prometheusPodSelector): its pods by label, in its namespace or in any.
  prometheusPeer(config)::
    local m = config.monitoring;
    {
      namespaceSelector: if m.prometheusNamespace == null then {}
      else { matchLabels: { 'kubernetes.io/metadata.name': m.prometheusNamespace } },
    } + (if std.length(m.prometheusPodSelector) == 0 then {}
         else { podSelector: { matchLabels: m.prometheusPodSelector } }),

  // ... and container level.
  containerSecurityContext:: {
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    runAsNonRoot: true,
    capabilities: { drop: ['ALL'] },
    seccompProfile: { type: 'RuntimeDefault' },
  },

  // Bytes of a size as fioprobe reads one (exporter/fioprobe/target/config.py): a number with an
  // optional suffix Ki, Mi, Gi, Ti (powers of 1024) or K, M, G, T (of 1000), e.g. 4Mi or
  // 1.5Gi; null when the text is none. Checked here so that a bad size stops the rendering
  // instead of every pod that would be given it.
  quantityBytes(text)::
    local scales = {
      Ki: 1024,
      Mi: std.pow(1024, 2),
      Gi: std.pow(1024, 3),
      Ti: std.pow(1024, 4),
      K: 1e3,
      M: 1e6,
      G: 1e9,
      T: 1e12,
    };
    local n = std.length(text);
    local suffix = if n > 2 && std.objectHas(scales, text[n - 2:]) then text[n - 2:]
    else if n > 1 && std.objectHas(scales, text[n - 1:]) then text[n - 1:]
    else '';
    local parts = std.split(text[:n - std.length(suffix)], '.');
    local digits(s) = s != '' && std.length([ch for ch in std.stringChars(s) if !std.member('0123456789', ch)]) == 0;
    if std.length(parts) > 2 || std.length([p for p in parts if !digits(p)]) > 0 then null
    else
      local whole = std.parseInt(parts[0]);
      local fraction = if std.length(parts) == 1 then 0
      else std.parseInt(parts[1]) / std.pow(10, std.length(parts[1]));
      (whole + fraction) * (if suffix == '' then 1 else scales[suffix]),

  // Seconds of a Prometheus duration (1m, 30s, 1h30m, 500ms: whole numbers, units y w d h m s
  // ms, each at most once and largest first, as Prometheus and prometheus-operator read one);
  // null when the text is none. The same form is durationPattern, the chart's JSON Schema.
  durationSeconds(text)::
    local units = { y: 31536000, w: 604800, d: 86400, h: 3600, m: 60, s: 1, ms: 0.001 };
    local order = ['y', 'w', 'd', 'h', 'm', 's', 'ms'];
    local isDigit(c) = std.member('0123456789', c);
    // [[digits, unit], ...]: a new token starts at a digit that follows a unit.
    local tokens = std.foldl(function(acc, c)
      local last = if acc == [] then null else acc[std.length(acc) - 1];
      local head = if acc == [] then [] else acc[:std.length(acc) - 1];
      if isDigit(c) then
        if last == null || last[1] != '' then acc + [[c, '']] else head + [[last[0] + c, '']]
      else if last == null then acc + [['', c]]
      else head + [[last[0], last[1] + c]], std.stringChars(text), []);
    local valid = tokens != [] && std.length([
      t
      for t in tokens
      if t[0] == '' || !std.member(order, t[1])
    ]) == 0;
    local positions = if valid then [std.find(t[1], order)[0] for t in tokens] else [];
    local increasing = std.length([
      i
      for i in std.range(1, std.length(positions) - 1)
      if positions[i] <= positions[i - 1]
    ]) == 0;
    if !valid || !increasing then null
    else std.foldl(function(sum, t) sum + std.parseInt(t[0]) * units[t[1]], tokens, 0),
  // A DNS subdomain (RFC 1123): dot-separated parts of lower-case letters, digits and '-',
  // each starting and ending with a letter or digit, at most 253 characters in all; what
  // Kubernetes names nodes and StorageClasses with, and what `fioprobe provision` checks
  // (exporter/fioprobe/kube/nodes.py). The same form is subdomainPattern, for JSON Schema.
  isSubdomain(v)::
    local alnum(ch) = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
    local part(t) =
      std.length(t) >= 1 && alnum(t[0]) && alnum(t[std.length(t) - 1])
      && std.length([ch for ch in std.stringChars(t) if !(alnum(ch) || ch == '-')]) == 0;
    std.isString(v) && std.length(v) >= 1 && std.length(v) <= 253
    && std.length([t for t in std.split(v, '.') if !part(t)]) == 0,
  subdomainPattern:: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$',

  durationPattern:: '^([0-9]+y)?([0-9]+w)?([0-9]+d)?([0-9]+h)?([0-9]+m)?([0-9]+s)?([0-9]+ms)?$',

  // An http(s) URL with an explicit port (pushgateway.url) as {scheme, host, port}; null when
  // it is none. The form is also the chart's JSON Schema pattern (lib/defaults.libsonnet).
  urlParts(url)::
    local parts = std.split(url, '://');
    local authority = if std.length(parts) == 2 then std.split(parts[1], '/')[0] else '';
    local hostPort = std.split(authority, ':');
    local digits(s) = s != '' && std.length([ch for ch in std.stringChars(s) if !std.member('0123456789', ch)]) == 0;
    if std.length(parts) != 2 || !std.member(['http', 'https'], parts[0])
       || std.length(hostPort) != 2 || hostPort[0] == '' || !digits(hostPort[1]) then null
    else { scheme: parts[0], host: hostPort[0], port: std.parseInt(hostPort[1]) },

  // The NetworkPolicy egress rule to an existing Pushgateway (pushgateway.url): its port, on
  // the addresses of pushgateway.cidrs, or on any address when none are given.
  toExistingPushgateway(pgw):: {
    ports: [{ protocol: 'TCP', port: $.urlParts(pgw.url).port }],
  } + (if std.length(pgw.cidrs) == 0 then {} else {
         to: [{ ipBlock: { cidr: cidr } } for cidr in pgw.cidrs],
       }),

  // A DNS-1123 name from free text (node names carry dots; CronJob names must stay <= 52
  // characters because the Job controller appends an 11-character suffix).
  dnsName(text, max=52)::
    local lowered = std.asciiLower(text);
    local cleaned = std.join('', [
      if std.member('abcdefghijklmnopqrstuvwxyz0123456789-', c) then c else '-'
      for c in std.stringChars(lowered)
    ]);
    assert std.length(cleaned) <= max : 'name %s is longer than %d characters' % [cleaned, max];
    cleaned,

  // Cron schedule of the probe at position `index` (0, 1, ...) of its kind: every
  // `everyMinutes`, starting at minute `index mod everyMinutes`, so that probes spread over
  // the interval instead of all starting together (on one Ceph cluster, or on every etcd
  // member at once, which would slow quorum commits cluster-wide). Deterministic, so
  // regenerating changes nothing. An explicit cron string wins.
  schedule(config, index, explicit=null)::
    if explicit != null then explicit
    else
      // A whole number of minutes that divides 60 (lib/defaults.libsonnet checks it).
      local every = config.everyMinutes;
      local offset = index % every;
      if every == 60 then '%d * * * *' % offset
      else if every == 1 then '* * * * *'
      else '%d-59/%d * * * *' % [offset, every],
}
