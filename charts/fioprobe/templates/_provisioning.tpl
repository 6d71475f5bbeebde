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
{{- add (mul (include "fioprobe.provisioning.rounds" . | int) (add $perClass $push)) 60 -}}
{{- end }}

{{/*
How many runs, one after the other, one Job makes at most: each class's run alone, a class
given provisioning.nodes in rounds of maxParallel (the command's --max-parallel).
*/}}
{{- define "fioprobe.provisioning.rounds" -}}
{{- $p := .Values.provisioning -}}
{{- $rounds := 0 -}}
{{- range include "fioprobe.provisioning.classes" . | fromJsonArray -}}
{{- $nodes := get $p.nodes . | default list -}}
{{- $rounds = add $rounds (max 1 (div (add (len $nodes) (sub $p.maxParallel 1)) $p.maxParallel)) -}}
{{- end -}}
{{- $rounds -}}
{{- end }}

{{/*
The groups the probe pushes, as a JSON list of label sets: a class's, or one per node of a
class given provisioning.nodes. Fails on a class that is no StorageClass name (as
`fioprobe provision` checks it: the schema checks provisioning.storageClasses, not the
storageClasses entries) and on a provisioning.nodes key that is no class provisioned.
*/}}
{{- define "fioprobe.provisioning.groups" -}}
{{- $p := .Values.provisioning -}}
{{- $classes := include "fioprobe.provisioning.classes" . | fromJsonArray -}}
{{- if $classes -}}
{{- $name := "^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$" -}}
{{- range $classes -}}
{{- if or (gt (len .) 253) (not (regexMatch $name .)) -}}
{{- fail (printf "provisioning: %s is not a StorageClass name (lower-case letters, digits, - and .), %s" .
  "which every run would refuse; set provision: false on its storageClasses entry") -}}
{{- end -}}
{{- end -}}
{{- $unknown := list -}}
{{- range keys $p.nodes | sortAlpha }}{{ if not (has . $classes) }}{{ $unknown = append $unknown . }}{{ end }}{{ end -}}
{{- if $unknown -}}
{{- fail (printf "provisioning.nodes names %s, not a class the probe provisions (%s)" (join ", " $unknown)
  (join ", " $classes)) -}}
{{- end -}}
{{- end -}}
{{- $groups := list -}}
{{- range $class := $classes -}}
{{- $nodes := get $p.nodes $class | default list -}}
{{- if $nodes -}}
{{- range $nodes }}{{ $groups = append $groups (dict "storageclass" $class "node" .) }}{{ end -}}
{{- else -}}
{{- $groups = append $groups (dict "storageclass" $class) -}}
{{- end -}}
{{- end -}}
{{- toJson $groups -}}
{{- end }}
