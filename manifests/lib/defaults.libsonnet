// Every key of the manifests' configuration, its default, its type and what it is for: the
// schema that manifests/config.libsonnet (and any overrides) are checked against and merged
// over (lib/params.libsonnet: an unknown key, a value of the wrong type or a missing required
// key stops the rendering with the key's path). Nested objects merge key by key, so a config
// that sets `etcd: { nodes: [...] }` keeps the default tolerations; lists replace the default.
// An explicit null is the same as leaving a nullable key out.
//
// `'#key'::` documents `key` in one line, what it is: docs/MANIFESTS.md's table of keys and the
// chart's values.yaml comments are generated from it (scripts/generate.d/31-manifests-params.sh,
// scripts/chart_files.py, which refuses a doc longer than one comment line). The detail lives in
// docs/MANIFESTS.md's sections; comments here say why a default is what it is.
local publish = import '../../publish.json';
local catalog = import 'catalog.json';
local common = import 'common.libsonnet';
local p = import 'params.libsonnet';

// "a, b or c", for the allowed values in a message.
local either(values) =
  if std.length(values) == 1 then values[0]
  else std.join(', ', values[:std.length(values) - 1]) + ' or ' + values[std.length(values) - 1];

// A whole number from `min` (to `max`); `default` null: no default (for nullable keys).
local wholeNumber(default, min, max=null) = p.check(
  if default == null then p.type('number') else default,
  function(v) v == std.floor(v) && v >= min && (max == null || v <= max),
  if max == null then 'must be a whole number of at least %d' % min
  else 'must be a whole number from %d to %d' % [min, max],
  { type: 'integer', minimum: min } + (if max == null then {} else { maximum: max }),
);

// A StorageClass's or a node's name: what `fioprobe provision` refuses must fail here, not in
// every run of an installed CronJob.
local subdomain(what) = p.check(
  p.type('string'),
  common.isSubdomain,
  'must be a %s: lower-case letters, digits, - and ., starting and ending with a letter or digit, at most 253 characters' % what,
  { maxLength: 253, pattern: common.subdomainPattern },
);

// A whole number of bytes from `min` to `max`, a string fioprobe reads as a size
// (4096, 4Mi, 1.5Gi: lib/common.libsonnet's quantityBytes). JSON Schema checks the form;
// the chart's templates check the range (fioprobe.validate).
local bytes(default, min, max, problem) = p.check(default, function(v)
  local n = common.quantityBytes(v);
  n != null && n == std.floor(n) && n >= min && n <= max, problem, {
  pattern: '^[0-9]+([.][0-9]+)?(Ki|Mi|Gi|Ti|K|M|G|T)?$',
});

// A Kubernetes quantity of bytes greater than zero (a PVC's size: 20Gi).
local quantity(default) = p.check(default, function(v)
  local n = common.quantityBytes(v);
  n != null && n > 0, 'must be a quantity of bytes such as 20Gi or 500Mi', {
  pattern: '^[0-9]+([.][0-9]+)?(Ki|Mi|Gi|Ti|K|M|G|T)?$',
  not: { pattern: '^[0.]+[A-Za-z]*$' },
});

// A Prometheus duration longer than zero (30s, 1m, 1h30m), as Prometheus and the operator's
// CRDs read one: the CRD would otherwise refuse it halfway through an install.
local duration(default) = p.check(default, function(v)
  local seconds = common.durationSeconds(v);
  seconds != null && seconds > 0, 'must be a Prometheus duration such as 30s, 1m or 1h30m', {
  pattern: common.durationPattern,
  minLength: 2,
  not: { pattern: '^(0+(y|w|d|h|m|s|ms))+$' },
});

local positive = p.check(p.type('number'), function(v) v > 0, 'must be more than 0', { exclusiveMinimum: 0 });

// A duration as Go's time.ParseDuration reads a flag (the Pushgateway's): h, m, s and ms only,
// no d, w or y, which a Prometheus duration allows and Go refuses (the pod would crash-loop).
local goDuration(default) = p.check(default,
                                    function(v)
                                      local seconds = common.durationSeconds(v);
                                      seconds != null && seconds > 0 && std.length([c for c in std.stringChars(v) if std.member('dwy', c)]) == 0,
                                    'must be a duration such as 30s, 1m or 1h30m (h, m, s or ms: the Pushgateway reads it with Go, which has no d, w or y)',
                                    {
                                      pattern: '^([0-9]+h)?([0-9]+m)?([0-9]+s)?([0-9]+ms)?$',
                                      minLength: 2,
                                      not: { pattern: '^(0+(h|m|s|ms))+$' },
                                    });

// An IPv4 or IPv6 address block (10.0.0.0/16, fd00::/8): what a NetworkPolicy's ipBlock takes.
local cidr = p.check(p.type('string'),
                     function(v)
                       local parts = std.split(v, '/');
                       local isIn(set) = function(c) std.member(set, c);
                       std.length(parts) == 2 && parts[0] != '' && parts[1] != ''
                       && std.length([c for c in std.stringChars(parts[0]) if !isIn('0123456789abcdefABCDEF:.')(c)]) == 0
                       && std.length([c for c in std.stringChars(parts[1]) if !isIn('0123456789')(c)]) == 0
                       && std.length(parts[1]) <= 3 && std.parseInt(parts[1]) <= 128,
                     'must be an address block such as 10.20.0.0/16 or fd00::/8',
                     {
                       pattern: '^[0-9a-fA-F:.]+/[0-9]{1,3}$',
                     });

// Kubernetes resource requests and limits: quantities by resource name.
local resources(requests, limits) = {
  '#requests':: 'Requests by resource name (cpu, memory, ...); merged key by key, null removes one.',
  requests: p.map(requests),
  '#limits':: 'Limits by resource name; merged key by key, null removes one.',
  limits: p.map(limits),
};

// fioprobe's volume model (exporter/fioprobe/target/volumes.py), copied into the probe's config.
// Its types and what each needs come from there (lib/catalog.json, generated).
local volumeType = p.check('unknown', function(v) std.member(catalog.volumeTypes, v), 'must be one of ' + either(catalog.volumeTypes), {
  enum: catalog.volumeTypes,
});
// What a type cannot be modelled without: {size: why} (gp2), {iops: why} (io1, io2), {}.
local needsOf(type) = if std.objectHas(catalog.volumeTypeNeeds, type) then catalog.volumeTypeNeeds[type] else {};
local typeOf(volume) = if std.objectHas(volume, 'type') then volume.type else 'unknown';
local missing(volume) = [
  k
  for k in std.objectFields(needsOf(typeOf(volume)))
  if !std.objectHas(volume, k) || volume[k] == null
];
local volume(sizeRequired) = p.check({
  '#title':: 'volume model',
  '#type':: "One of fioprobe's volume types (listed in the README); fioprobe checks it.",
  type: volumeType,
  '#size':: "Size, a Kubernetes quantity (100Gi): gp2's baseline depends on it. Required where it sizes a volume.",
  size: if sizeRequired then p.required(quantity(p.type('string'))) else p.optional(quantity(p.type('string'))),
  '#iops':: 'Provisioned IOPS (gp3, io1, io2).',
  iops: p.optional(positive),
  '#throughput':: 'Provisioned throughput per second, a quantity (gp3: 125Mi).',
  throughput: p.optional(p.oneOf(null, [quantity(p.type('string')), wholeNumber(null, 1)])),
  '#provisioner':: 'CSI provisioner, for fioprobe_info.',
  provisioner: p.optional('string'),
  '#dedicated':: 'Only the probe does IO on the volume, so its burst balance can be modelled.',
  dedicated: p.optional('boolean'),
}, function(v) missing(v) == [], function(v)
  // A type that cannot be modelled without a setting (gp2 without its size) would fail every
  // run: the message is fioprobe's own (target/volumes.py NEEDS).
  std.join('; ', ['%s needs %s: set %s' % [typeOf(v), needsOf(typeOf(v))[k], k] for k in missing(v)]), {
  allOf: [
    {
      'if': { properties: { type: { const: type } }, required: ['type'] },
      // Present and not null: Helm's null removes a key, but a null in a list item stays.
      'then': {
        required: std.objectFields(catalog.volumeTypeNeeds[type]),
        properties: { [k]: { not: { type: 'null' } } for k in std.objectFields(catalog.volumeTypeNeeds[type]) },
      },
    }
    for type in std.objectFields(catalog.volumeTypeNeeds)
  ],
});

// A profile of jobs/ by name, or with overrides of its size, IO size and runtime (within
// its budget; fioprobe checks the values). The names are those the image ships
// (lib/catalog.json, generated from jobs/).
local profileName = p.check(p.type('string'), function(v) std.member(catalog.profiles, v), 'must be one of the profiles in jobs/: ' + either(catalog.profiles), {
  enum: catalog.profiles,
});
local profile = p.oneOf(null, [profileName, {
  '#title':: 'profile with overrides',
  '#name':: 'Profile name (jobs/<name>.fio).',
  name: p.required(profileName),
  '#size':: "Override of the profile's size.",
  size: p.optional(p.oneOf(null, ['string', 'number'])),
  '#io_size':: "Override of the profile's io_size.",
  io_size: p.optional(p.oneOf(null, ['string', 'number'])),
  '#runtime':: "Override of the profile's runtime (seconds).",
  runtime: p.optional(p.oneOf(null, ['string', 'number'])),
}]);
local profiles(default=null) =
  local list = p.check(p.list(profile, if default == null then [] else default), function(v) std.length(v) > 0, 'needs at least one profile', { minItems: 1 });
  if default == null then p.required(list) else list;

local toleration = {
  '#title':: 'Kubernetes tolerations',
  key: p.optional('string'),
  operator: p.optional('string'),
  value: p.optional('string'),
  effect: p.optional('string'),
  tolerationSeconds: p.optional('number'),
};

// The provisioning probe's steps (exporter/fioprobe/provision/steps.py's Step), whose
// deadlines the configuration may set.
local provisionSteps = ['created', 'scheduled', 'bound', 'attached', 'running', 'written', 'pod_deleted', 'detached', 'volume_deleted'];

local nonEmpty(default) = p.check(default, function(v) v != '', 'must not be empty', { minLength: 1 });
local name = p.required(nonEmpty(p.type('string')));

{
  // Parts used in several places, for the documentation (not configuration keys: hidden).
  parts:: { volume: volume(false).schema, profile: profile.types[1] },
  // Checked kinds of value, for the chart's own keys (manifests/chart.jsonnet).
  kinds:: { quantity: quantity, duration: duration, profiles: profiles },

  '#version':: "app.kubernetes.io/version of every object: fioprobe's version (its `__version__`).",
  version: import 'version.libsonnet',
  '#image':: 'The probe image (built from the Dockerfile: `make image`).',
  image: {
    // publish.json: the one place of the addresses a release names.
    '#name':: "Image name without tag (the release's: publish.json; your registry's when you build your own).",
    name: nonEmpty(publish.image),
    '#tag':: 'Image tag; `version` by default.',
    tag: $.version,
    '#pullPolicy':: 'imagePullPolicy of the probe containers.',
    pullPolicy: p.check('IfNotPresent', function(v) std.member(['Always', 'IfNotPresent', 'Never'], v), 'must be Always, IfNotPresent or Never', { enum: ['Always', 'IfNotPresent', 'Never'] }),
  },
  '#namespace':: 'Namespace of the Pushgateway and the StorageClass probes (Pod Security restricted).',
  namespace: 'fioprobe',

  '#everyMinutes':: "Probe interval in minutes; must divide 60. Also the mixin's probeIntervalSeconds.",
  everyMinutes: p.check(5, function(v) v == std.floor(v) && v >= 1 && v <= 60 && 60 % v == 0, 'must be a whole number of minutes that divides 60', {
    enum: [m for m in std.range(1, 60) if 60 % m == 0],
  }),
  // A run that could not start within this time after its slot is skipped, not started late:
  // a late start would overlap the next slot on the same disk.
  '#startingDeadlineSeconds':: 'CronJob startingDeadlineSeconds: a run that cannot start this soon after its slot is skipped.',
  startingDeadlineSeconds: wholeNumber(120, 1),
  // fioprobe's own per-profile wall-clock limit (fio is killed after it; a failure is pushed).
  '#profileTimeoutSeconds':: "Wall-clock limit of one profile's run (fio is killed, a failure pushed).",
  profileTimeoutSeconds: wholeNumber(60, 1),
  '#successfulJobsHistoryLimit':: 'Finished Jobs kept per CronJob.',
  successfulJobsHistoryLimit: wholeNumber(1, 0),
  '#failedJobsHistoryLimit':: 'Failed Jobs kept per CronJob.',
  failedJobsHistoryLimit: wholeNumber(3, 0),
  // Numeric IDs so that runAsNonRoot can be checked by the kubelet; the Dockerfile creates
  // this user. fsGroup makes the PVC writable by it.
  '#probeUser':: "Numeric user and group of the probes (the Dockerfile's user), and fsGroup of their volumes.",
  probeUser: wholeNumber(65532, 1),
  // Plain Kubernetes assigns no IDs: a pod that pins none runs as its image's user, and a
  // fresh PVC stays root's, so every pod pins its user and fsGroup. OpenShift assigns both
  // from the namespace's range (SCC restricted-v2) and refuses pods that pin others; there
  // only the hostPath probes pin theirs (the prepared directories are owned by probeUser),
  // allowed by an SCC of their own (docs/MANIFESTS.md, "OpenShift").
  '#platform':: "kubernetes or openshift: who sets the pods' user and fsGroup (docs/MANIFESTS.md, OpenShift).",
  platform: p.check('kubernetes', function(v) std.member(['kubernetes', 'openshift'], v), "must be 'kubernetes' or 'openshift'", { enum: ['kubernetes', 'openshift'] }),
  '#probeResources':: 'Resources of a probe container.',
  probeResources: resources({ cpu: '50m', memory: '64Mi' }, { cpu: '1', memory: '256Mi' }),

  // One persistent probe PVC and one CronJob per entry.
  '#storageClasses':: 'One persistent PVC and one CronJob per StorageClass.',
  storageClasses: p.list({
    '#name':: 'The storageclass label, and the StorageClass of the PVC unless storageClassName is given.',
    name: name,
    '#storageClassName':: 'StorageClass of the PVC when it differs from name.',
    storageClassName: p.optional('string'),
    '#schedule':: 'A cron schedule instead of everyMinutes with its start-time offset.',
    schedule: p.optional('string'),
    '#volume':: "The volume model; size is required: it is also the PVC's size.",
    volume: p.required(volume(true)),
    '#profiles':: 'Profiles to run: names of jobs/*.fio, or profiles with overrides.',
    profiles: profiles(),
    '#etcdDisk':: "The volume holds etcd's data (published as etcd_disk; the etcd alerts select by it).",
    etcdDisk: false,
    '#provision':: 'Provision a volume of this class on the provisioning schedule (provisioning.enabled).',
    provision: true,
  }, unique='name'),
  // Mount point of the probe volume inside the pod: the config's `directory`.
  '#probeMountPath':: "Mount point of the probe volume in the pod (the config's directory).",
  probeMountPath: '/probe',
  '#configMountPath':: "Mount point of the probe's configuration in the pod.",
  configMountPath: '/etc/fioprobe',
  // Node-local probes (etcd, per-node) probe hostPath directories that other pods may write:
  // their state (cumulative counters) must not live there, where a tenant could forge it
  // (docs/SAFETY.md, "Where state lives"). It lives in this directory on the node instead,
  // which only the probe writes, so a new pod on the same node continues its counters.
  '#stateHostPath':: 'Directory on each node where node-local probes keep their state; the etcd probes create it.',
  stateHostPath: '/var/lib/fioprobe/state',

  '#etcd':: 'Probes of the etcd disks: a DaemonSet on the nodes found by role (docs/MANIFESTS.md, etcd disks).',
  etcd: {
    '#enabled':: 'Probe the etcd disks and run their streams (nothing runs on managed control planes).',
    enabled: true,
    '#name':: 'The storageclass label of these node-local probes.',
    name: nonEmpty('etcd-disk'),
    // Found by role, not by name: a node that joins later is covered without a new install,
    // and nothing here names a node of one particular cluster.
    '#roleLabels':: 'Label keys of the nodes that hold etcd (any of them); ignored when nodes is set.',
    roleLabels: p.check(
      p.list('string', ['node-role.kubernetes.io/control-plane', 'node-role.kubernetes.io/master']),
      function(v) std.length(v) > 0 && std.length(std.set(v)) == std.length(v) && std.length([k for k in v if k == '']) == 0,
      'needs at least one label key, none empty or twice',
      { minItems: 1, uniqueItems: true, items: { minLength: 1 } },
    ),
    '#nodes':: 'Node names (kubernetes.io/hostname) to probe instead of those found by role; empty: by role.',
    nodes: p.check(p.list('string'), function(v) std.length(std.set(v)) == std.length(v), 'must not name a node twice', { uniqueItems: true }),
    // The probe checks that its directory shares etcd's filesystem before every run, so a
    // dedicated etcd disk is never "probed" on the root disk (docs/MANIFESTS.md lists the
    // directory per distribution).
    '#dataDir':: "etcd's data directory on the nodes; hostPath must be on its filesystem (docs/MANIFESTS.md).",
    dataDir: '/var/lib/etcd',
    '#hostPath':: "Dedicated directory beside etcd's data, on its filesystem; created by the deployment.",
    hostPath: '/var/lib/etcd-fioprobe',
    '#namespace':: 'Namespace of the etcd probes (Pod Security privileged: hostPath); the deployment creates it.',
    namespace: 'fioprobe-etcd',
    '#volume':: 'The volume model of the etcd disk.',
    volume: volume(false),
    '#profiles':: 'Profiles to run on each etcd disk.',
    profiles: profiles(['etcd-fsync']),
    // Control-plane taints of kubeadm (control-plane), older clusters (master) and
    // OpenShift (master); NoExecute is not tolerated: evicted nodes are not probed.
    '#tolerations':: 'Tolerations of the etcd probes (control-plane and master NoSchedule taints).',
    tolerations: p.list(toleration, [
      { key: 'node-role.kubernetes.io/control-plane', operator: 'Exists', effect: 'NoSchedule' },
      { key: 'node-role.kubernetes.io/master', operator: 'Exists', effect: 'NoSchedule' },
    ]),
  },

  // The pods that read the Kubernetes API (the etcd probes, to find the other etcd members)
  // may reach it here, nothing else of the cluster: the NetworkPolicy egress rule. Most
  // network plugins judge egress after the Service address is translated, so the rule names
  // the API server's own port (6443 with kubeadm) beside the Service's (443).
  '#apiServer':: "Where the pods that read the Kubernetes API reach it (their NetworkPolicy's egress).",
  apiServer: {
    '#ports':: "TCP ports of the API server: the kubernetes Service's and the endpoints' own.",
    // At least one: an egress rule with no port and no address allows everything.
    ports: p.check(
      p.list(wholeNumber(null, 1, 65535), [443, 6443]),
      function(v) std.length(v) > 0,
      'needs at least one port (a rule without ports would allow any egress)',
      { minItems: 1 },
    ),
    '#cidrs':: 'Addresses of the API server endpoints (CIDRs); empty: any address on those ports.',
    cidrs: p.list('string'),
  },

  // The provisioning probe (`fioprobe provision`, docs/PROVISIONING.md): a claim and a pod of
  // each StorageClass (those with `provision` on), every step from claim to first fdatasync
  // timed, both deleted. Every 10 minutes by default: a cluster that cannot give a disk is
  // seen within one interval, at the cost of one small volume at a time (the type's smallest:
  // docs/PROVISIONING.md, "Cost").
  '#provisioning':: 'The provisioning probe: a claim and a pod per StorageClass on a schedule (docs/PROVISIONING.md).',
  provisioning: {
    '#enabled':: 'Deploy the provisioning CronJob, its namespace and its RBAC.',
    enabled: true,
    '#namespace':: 'Namespace of the test claims and pods (restricted, nothing else in it); created here.',
    namespace: nonEmpty('fioprobe-provision'),
    '#everyMinutes':: "Provisioning interval in minutes; must divide 60. Also the mixin's provisionIntervalSeconds.",
    everyMinutes: p.check(10, function(v) v == std.floor(v) && v >= 1 && v <= 60 && 60 % v == 0, 'must be a whole number of minutes that divides 60', {
      enum: [m for m in std.range(1, 60) if 60 % m == 0],
    }),
    '#schedule':: 'A cron schedule instead of everyMinutes with its start-time offset; null: none.',
    schedule: p.nullable(nonEmpty(p.type('string'))),
    // A class whose volumes are local to a node (local-path, TopoLVM, OpenEBS LocalPV) gets
    // a run per node listed, each pod required onto its node; runs on different nodes share
    // no attach slot, so up to maxParallel of them overlap (every other run is alone).
    '#nodes':: 'Classes bound to nodes: class name -> the nodes to provision it on, a run each.',
    nodes: p.check(
      p.map({}, 'array'),
      function(v) std.length([
        k
        for k in std.objectFields(v)
        if v[k] != null && (std.length(v[k]) == 0 || std.length(v[k]) > 1000
                            || std.length([n for n in v[k] if !common.isSubdomain(n)]) > 0
                            || std.length(std.set(v[k])) != std.length(v[k]))
      ]) == 0,
      'each class must list from 1 to 1000 nodes, each a node name (lower-case letters, digits, - and .), once',
      { additionalProperties: {
        type: 'array',
        minItems: 1,
        maxItems: 1000,
        uniqueItems: true,
        items: { type: 'string', maxLength: 253, pattern: common.subdomainPattern },
      } },
    ),
    '#maxParallel':: 'How many runs of one class in nodes overlap, each on its own node (1 to 64).',
    maxParallel: wholeNumber(4, 1, 64),
    '#storageClasses':: 'More StorageClasses to provision (names), beside the storageClasses entries.',
    storageClasses: p.check(p.list(subdomain('StorageClass name')), function(v) std.length(std.set(v)) == std.length(v), 'must not name a class twice', { uniqueItems: true }),
    // Each step's limit (docs/PROVISIONING.md, "Steps"): a step that takes longer fails the
    // run with reason `deadline`; the defaults (fioprobe provision --help) fit an EBS attach.
    '#deadlines':: 'Seconds each step may take before the run fails in it (1 to 3600); unset: the default.',
    deadlines: p.check(
      p.map({}, 'number', keys=provisionSteps),
      function(v) std.all([v[k] == null || (v[k] == std.floor(v[k]) && v[k] >= 1 && v[k] <= 3600) for k in std.objectFields(v)]),
      'each deadline must be a whole number of seconds from 1 to 3600',
      { additionalProperties: { type: 'integer', minimum: 1, maximum: 3600 } },
    ),
  },

  // The continuous stream (`fioprobe continuous`, docs/CONTINUOUS.md): a small write and an
  // fdatasync about once a second per target, scraped by Prometheus, so that stalls between
  // the scheduled runs and hangs while they hang are seen. A DaemonSet pod on each etcd node
  // (etcd.nodes, hostPath etcd.hostPath) and a one-replica StatefulSet with a small PVC per
  // StorageClass.
  '#continuous':: 'The continuous fsync stream per target, scraped (docs/CONTINUOUS.md).',
  continuous: {
    '#enabled':: 'Deploy the streams (etcd nodes and StorageClasses).',
    enabled: true,
    '#etcd':: 'A stream on each etcd node (a DaemonSet beside the etcd probes, in etcd.hostPath).',
    etcd: true,
    '#storageClasses':: 'A stream per entry of storageClasses (a StatefulSet with its own small PVC).',
    storageClasses: true,
    '#port':: 'Port of /metrics in the pods (the PodMonitor scrapes it).',
    port: wholeNumber(9436, 1, 65535),
    '#intervalSeconds':: 'Seconds between two write+fdatasync operations (0.1 to 3600).',
    intervalSeconds: p.check(1, function(v) v >= 0.1 && v <= 3600, 'must be from 0.1 to 3600', { minimum: 0.1, maximum: 3600 }),
    '#writeSize':: 'Bytes per write (etcd WAL-like: 2300).',
    writeSize: wholeNumber(2300, 512, 1048576),
    // The bounds of `fioprobe continuous --file-size`: a value it refuses would stop every
    // stream pod at its start.
    '#fileSize':: 'Bytes of the one preallocated file per target, a quantity (the bytes on disk).',
    fileSize: bytes('4Mi', 64 * 1024, std.pow(1024, 3), 'must be a whole number of bytes from 64Ki to 1Gi, a quantity like 4Mi or 65536'),
    '#stallThresholdSeconds':: 'An operation outstanding longer than this counts as a stall.',
    stallThresholdSeconds: p.check(0.01, function(v) v >= 0.0001 && v <= 60, 'must be from 0.0001 to 60', { minimum: 0.0001, maximum: 60 }),
    '#pvcSize':: "Size of each StorageClass stream's PVC.",
    pvcSize: quantity('1Gi'),
    // Measured with one target: 23.4 MB resident plus the file's page cache (up to its
    // 4 MiB), 1.3m of CPU (docs/MANIFESTS.md, "The continuous stream"). No CPU limit: under a
    // CFS quota the wake-up inside the writer's fdatasync is throttled with everything else in
    // the container, so a burst of scrapes would show as slow fsyncs, and a flood's accepting
    // throttles the server that answers the kubelet (docs/CONTINUOUS.md).
    '#resources':: 'Resources of a stream container (no CPU limit by default: a quota distorts what it measures).',
    resources: resources({ cpu: '10m', memory: '48Mi' }, { memory: '128Mi' }),
  },

  '#pushgateway':: 'The Pushgateway the probes push to.',
  pushgateway: {
    // An existing Pushgateway instead of one of fioprobe's own (a shared one, or the
    // prometheus-pushgateway chart beside kube-prometheus-stack): the probes push there, and
    // nothing below but auth, tls, timeoutSeconds and attempts applies. Who runs it scrapes
    // it, with honorLabels (docs/MANIFESTS.md). The port is explicit: the probes'
    // NetworkPolicy lets them reach it, on any address (where it runs is not known here).
    '#url':: 'An existing Pushgateway (http[s]://host:port) to push to; null: deploy one.',
    url: p.nullable(p.check(
      p.type('string'),
      function(v) common.urlParts(v) != null,
      'must be http://host:port or https://host:port (a path may follow)',
      { pattern: '^https?://[^/:]+:[0-9]+(/.*)?$' },
    )),
    // The egress to an existing Pushgateway is by its port alone unless its addresses are
    // given: a NetworkPolicy cannot name a host, and where its pods run is not known here.
    '#cidrs':: "Address blocks of the existing Pushgateway's pods, for the probes' egress; empty: any address.",
    cidrs: p.list(cidr),
    '#name':: 'Name of its Deployment or StatefulSet, Service and ServiceAccount.',
    name: nonEmpty('fioprobe-pushgateway'),
    // The one place of its tag: make e2e builds Debian's prometheus-pushgateway under this
    // name (scripts/e2e/cluster.sh reads this line).
    '#image':: 'Pushgateway image.',
    image: 'quay.io/prometheus/pushgateway:v1.11.3',
    '#port':: 'Listen port.',
    port: wholeNumber(9091, 1, 65535),
    '#user':: 'Numeric user and group it runs as, and its fsGroup (platform kubernetes).',
    user: wholeNumber(65534, 1),  // nobody, as in the upstream image
    '#storage':: 'Size of its persistence volume (per replica).',
    storage: quantity('1Gi'),
    '#storageClassName':: "StorageClass of its persistence volume; null: the cluster's default StorageClass.",
    storageClassName: p.nullable('string'),
    '#persistenceInterval':: 'How often it writes its store to the volume.',
    persistenceInterval: goDuration('1m'),
    '#resources':: 'Resources of the Pushgateway container.',
    resources: resources({ cpu: '20m', memory: '32Mi' }, { cpu: '500m', memory: '256Mi' }),
    // Basic auth of pushes: a Secret with keys `username` and `password`, mounted into the
    // probes as files (never in env or args). The Pushgateway checks it through web-config.
    '#auth':: 'Basic auth of pushes and scrapes (docs/MANIFESTS.md).',
    auth: {
      '#enabled':: 'Mount the Secret into the probes and the ServiceMonitor.',
      enabled: false,
      '#secretName':: 'Secret with keys username and password.',
      secretName: 'fioprobe-pushgateway-auth',
    },
    // TLS: the Pushgateway serves https with the certificate in its web-config Secret; probes
    // and the ServiceMonitor verify it with `ca.crt` from this Secret.
    '#tls':: 'https between the probes, Prometheus and the Pushgateway (docs/MANIFESTS.md).',
    tls: {
      '#enabled':: 'Serve https; probes and the ServiceMonitor verify it.',
      enabled: false,
      '#caSecretName':: 'Secret with key ca.crt.',
      caSecretName: 'fioprobe-pushgateway-ca',
      '#serverName':: 'Server name the ServiceMonitor verifies; null: <name>.<namespace>.svc.',
      serverName: p.nullable('string'),
    },
    // Secret with key `web-config.yml` (exporter-toolkit format: basic_auth_users with bcrypt
    // hashes, tls_server_config); mounted only when auth or tls is enabled.
    '#webConfigSecretName':: 'Secret with key web-config.yml, mounted when auth or tls is enabled.',
    webConfigSecretName: 'fioprobe-pushgateway-web-config',
    '#timeoutSeconds':: 'Timeout of one push attempt.',
    timeoutSeconds: wholeNumber(10, 1),
    '#attempts':: 'Push attempts per group and run.',
    attempts: wholeNumber(3, 1),
    // 'auto': as many replicas as the expected groups need by the sizing rule
    // (lib/sizing.libsonnet, docs/SIZING.md); or a number. More than one: a StatefulSet, each
    // replica with its own volume, and the probes pick a group's replica by hashing.
    '#replicas':: 'auto: from the expected groups by the sizing rule (docs/SIZING.md); or a number.',
    replicas: p.check(
      p.oneOf('auto', ['string', 'number']),
      function(v) v == 'auto' || (std.isNumber(v) && v == std.floor(v) && v >= 1),
      "must be 'auto' or a whole number of at least 1",
      { anyOf: [{ const: 'auto' }, { type: 'integer', minimum: 1 }] },
    ),
    // Groups one replica holds; null: from the probe interval by the measured push cost
    // (lib/sizing.libsonnet, docs/SIZING.md): 900 at 5 minutes.
    '#groupsPerReplica':: 'Groups one replica holds; null: from everyMinutes (900 at 5 minutes).',
    groupsPerReplica: p.nullable(wholeNumber(null, 1)),
  },

  // Per-node probes: a DaemonSet probing every node, on its local disks (hostPath) and on
  // each StorageClass through a generic ephemeral volume the scheduler binds on that node.
  // Every group carries `node`. docs/MANIFESTS.md, "Per-node probes".
  '#perNode':: 'Per-node probes: a DaemonSet on every node (docs/MANIFESTS.md, Per-node probes).',
  perNode: {
    '#enabled':: 'Deploy the DaemonSet.',
    enabled: false,
    '#name':: 'Name of the DaemonSet; the owner of its groups.',
    name: nonEmpty('fioprobe-node'),
    // hostPath volumes need the "privileged" Pod Security level: a namespace of its own.
    '#namespace':: 'Its namespace (Pod Security privileged: hostPath).',
    namespace: 'fioprobe-nodes',
    '#expectedNodes':: 'Nodes to expect: sizes the Pushgateway.',
    expectedNodes: wholeNumber(0, 0),
    '#nodeSelector':: 'Nodes to probe (labels); empty: every node.',
    nodeSelector: p.map({}, 'string'),
    '#tolerations':: 'Tolerations of the DaemonSet.',
    tolerations: p.list(toleration),
    // A directory per node, prepared once (owned by the probe user), as the etcd one. It
    // holds the local-disk probe directories; every target's state is in stateHostPath, on
    // the node too, so a replaced pod continues its counters without reading the
    // Pushgateway back.
    '#hostPath':: 'Directory on each node for the local-disk probe directories, prepared once.',
    hostPath: '/var/lib/fioprobe',
    '#localDisks':: 'Node-local disks: fio writes in <hostPath>/<name>.',
    localDisks: p.list({
      '#name':: 'The storageclass label and the directory under hostPath.',
      name: name,
      '#volume':: 'The volume model.',
      volume: volume(false),
      '#profiles':: 'Profiles to run.',
      profiles: profiles(),
      '#etcdDisk':: "The directory is on the disk that holds etcd's data on every node that runs it.",
      etcdDisk: false,
    }, unique='name'),
    '#storageClasses':: 'A generic ephemeral volume of volume.size per StorageClass and pod.',
    storageClasses: p.list({
      '#name':: 'The storageclass label, and the StorageClass unless storageClassName is given.',
      name: name,
      '#storageClassName':: 'StorageClass of the ephemeral volume when it differs from name.',
      storageClassName: p.optional('string'),
      '#volume':: "The volume model; size is required: it is also the ephemeral volume's size.",
      volume: p.required(volume(true)),
      '#profiles':: 'Profiles to run.',
      profiles: profiles(),
      '#etcdDisk':: "The volume holds etcd's data (published as etcd_disk).",
      etcdDisk: false,
    }, unique='name'),
    '#resources':: 'Resources of the per-node probe container.',
    resources: resources({ cpu: '20m', memory: '64Mi' }, { cpu: '1', memory: '256Mi' }),
  },

  // Where the cluster's DNS answers: the probes' only egress besides the Pushgateway.
  // OpenShift: namespace openshift-dns, pods dns.operator.openshift.io/daemonset-dns=default,
  // port 5353.
  '#dns':: "Where the cluster DNS answers: the probes' only egress besides the Pushgateway.",
  dns: {
    '#namespace':: 'Namespace of the DNS pods.',
    namespace: 'kube-system',
    '#podSelector':: 'Labels of the DNS pods.',
    podSelector: p.map({ 'k8s-app': 'kube-dns' }, 'string'),
    '#port':: 'DNS port of the pods (UDP and TCP).',
    port: wholeNumber(53, 1, 65535),
  },

  '#monitoring':: 'ServiceMonitor, PodMonitor, PrometheusRule and dashboards.',
  monitoring: {
    // Who may scrape the Pushgateway and the streams (their NetworkPolicies' ingress): pods
    // with these labels in this namespace. prometheus-operator labels every Prometheus it runs
    // app.kubernetes.io/name=prometheus (kube-prometheus, kube-prometheus-stack, OpenShift's
    // user-workload monitoring). The namespace matters: a label is anyone's to set, and the
    // Pushgateway's port also takes pushes and deletes; a tenant's pod labelled like Prometheus
    // in its own namespace must not reach it. null: any namespace (only where no tenant can
    // create pods, or with pushgateway.auth).
    '#prometheusNamespace':: 'Namespace of the Prometheus that scrapes (NetworkPolicy ingress); null: any namespace.',
    prometheusNamespace: p.oneOf('monitoring', ['string', 'null']),
    '#prometheusPodSelector':: 'Labels of the Prometheus pods that scrape (NetworkPolicy ingress); empty: any pod there.',
    prometheusPodSelector: p.map({ 'app.kubernetes.io/name': 'prometheus' }, 'string'),
    // Whether the cluster serves monitoring.coreos.com/v1 (prometheus-operator). false: no
    // ServiceMonitor, PodMonitor or PrometheusRule is rendered (applying them would fail on
    // "no matches for kind"); the chart's notes print the plain scrape configuration and how to
    // load the rules. The chart also turns it off by itself where the API is not served.
    '#operator':: 'Render the prometheus-operator objects (ServiceMonitor, PodMonitor, PrometheusRule).',
    operator: true,
    '#serviceMonitor':: 'ServiceMonitor of the Pushgateway (honorLabels).',
    serviceMonitor: {
      '#enabled':: 'Generate it.',
      enabled: true,
      '#interval':: 'Scrape interval.',
      interval: duration('30s'),
      '#labels':: 'Extra labels (for the Prometheus serviceMonitorSelector).',
      labels: p.map({}, 'string'),
    },
    // The continuous stream is scraped from its pods (it never pushes): a PodMonitor over
    // both of its namespaces. Without prometheus-operator, switch it off and use
    // manifests/generated/continuous-scrape-config.yaml instead.
    '#podMonitor':: 'PodMonitor of the continuous stream pods (honorLabels).',
    podMonitor: {
      '#enabled':: 'Generate it (when a stream is deployed).',
      enabled: true,
      // The stream's in-flight gauge shows a hang only at scrape time: a shorter interval
      // than the Pushgateway's sees a stall of seconds sooner.
      '#interval':: 'Scrape interval (also of the plain scrape config).',
      interval: duration('15s'),
      '#labels':: 'Extra labels (for the Prometheus podMonitorSelector).',
      labels: p.map({}, 'string'),
    },
    '#prometheusRule':: "PrometheusRule with the mixin's alerts and recording rules.",
    prometheusRule: {
      '#enabled':: 'Generate it.',
      enabled: true,
      '#labels':: 'Its labels (for the Prometheus ruleSelector); null removes a default one.',
      labels: p.map({ prometheus: 'k8s', role: 'alert-rules' }, 'string'),
    },
    '#dashboards':: 'Dashboard ConfigMaps for the Grafana sidecar.',
    dashboards: {
      '#enabled':: 'Generate them.',
      enabled: true,
      // The Grafana sidecar watches ConfigMaps with these labels, in its own namespace or in
      // every namespace (its searchNamespace).
      '#namespace':: 'Their namespace; null: namespace.',
      namespace: p.nullable('string'),
      '#labels':: 'Labels the Grafana sidecar selects.',
      labels: p.map({ grafana_dashboard: '1' }, 'string'),
      '#folder':: 'grafana_folder annotation.',
      folder: 'fioprobe',
    },
    // Overrides of the monitoring mixin's _config (config.libsonnet at the repository root).
    '#mixinConfig':: "Overrides of the monitoring mixin's _config: its keys (config.libsonnet).",
    // main.libsonnet checks its keys against the mixin's own (a misspelt one would be ignored
    // by the mixin); not here: the mixin's config reads this file.
    mixinConfig: p.map({}),
  },
}
