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
  podSecurityContext(user, fsGroup=true):: {
    runAsNonRoot: true,
    runAsUser: user,
    runAsGroup: user,
    seccompProfile: { type: 'RuntimeDefault' },
  } + (if fsGroup then { fsGroup: user, fsGroupChangePolicy: 'OnRootMismatch' } else {}),

  // ... and container level.
  containerSecurityContext:: {
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    runAsNonRoot: true,
    capabilities: { drop: ['ALL'] },
    seccompProfile: { type: 'RuntimeDefault' },
  },

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
