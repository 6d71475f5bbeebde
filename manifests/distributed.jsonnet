// One distributed benchmark's Kubernetes objects (components/distributed.libsonnet), as a
// List for `kubectl apply -f -`. Not part of the generated manifests: rendered on request,
//   .tools/bin/go-jsonnet -J . -J vendor --tla-code-file benchmark=my-benchmark.jsonnet \
//     manifests/distributed.jsonnet
// `overrides` (--tla-code) merges into manifests/config.libsonnet, as for render.jsonnet.
// `part`: 'servers' (the plan, the servers and both policies: apply first and wait for the
// servers), 'client' (the Job), or 'all'.
function(benchmark, overrides={}, part='all')
  local all = (import 'main.libsonnet')(overrides=overrides);
  local objects = (import 'components/distributed.libsonnet')(all.config, benchmark);
  local parts = {
    servers: ['plan', 'service', 'servers', 'serverPolicy', 'clientPolicy', 'pushgatewayPolicy'],
    client: ['client'],
    all: self.servers + self.client,
  };
  assert std.objectHas(parts, part) : "part must be 'servers', 'client' or 'all'";
  {
    apiVersion: 'v1',
    kind: 'List',
    items: [objects[key] for key in parts[part] if objects[key] != null],
  }
