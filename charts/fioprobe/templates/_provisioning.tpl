{{/*
The provisioning probe (components/provisioning.libsonnet), in templates/provisioning/: a
CronJob in the release's namespace that provisions a claim and a pod of each class in
provisioning.namespace, with exactly the RBAC a run needs. The comments there say why.
*/}}

{{/*
The StorageClasses provisioned, as a JSON list of names, each once: the storageClasses entries
with `provision` on (the class of their PVC), then provisioning.storageClasses; [] when the
probe is off.
*/}}
{{- define "fioprobe.provisioning.classes" -}}
{{- $v := .Values -}}
{{- $names := list -}}
{{- if $v.provisioning.enabled -}}
{{- range include "fioprobe.storageClasses" . | fromJsonArray -}}
{{- if dig "provision" true . -}}
{{- $names = append $names (.storageClassName | default .name) -}}
{{- end -}}
{{- end -}}
{{- $names = concat $names $v.provisioning.storageClasses -}}
{{- end -}}
{{- toJson (uniq $names) -}}
{{- end }}

{{/*
The longest one Job may take: each class's steps to their deadlines (the command's defaults,
exporter/fioprobe/provision/runner.py, over provisioning.deadlines) and the four Pushgateway
calls of a push from a new state, plus a minute.
*/}}
{{- define "fioprobe.provisioning.activeDeadline" -}}
{{- $v := .Values -}}
{{- $steps := merge (deepCopy $v.provisioning.deadlines) (dict "created" 30 "scheduled" 120 "bound" 300
  "attached" 300 "running" 300 "written" 120 "pod_deleted" 120 "detached" 420 "volume_deleted" 300) -}}
{{- $perClass := 0 -}}
{{- range $steps }}{{ $perClass = add $perClass (int .) }}{{ end -}}
{{- $push := mul 4 (int $v.pushgateway.timeoutSeconds) (int $v.pushgateway.attempts) -}}
{{- add (mul (len (include "fioprobe.provisioning.classes" . | fromJsonArray)) (add $perClass $push)) 60 -}}
{{- end }}
