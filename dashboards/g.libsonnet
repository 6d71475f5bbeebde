// grafonnet, the one version the dashboards are built with: installed by jsonnet-bundler
// from jsonnetfile.json into vendor/ (render with `-J vendor`); a mixin user's own `jb
// install` of fioprobe brings it along.
import 'github.com/grafana/grafonnet/gen/grafonnet-v11.4.0/main.libsonnet'
