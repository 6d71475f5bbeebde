{{/*
The mixin's rules and dashboards (components/monitoring.libsonnet), in templates/monitoring/.
Every rule group but `fioprobe.expected` and every dashboard come from files/, rendered from
the mixin for the chart's probe interval (everyMinutes) by scripts/generate.d/32-chart.sh; the
expected group lists this release's probes and streams (manifests/lib/monitoring-config.libsonnet
mixinConfig), computed here at install from the values and the StorageClasses found.
*/}}

{{/* A profile's name: a profiles entry is a name or a profile with overrides. */}}
{{- define "fioprobe.profileName" -}}
{{- if kindIs "string" . }}{{ . }}{{ else }}{{ .name }}{{ end -}}
{{- end }}

{{/*
The rules of the `fioprobe.expected` group, as JSON: the deployment's facts (expected probes,
per-node probes, streams and provisioning groups), the mixin's PromQL from files/derived.json where a rule is more
than a static series.
*/}}
{{- define "fioprobe.expectedRules" -}}
{{- $v := .Values -}}
{{- $derived := .Files.Get "files/derived.json" | fromJson -}}
{{- $records := $derived.records }}
{{- $rules := list }}
{{- range include "fioprobe.storageClasses" $ | fromJsonArray }}
{{- $sc := .name }}
{{- range .profiles }}
{{- $rules = append $rules (dict "record" $records.expected "expr" "vector(1)" "labels"
  (dict "storageclass" $sc "profile" (include "fioprobe.profileName" .))) }}
{{- end }}
{{- end }}
{{- $etcdNodes := ternary $v.etcd.nodes list $v.etcd.enabled }}
{{- range $node := $etcdNodes }}
{{- range $v.etcd.profiles }}
{{- $rules = append $rules (dict "record" $records.expected "expr" "vector(1)" "labels"
  (dict "storageclass" $v.etcd.name "profile" (include "fioprobe.profileName" .) "node" $node)) }}
{{- end }}
{{- end }}
{{- $perNode := list }}
{{- if $v.perNode.enabled }}
{{- range concat $v.perNode.localDisks $v.perNode.storageClasses }}
{{- $sc := .name }}
{{- range .profiles }}
{{- $perNode = append $perNode (dict "storageclass" $sc "profile" (include "fioprobe.profileName" .)) }}
{{- end }}
{{- end }}
{{- end }}
{{- range $perNode }}
{{- $rules = append $rules (dict "record" $records.expectedPerNode "expr" "vector(1)" "labels" .) }}
{{- end }}
{{- if $perNode }}
{{- $rules = append $rules $derived.perNodeNodesRule }}
{{- end }}
{{- range $perNode }}
{{- $rules = append $rules (dict "record" $records.expectedOnNode "expr"
  (printf "%s\n" $derived.perNodeNodesRule.record) "labels" .) }}
{{- end }}
{{- if $v.continuous.enabled }}
{{- if $v.continuous.etcd }}
{{- range $etcdNodes }}
{{- $rules = append $rules (dict "record" $records.expectedStream "expr" "vector(1)" "labels"
  (dict "storageclass" $v.etcd.name "node" .)) }}
{{- end }}
{{- end }}
{{- if $v.continuous.storageClasses }}
{{- range include "fioprobe.storageClasses" $ | fromJsonArray }}
{{- $rules = append $rules (dict "record" $records.expectedStream "expr" "vector(1)" "labels"
  (dict "storageclass" .name)) }}
{{- end }}
{{- end }}
{{- end }}
{{- /* The etcd probes and streams found by role: expected on the etcd nodes (kube_node_role). */}}
{{- if and $v.etcd.enabled (not $v.etcd.nodes) }}
{{- $etcdProbes := list }}
{{- range $v.etcd.profiles }}
{{- $etcdProbes = append $etcdProbes (dict "storageclass" $v.etcd.name "profile"
  (include "fioprobe.profileName" .)) }}
{{- end }}
{{- range $etcdProbes }}
{{- $rules = append $rules (dict "record" $records.expectedEtcd "expr" "vector(1)" "labels" .) }}
{{- end }}
{{- $roles := list }}
{{- range $v.etcd.roleLabels }}
{{- if hasPrefix "node-role.kubernetes.io/" . }}{{ $roles = append $roles
  (trimPrefix "node-role.kubernetes.io/" .) }}{{ end }}
{{- end }}
{{- if eq (len $roles) (len $v.etcd.roleLabels) }}
{{- $roleMatcher := ternary (printf "role=%s" (first $roles | toJson)) (printf "role=~%s" (join "|" $roles | toJson))
  (eq (len $roles) 1) }}
{{- $inventory := deepCopy $derived.etcdInventoryRule }}
{{- $_ := set $inventory "expr" (replace (printf "role=%s" ("ROLES" | toJson)) $roleMatcher $inventory.expr) }}
{{- $rules = append $rules $inventory }}
{{- $rules = append $rules $derived.etcdNodesRule }}
{{- else }}
{{- $rules = append $rules $derived.etcdNodesPushingRule }}
{{- end }}
{{- range $etcdProbes }}
{{- $rules = append $rules (dict "record" $records.expectedOnEtcdNode "expr"
  (printf "%s\n" $derived.etcdNodesRule.record) "labels" .) }}
{{- end }}
{{- if and $v.continuous.enabled $v.continuous.etcd }}
{{- $rules = append $rules (dict "record" $records.expectedStream "expr" (printf "%s\n" $derived.etcdNodesRule.record)
  "labels" (dict "storageclass" $v.etcd.name)) }}
{{- end }}
{{- end }}
{{- /* The provisioning probe's groups: one per class its CronJob provisions, or per node given. */}}
{{- range include "fioprobe.provisioning.groups" $ | fromJsonArray }}
{{- $rules = append $rules (dict "record" $records.expectedProvision "expr" "vector(1)" "labels" .) }}
{{- end }}
{{- toJson $rules -}}
{{- end }}
