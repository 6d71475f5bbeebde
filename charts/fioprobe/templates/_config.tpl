{{/*
The probes' and streams' fioprobe configuration files (components/probes.libsonnet,
components/continuous.libsonnet), written into their ConfigMaps as the manifests write them.
*/}}

{{/*
One target of a configuration file, as YAML for fromYaml: (dict "root" $ "entry" e
"directory" d "nodeLocal" bool "etcdDisk" bool "etcdDataDir" bool "mountPoint" bool
"dedicated" bool "timeout" bool "stateDir" dir), `entry` a storageClasses, localDisks or etcd
entry (its name, volume and profiles); the flags add the keys of the same names.
*/}}
{{- define "fioprobe.target" -}}
{{- $volume := include "fioprobe.volume" .entry.volume | fromJson -}}
{{- /* A StorageClass probe's own PVC: only the probe writes it, unless the volume says otherwise. */ -}}
{{- if .dedicated }}{{ $_ := set $volume "dedicated" (ne (toString (get $volume "dedicated")) "false") }}{{ end -}}
name: {{ .entry.name | toJson }}
directory: {{ .directory | toJson }}
node_local: {{ .nodeLocal }}
etcd_disk: {{ .etcdDisk | default false }}
{{- if .etcdDataDir }}
etcd_data_dir: "/etcd-data"
{{- end }}
{{- if .mountPoint }}
require_mount_point: true
{{- end }}
volume: {{ toJson $volume }}
{{- if .timeout }}
timeout_seconds: {{ .root.Values.profileTimeoutSeconds | toJson }}
{{- end }}
profiles: {{ include "fioprobe.listItems" .entry.profiles }}
{{- with .stateDir }}
state_dir: {{ . | toJson }}
{{- end }}
{{- end }}

{{/*
A value as go-jsonnet's std.manifestYamlDoc(v, indent_array_in_object=false, quote_keys=false)
writes it, so that the probes' configuration files are the manifests' byte for byte:
(dict "v" value "in" indentation). Keys sorted, strings JSON-quoted, lists in an object not
indented, whole numbers without a fraction.
*/}}
{{- define "fioprobe.manifestYaml" -}}
{{- $v := .v -}}
{{- $in := .in -}}
{{- if kindIs "map" $v -}}
{{- if not $v }}{}{{ end -}}
{{- range $n, $k := keys $v | sortAlpha -}}
{{- $x := index $v $k -}}
{{- if $n }}{{ printf "\n%s" $in }}{{ end -}}
{{- printf "%s:" $k -}}
{{- if and (kindIs "map" $x) $x -}}
{{- printf "\n%s  " $in }}{{ include "fioprobe.manifestYaml" (dict "v" $x "in" (printf "%s  " $in)) -}}
{{- else if and (kindIs "slice" $x) $x -}}
{{- printf "\n%s" $in }}{{ include "fioprobe.manifestYaml" (dict "v" $x "in" $in) -}}
{{- else -}}
{{- printf " " }}{{ include "fioprobe.manifestYaml" (dict "v" $x "in" $in) -}}
{{- end -}}
{{- end -}}
{{- else if kindIs "slice" $v -}}
{{- if not $v }}[]{{ end -}}
{{- range $n, $x := $v -}}
{{- if $n }}{{ printf "\n%s" $in }}{{ end -}}
{{- if and (kindIs "slice" $x) $x -}}
{{- printf "-\n%s  " $in }}{{ include "fioprobe.manifestYaml" (dict "v" $x "in" (printf "%s  " $in)) -}}
{{- else -}}
{{- printf "- " }}{{ include "fioprobe.manifestYaml" (dict "v" $x "in" (printf "%s  " $in)) -}}
{{- end -}}
{{- end -}}
{{- else if kindIs "float64" $v -}}
{{- if eq $v (floor $v) }}{{ int64 $v }}{{ else }}{{ $v }}{{ end -}}
{{- else if kindIs "invalid" $v -}}
null
{{- else -}}
{{- toJson $v -}}
{{- end -}}
{{- end }}

{{/* The probes' fioprobe configuration of their Pushgateway (components/probes.libsonnet). */}}
{{- define "fioprobe.probePushgateway" -}}
{{- $pgw := .Values.pushgateway -}}
{{- $urls := include "fioprobe.pushgatewayUrls" . | fromJsonArray -}}
{{- $conf := dict "timeout_seconds" $pgw.timeoutSeconds "attempts" $pgw.attempts -}}
{{- if eq (len $urls) 1 }}{{ $_ := set $conf "url" (first $urls) }}{{ else }}{{ $_ := set $conf "shards"
  $urls }}{{ end -}}
{{- if $pgw.auth.enabled -}}
{{- $_ := set $conf "username_file" "/var/run/secrets/fioprobe/pushgateway-auth/username" -}}
{{- $_ := set $conf "password_file" "/var/run/secrets/fioprobe/pushgateway-auth/password" -}}
{{- end -}}
{{- if $pgw.tls.enabled }}{{ $_ := set $conf "ca_file" "/var/run/secrets/fioprobe/pushgateway-ca/ca.crt" }}{{ end -}}
{{- toJson $conf -}}
{{- end }}

{{/* A map without its null values: an optional key given as null is absent (manifests/lib/params.libsonnet). */}}
{{- define "fioprobe.compact" -}}
{{- $out := dict -}}
{{- range $k, $x := . }}{{ if not (kindIs "invalid" $x) }}{{ $_ := set $out $k $x }}{{ end }}{{ end -}}
{{- toJson $out -}}
{{- end }}

{{/* A volume model as the manifests complete it (manifests/lib/defaults.libsonnet volume: type unknown). */}}
{{- define "fioprobe.volume" -}}
{{- toJson (merge (include "fioprobe.compact" (. | default dict) | fromJson) (dict "type" "unknown")) -}}
{{- end }}

{{/*
Items of a list as the manifests complete them: strings as they are, objects without null
values (profiles: names or overrides; tolerations). JSON.
*/}}
{{- define "fioprobe.listItems" -}}
{{- $out := list -}}
{{- range . -}}
{{- if kindIs "map" . }}{{ $out = append $out (include "fioprobe.compact" . | fromJson) }}{{ else }}{{ $out = append
  $out . }}{{ end -}}
{{- end -}}
{{- toJson $out -}}
{{- end }}

{{/* A ConfigMap of fioprobe configurations (components/probes.libsonnet configMap): (dict "root" $ "namespace" ns
  "name" n "component" c "data" {key: config}). */}}
{{- define "fioprobe.configMap" -}}
apiVersion: v1
kind: ConfigMap
{{ include "fioprobe.metadata" (dict "root" .root "component" .component "name" .name "namespace" .namespace) }}
data:
  {{- range $key := keys .data | sortAlpha }}
  {{ $key | toJson }}: |
    {{- include "fioprobe.manifestYaml" (dict "v" (index $.data $key) "in" "") | nindent 4 }}
  {{- end }}
{{- end }}
