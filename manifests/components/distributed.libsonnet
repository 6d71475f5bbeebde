// A distributed benchmark of one StorageClass (`fioprobe distributed`, docs/DISTRIBUTED.md):
// fio servers in a StatefulSet, each on a PVC of the benchmarked class, spread over nodes
// where there are several; one client Job that runs the plan against them; a NetworkPolicy
// that lets only that client reach the servers. Off by default: nothing in render.jsonnet
// includes it; manifests/distributed.jsonnet renders one benchmark's objects on request, and
// every object (PVCs included) carries the benchmark's instance label, which the documented
// clean-up deletes by.
//
// A fio server runs whatever job a client sends it: the servers take connections from the
// benchmark's client pod alone, and send nothing anywhere (no egress at all).
//
// function(config, benchmark) -> {key: object}; `benchmark` is checked here:
//   name          the benchmark (lowercase, digits, -): object names, the `benchmark` label
//   storageclass  the StorageClass of the servers' PVCs
//   servers       how many fio servers (1 to 64)
//   volumeSize    each server's PVC, a quantity (e.g. 40Gi)
//   nodeSelector  {label: value}: where the servers may run (default {})
//   keepVolumes   true: the PVCs stay when the StatefulSet is deleted (default false)
//   push          push the result to fioprobe's Pushgateway (default true)
//   plan          the rest of the plan (jobs_per_server, file_size, budget, ...), checked by
//                 fioprobe itself when the client starts (and by `fioprobe distributed --check`),
//                 with volumeSize as its volume_size: a data set that does not fit is refused
//
// The client waits for its servers to listen (--wait-for-servers) before it sends anything,
// so every object may be applied at once (the chart does); part 'servers' then 'client'
// (manifests/distributed.jsonnet) works as well.
local u = import '../../lib/util.libsonnet';
local common = import '../lib/common.libsonnet';
local sizing = import '../lib/sizing.libsonnet';

function(config, benchmark)
  local c = config;
  local b = {
    nodeSelector: {},
    keepVolumes: false,
    push: true,
    plan: {},
  } + benchmark;
  // Unknown keys first, then the required ones: a misspelt key is named as such (with the
  // nearest known one), not reported as the required key it was meant to be.
  local onlyIn = ['name', 'storageclass', 'servers', 'volumeSize', 'nodeSelector', 'keepVolumes', 'push', 'plan'];
  local unknown = [k for k in std.objectFields(b) if !std.member(onlyIn, k)];
  assert std.length(unknown) == 0
         : 'distributed: unknown keys %s (expected %s)%s' % [
    std.join(', ', unknown),
    std.join(', ', onlyIn),
    std.join('', [u.suggestion(k, onlyIn) for k in unknown]),
  ];
  local required = ['name', 'storageclass', 'servers', 'volumeSize'];
  local missing = [k for k in required if !std.objectHas(b, k)];
  assert std.length(missing) == 0
         : 'distributed: %s required (every benchmark names %s)' % [
    std.join(', ', missing) + (if std.length(missing) == 1 then ' is' else ' are'),
    std.join(', ', required),
  ];
  local name = b.name;
  // At most 37: the StatefulSet's name (fioprobe-bench-<name>, 52 at most) goes into its pods'
  // controller-revision-hash label with a hash after it, and a label value has 63 at most.
  local validName = std.length(name) <= 37 && std.length([
    ch
    for ch in std.stringChars(name)
    if !std.member('abcdefghijklmnopqrstuvwxyz0123456789-', ch)
  ]) == 0 && name[0] != '-' && name[std.length(name) - 1] != '-';
  assert validName : 'distributed: name %s must be lowercase letters, digits and -, at most 37' % name;
  assert std.isNumber(b.servers) && b.servers >= 1 && b.servers <= 64 && b.servers == std.floor(b.servers)
         : 'distributed: servers must be a whole number from 1 to 64';
  assert common.quantityBytes(b.volumeSize) != null : 'distributed: volumeSize %s is not a quantity such as 40Gi' % b.volumeSize;
  assert std.isBoolean(b.keepVolumes) : 'distributed: keepVolumes must be true or false';
  assert std.isBoolean(b.push) : 'distributed: push must be true or false';
  local pgw = c.pushgateway;
  assert !b.push || !(pgw.auth.enabled || pgw.tls.enabled)
         : 'distributed: push to a Pushgateway with auth or TLS is not supported yet; set push: false';
  local fromPlan = ['name', 'storageclass', 'servers', 'node_selector', 'volume_size'];
  local setInPlan = [k for k in std.objectFields(b.plan) if std.member(fromPlan, k)];
  assert std.length(setInPlan) == 0
         : 'distributed: plan must not set %s: %s come from the benchmark' % [
    std.join(', ', setInPlan),
    std.join(', ', fromPlan),
  ];

  local ns = c.namespace;
  local port = 8765;
  local serverComponent = 'distributed-server';
  local clientComponent = 'distributed-client';
  local serverLabels = common.selectorLabels(serverComponent, name);
  local clientLabels = common.selectorLabels(clientComponent, name);
  local serversName = 'fioprobe-bench-%s' % name;
  local serviceName = serversName;
  local planDir = '/etc/fioprobe-distributed';
  local dataDir = '/data';
  local plan = b.plan {
    name: name,
    storageclass: b.storageclass,
    servers: b.servers,
    node_selector: b.nodeSelector,
    volume_size: b.volumeSize,
  };
  // The servers by their stable StatefulSet DNS names.
  local servers = [
    '%s-%d.%s.%s.svc:%d' % [serversName, i, serviceName, ns, port]
    for i in std.range(0, b.servers - 1)
  ];
  local security = common.podSecurity(c, c.probeUser);
  // Deadlines. The plan's budget bounds the phases' runtimes; each phase run (a sweep runs
  // every random phase once per IO depth) adds fio's slack (PHASE_SLACK_SECONDS in
  // exporter/fioprobe/distributed/jobs.py); after the last phase, or at SIGTERM, the client
  // stops fio's client (STOP_GRACE_SECONDS, client.py), runs the clean-up (CLEANUP_SECONDS,
  // benchmark.py) and pushes (every attempt at its timeout, and the waits between them).
  local planPhases = std.get(b.plan, 'phases', ['prepare', 'randread', 'randwrite']);
  local phases = if std.isArray(planPhases) then planPhases else [];
  local planSweep = std.get(b.plan, 'iodepths', [0]);
  local sweep = if std.isArray(planSweep) && std.length(planSweep) > 0 then std.length(planSweep) else 1;
  local phaseRuns = (if std.member(phases, 'prepare') then 1 else 0)
                    + sweep * std.length([p for p in phases if p != 'prepare']);
  local phaseSlack = 60;
  local stopSeconds = 10;
  local cleanupSeconds = 30;
  local pushSeconds = if b.push then 2 * pgw.timeoutSeconds * pgw.attempts else 0;
  local budgetSeconds = std.get(std.get(b.plan, 'budget', {}), 'seconds_per_server', 3600);
  // What the client needs after SIGTERM (the Job's deadline sends it): the grace period.
  local clientGrace = stopSeconds + cleanupSeconds + pushSeconds + 10;
  // How long the client waits for every server to listen: the servers' PVCs provisioned and
  // attached, their image pulled, when everything is applied at once.
  local serverWait = 300;
  // The client Job's deadline: its start (image, DNS: 60 s), the wait for its servers, every
  // phase, then the above.
  local deadline = 60 + serverWait + budgetSeconds + phaseRuns * phaseSlack + clientGrace;
  // The servers listen from their start until the client can no longer need them: the
  // window to apply the client after the servers are ready, the client's deadline, and its
  // grace (the clean-up reaches the servers then). At that moment `timeout` stops fio's
  // server for good: the container then idles without a listener, so the StatefulSet has no
  // exit to restart, until the documented clean-up deletes the StatefulSet.
  local clientStartWindow = 600;
  local serverSeconds = clientStartWindow + deadline + clientGrace;
  local serverScript = importstr '../lib/distributed-server.sh';

  {
    plan: {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: common.metadata(c, clientComponent, 'fioprobe-bench-%s-plan' % name, ns, name),
      data: {
        'plan.yaml': std.manifestYamlDoc(plan, indent_array_in_object=false, quote_keys=false) + '\n',
      },
    },

    // Headless: each server has its own stable name, which the client's --servers lists.
    service: {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: common.metadata(c, serverComponent, serviceName, ns, name),
      spec: {
        clusterIP: 'None',
        publishNotReadyAddresses: true,
        selector: serverLabels,
        ports: [{ name: 'fio', protocol: 'TCP', port: port, targetPort: port }],
      },
    },

    servers: {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: common.metadata(c, serverComponent, serversName, ns, name),
      spec: {
        serviceName: serviceName,
        replicas: b.servers,
        podManagementPolicy: 'Parallel',
        selector: { matchLabels: serverLabels },
        // The PVCs go with the StatefulSet, unless keepVolumes.
        persistentVolumeClaimRetentionPolicy: {
          whenDeleted: if b.keepVolumes then 'Retain' else 'Delete',
          whenScaled: if b.keepVolumes then 'Retain' else 'Delete',
        },
        template: {
          metadata: { labels: common.labels(c, serverComponent, name) } + security.metadata,
          spec: {
            automountServiceAccountToken: false,
            enableServiceLinks: false,
            // The script stops fio's server at SIGTERM and exits at once.
            terminationGracePeriodSeconds: 15,
            securityContext: security.securityContext,
            nodeSelector: b.nodeSelector,
            // Spread over distinct nodes where there are several; several on one node where
            // there are not (a preference, never a reason to stay Pending).
            affinity: {
              podAntiAffinity: {
                preferredDuringSchedulingIgnoredDuringExecution: [{
                  weight: 100,
                  podAffinityTerm: {
                    topologyKey: 'kubernetes.io/hostname',
                    labelSelector: { matchLabels: serverLabels },
                  },
                }],
              },
            },
            containers: [{
              name: 'fio-server',
              image: '%s:%s' % [c.image.name, c.image.tag],
              imagePullPolicy: c.image.pullPolicy,
              // fio writes the jobs' files in its working directory: the PVC. fio's server
              // listens until serverSeconds, never after (see serverScript).
              command: [
                'sh',
                '-c',
                serverScript,
                'fio-server',
                std.toString(serverSeconds),
                'ip:0.0.0.0,%d' % port,
              ],
              workingDir: dataDir,
              ports: [{ name: 'fio', containerPort: port, protocol: 'TCP' }],
              resources: c.probeResources,
              securityContext: common.containerSecurityContext,
              volumeMounts: [
                { name: 'data', mountPath: dataDir },
                { name: 'tmp', mountPath: '/tmp' },
              ],
            }],
            volumes: [{ name: 'tmp', emptyDir: { sizeLimit: '16Mi' } }],
          },
        },
        volumeClaimTemplates: [{
          // The instance label lets the clean-up find the PVCs (they outlive the pods).
          metadata: { name: 'data', labels: common.labels(c, serverComponent, name) },
          spec: {
            accessModes: ['ReadWriteOnce'],
            storageClassName: b.storageclass,
            resources: { requests: { storage: b.volumeSize } },
          },
        }],
      },
    },

    client: {
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: common.metadata(c, clientComponent, 'fioprobe-bench-%s' % name, ns, name),
      spec: {
        // One benchmark, never a second attempt that would lay the data out again.
        backoffLimit: 0,
        activeDeadlineSeconds: deadline,
        template: {
          metadata: { labels: common.labels(c, clientComponent, name) } + security.metadata,
          spec: {
            restartPolicy: 'Never',
            // At the Job's deadline or a deletion: stop fio, clean up, push (see clientGrace).
            terminationGracePeriodSeconds: clientGrace,
            automountServiceAccountToken: false,
            enableServiceLinks: false,
            securityContext: security.securityContext,
            containers: [{
              name: 'fioprobe',
              image: '%s:%s' % [c.image.name, c.image.tag],
              imagePullPolicy: c.image.pullPolicy,
              command: [
                'fioprobe',
                'distributed',
                '--plan',
                planDir + '/plan.yaml',
                '--servers',
                std.join(',', servers),
                '--output',
                '/results',
                '--wait-for-servers',
                std.toString(serverWait),
              ] + (if b.push then ['--gateway', sizing.urls(c)[0]] else []),
              resources: c.probeResources,
              securityContext: common.containerSecurityContext,
              volumeMounts: [
                { name: 'plan', mountPath: planDir, readOnly: true },
                { name: 'results', mountPath: '/results' },
                { name: 'tmp', mountPath: '/tmp' },
              ],
            }],
            volumes: [
              { name: 'plan', configMap: { name: 'fioprobe-bench-%s-plan' % name } },
              { name: 'results', emptyDir: { sizeLimit: '256Mi' } },
              { name: 'tmp', emptyDir: { sizeLimit: '16Mi' } },
            ],
          },
        },
      },
    },

    // The servers: reached by the benchmark's client alone, on fio's port; they reach nothing.
    serverPolicy: {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: common.metadata(c, serverComponent, serversName + '-servers', ns, name),
      spec: {
        podSelector: { matchLabels: serverLabels },
        policyTypes: ['Ingress', 'Egress'],
        ingress: [{
          from: [{ podSelector: { matchLabels: clientLabels } }],
          ports: [{ protocol: 'TCP', port: port }],
        }],
        egress: [],
      },
    },

    // The Pushgateway's own policy admits probes and Prometheus only; policies add up, so this
    // one admits the benchmark's client too, on the Pushgateway's port, while it exists. An
    // existing Pushgateway (pushgateway.url) is not ours to admit anything to.
    pushgatewayPolicy: if b.push && pgw.url == null then {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: common.metadata(c, clientComponent, 'fioprobe-bench-%s-push' % name, ns, name),
      spec: {
        podSelector: { matchLabels: common.selectorLabels('pushgateway') },
        policyTypes: ['Ingress'],
        ingress: [{
          from: [{ podSelector: { matchLabels: clientLabels } }],
          ports: [{ protocol: 'TCP', port: pgw.port }],
        }],
      },
    } else null,

    // The client: reaches the servers, the cluster DNS and (when it pushes) the Pushgateway.
    clientPolicy: {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: common.metadata(c, clientComponent, 'fioprobe-bench-%s-client' % name, ns, name),
      spec: {
        podSelector: { matchLabels: clientLabels },
        policyTypes: ['Ingress', 'Egress'],
        ingress: [],
        egress: [
          {
            to: [{ podSelector: { matchLabels: serverLabels } }],
            ports: [{ protocol: 'TCP', port: port }],
          },
          {
            to: [{
              namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': c.dns.namespace } },
              podSelector: { matchLabels: c.dns.podSelector },
            }],
            ports: [{ protocol: 'UDP', port: c.dns.port }, { protocol: 'TCP', port: c.dns.port }],
          },
        ] + (
          if !b.push then []
          // An existing Pushgateway as the probes reach it: by its port, on the addresses of
          // pushgateway.cidrs or any.
          else if pgw.url != null then [common.toExistingPushgateway(pgw)]
          else [{
            to: [{
              namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': c.namespace } },
              podSelector: { matchLabels: common.selectorLabels('pushgateway') },
            }],
            ports: [{ protocol: 'TCP', port: pgw.port }],
          }]
        ),
      },
    },
  }
