{{/*
A probe CronJob (components/probes.libsonnet cronJob): (dict "root" $ "name" n "namespace" ns
"instance" i "schedule" s "profiles" list "configKey" k "probe" volume "hostPath" bool
"container" container-or-nil "extraVolumes" list "podExtra" map).
*/}}
{{- define "fioprobe.cronJob" -}}
{{- $v := .root.Values -}}
{{- $security := include "fioprobe.podSecurity" (dict "root" .root "user" $v.probeUser "hostPath"
  (hasKey .probe "hostPath")) | fromJson -}}
{{- $labels := include "fioprobe.podLabels" (dict "root" .root "component" "probe" "instance" .instance) -}}
{{- $container := .container | default (include "fioprobe.probeContainer" (dict "root" .root) | fromJson) -}}
{{- $volumes := concat (include "fioprobe.probeVolumes" (dict "root" .root "configKey" .configKey "probe" .probe) |
  fromJsonArray) (.extraVolumes | default list) -}}
apiVersion: batch/v1
kind: CronJob
{{ include "fioprobe.metadata" (dict "root" .root "component" "probe" "name" .name "namespace" .namespace "instance"
  .instance) }}
spec:
  schedule: {{ .schedule | toJson }}
  timeZone: "Etc/UTC"
  concurrencyPolicy: "Forbid"
  startingDeadlineSeconds: {{ int $v.startingDeadlineSeconds }}
  successfulJobsHistoryLimit: {{ int $v.successfulJobsHistoryLimit }}
  failedJobsHistoryLimit: {{ int $v.failedJobsHistoryLimit }}
  jobTemplate:
    metadata:
      labels:
        {{- $labels | nindent 8 }}
    spec:
      backoffLimit: 0
      activeDeadlineSeconds: {{ include "fioprobe.activeDeadline" (dict "root" .root "profiles" .profiles) }}
      template:
        metadata:
          labels:
            {{- $labels | nindent 12 }}
          {{- with $security.annotations }}
          annotations:
            {{- toYaml . | nindent 12 }}
          {{- end }}
        spec:
          restartPolicy: "Never"
          serviceAccountName: "fioprobe"
          automountServiceAccountToken: false
          enableServiceLinks: false
          terminationGracePeriodSeconds: 30
          securityContext:
            {{- toYaml $security.securityContext | nindent 12 }}
          containers:
            {{- toYaml (list $container) | nindent 12 }}
          volumes:
            {{- toYaml $volumes | nindent 12 }}
          {{- range $k, $x := .podExtra }}
          {{ $k }}:
            {{- toYaml $x | nindent 12 }}
          {{- end }}
{{- end }}
