{{/*
OpenShift (platform: openshift; components/openshift.libsonnet), in templates/openshift/: an
SCC that allows exactly what the hostPath pods ask for (the etcd probes, the etcd nodes'
stream, the per-node probes), a ClusterRole that may `use` it, and a RoleBinding to exactly
their ServiceAccounts in each of their namespaces. Every other pod pins no IDs and is admitted
by restricted-v2.
*/}}

{{/* The hostPath pods' ServiceAccounts by namespace, as JSON; {} off OpenShift. */}}
{{- define "fioprobe.openshift.accounts" -}}
{{- $v := .Values -}}
{{- $accounts := dict -}}
{{- if eq $v.platform "openshift" -}}
{{- $etcd := $v.etcd.namespace -}}
{{- if $v.etcd.enabled -}}
{{- $_ := set $accounts $etcd (append (get $accounts $etcd | default list) "fioprobe-etcd") -}}
{{- end -}}
{{- if include "fioprobe.continuous.etcd" . -}}
{{- $_ := set $accounts $etcd (append (get $accounts $etcd | default list) "fioprobe-continuous") -}}
{{- end -}}
{{- if $v.perNode.enabled -}}
{{- $perNode := $v.perNode.namespace -}}
{{- $_ := set $accounts $perNode (append (get $accounts $perNode | default list) "fioprobe") -}}
{{- end -}}
{{- end -}}
{{- toJson $accounts -}}
{{- end }}

{{/* The SCC's name (manifests/lib/common.libsonnet hostPathScc) and its ClusterRole's. */}}
{{- define "fioprobe.openshift.role" -}}
{{- printf "%s-scc" (include "fioprobe.hostPathScc" (dict "root" .)) -}}
{{- end }}
