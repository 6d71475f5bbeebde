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
