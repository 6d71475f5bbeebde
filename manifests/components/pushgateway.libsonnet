// Pushgateway: Deployment with its metric store on a PVC (--persistence.file on the
// volume, so a restart keeps every probe's cumulative counters), Service, ServiceMonitor
// with honorLabels (the pushed storageclass/profile/node labels win over the scrape's),
// and a NetworkPolicy admitting only probes and Prometheus. Returns {key: object}.
// When the expected groups need more than one replica (lib/sizing.libsonnet), a StatefulSet
// with a volume per replica and a headless Service (stable per-replica DNS names, which the
// probes hash over) replace the Deployment, its PVC and the Service's cluster IP; the one
// ServiceMonitor scrapes every replica through the headless Service's endpoints.
// With an existing Pushgateway (pushgateway.url) only the namespace: the probes push there.
local common = import '../lib/common.libsonnet';
local provisioning = import '../lib/provisioning.libsonnet';
local sizing = import '../lib/sizing.libsonnet';

function(config) {
  local c = config,
  local pgw = c.pushgateway,
  local secured = pgw.auth.enabled || pgw.tls.enabled,
  local scheme = if pgw.tls.enabled then 'HTTPS' else 'HTTP',
  local meta(name) = common.metadata(c, 'pushgateway', name, c.namespace),
  local selector = common.selectorLabels('pushgateway'),
  local replicas = sizing.replicas(c),
  local sharded = replicas > 1,
  local own = pgw.url == null,
  local probeNamespaces = std.set(
    [c.namespace]
    + (if c.etcd.enabled then [c.etcd.namespace] else [])
    + (if c.perNode.enabled then [c.perNode.namespace] else [])
  ),

  namespace: {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: common.metadata(c, 'pushgateway', c.namespace) + {
      labels+: {
        'pod-security.kubernetes.io/enforce': 'restricted',
        'pod-security.kubernetes.io/warn': 'restricted',
        'pod-security.kubernetes.io/audit': 'restricted',
      },
    },
  },

  serviceAccount: if !own then null else {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: meta(pgw.name),
    automountServiceAccountToken: false,
  },

  persistentVolumeClaim: if sharded || !own then null else {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: meta(pgw.name),
    spec: {
      accessModes: ['ReadWriteOnce'],
      resources: { requests: { storage: pgw.storage } },
    } + (if pgw.storageClassName == null then {} else { storageClassName: pgw.storageClassName }),
  },

  // With basic auth every path needs credentials, /-/ready included: then the kubelet
  // checks the TCP port only.
  local probe(path) =
    if pgw.auth.enabled then { tcpSocket: { port: 'web' } }
    else { httpGet: { path: path, port: 'web', scheme: scheme } },

  local security = common.podSecurity(c, pgw.user),
  local deployment = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: meta(pgw.name),
    spec: {
      replicas: 1,
      // ReadWriteOnce volume: the old pod must let go of it before the new one starts.
      strategy: { type: 'Recreate' },
      selector: { matchLabels: selector },
      template: {
        metadata: { labels: common.labels(c, 'pushgateway') } + security.metadata,
        spec: {
          serviceAccountName: pgw.name,
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          securityContext: security.securityContext,
          containers: [{
            name: 'pushgateway',
            image: pgw.image,
            args: [
              '--web.listen-address=:%d' % pgw.port,
              '--persistence.file=/data/pushgateway.db',
              '--persistence.interval=' + pgw.persistenceInterval,
            ] + (if secured then ['--web.config.file=/etc/pushgateway/web-config.yml'] else []),
            ports: [{ name: 'web', containerPort: pgw.port, protocol: 'TCP' }],
            readinessProbe: probe('/-/ready') + { periodSeconds: 10 },
            livenessProbe: probe('/-/healthy') + { periodSeconds: 30, failureThreshold: 4 },
            resources: pgw.resources,
            securityContext: common.containerSecurityContext,
            volumeMounts: [{ name: 'data', mountPath: '/data' }]
                          + (if secured then [
                               { name: 'web-config', mountPath: '/etc/pushgateway', readOnly: true },
                             ] else []),
          }],
          volumes: [{ name: 'data', persistentVolumeClaim: { claimName: pgw.name } }]
                   + (if secured then [
                        { name: 'web-config', secret: { secretName: pgw.webConfigSecretName } },
                      ] else []),
        },
      },
    },
  },

  deployment: if sharded || !own then null else deployment,

  // Each replica keeps its own groups on its own volume; a replica that restarts comes back
  // with them under the same name, so the probes' hashing still finds every group.
  statefulSet: if !sharded || !own then null else {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: meta(pgw.name),
    spec: {
      replicas: replicas,
      serviceName: pgw.name,
      // Replicas are independent stores: no reason to start them one after the other.
      podManagementPolicy: 'Parallel',
      selector: { matchLabels: selector },
      template: deployment.spec.template {
        spec+: {
          volumes: [v for v in super.volumes if v.name != 'data'],
          containers: [
            container { resources+: { requests+: { cpu: sizing.replicaCpuRequest(c) } } }
            for container in super.containers
          ],
          // One replica per node where the cluster allows: replicas on one node share its
          // CPUs, which is what makes pushes queue.
          topologySpreadConstraints: [{
            maxSkew: 1,
            topologyKey: 'kubernetes.io/hostname',
            whenUnsatisfiable: 'ScheduleAnyway',
            labelSelector: { matchLabels: selector },
          }],
        },
      },
      volumeClaimTemplates: [{
        metadata: { name: 'data' },
        spec: {
          accessModes: ['ReadWriteOnce'],
          resources: { requests: { storage: pgw.storage } },
        } + (if pgw.storageClassName == null then {} else { storageClassName: pgw.storageClassName }),
      }],
    },
  },

  service: if !own then null else {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: meta(pgw.name),
    spec: (if sharded then { clusterIP: 'None' } else {}) + {
      selector: selector,
      ports: [{ name: 'web', port: pgw.port, targetPort: 'web', protocol: 'TCP' }],
    },
  },

  networkPolicy: if !own then null else {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: meta(pgw.name),
    spec: {
      podSelector: { matchLabels: selector },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [{
        from: [
          {
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } },
            podSelector: { matchLabels: common.selectorLabels('probe') },
          }
          for ns in probeNamespaces
        ] + (if std.length(provisioning.classes(c)) == 0 then [] else [{
               // The provisioning probe's pod (components/provisioning.libsonnet).
               namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': c.namespace } },
               podSelector: { matchLabels: common.selectorLabels('provision') },
             }]) + [common.prometheusPeer(c)],
        ports: [{ protocol: 'TCP', port: pgw.port }],
      }],
      // The Pushgateway initiates no connection.
      egress: [],
    },
  },

  serviceMonitor: if !c.monitoring.operator || !c.monitoring.serviceMonitor.enabled || !own then null else {
    apiVersion: 'monitoring.coreos.com/v1',
    kind: 'ServiceMonitor',
    metadata: meta(pgw.name) + { labels+: c.monitoring.serviceMonitor.labels },
    spec: {
      selector: { matchLabels: selector },
      endpoints: [{
                    port: 'web',
                    interval: c.monitoring.serviceMonitor.interval,
                    // The pushed job/storageclass/profile/node labels are the metric contract's
                    // identity; the scrape's own job/instance must not overwrite them.
                    honorLabels: true,
                    scheme: std.asciiLower(scheme),
                  } + (if pgw.tls.enabled then {
                         tlsConfig: {
                           ca: { secret: { name: pgw.tls.caSecretName, key: 'ca.crt' } },
                           serverName: if pgw.tls.serverName != null then pgw.tls.serverName
                           else '%s.%s.svc' % [pgw.name, c.namespace],
                         },
                       } else {})
                  + (if pgw.auth.enabled then {
                       basicAuth: {
                         username: { name: pgw.auth.secretName, key: 'username' },
                         password: { name: pgw.auth.secretName, key: 'password' },
                       },
                     } else {})],
    },
  },
}
