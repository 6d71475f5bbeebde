{{/*
The probes (components/probes.libsonnet, components/pernode.libsonnet), in templates/probes/:
a CronJob and its PVC per StorageClass in the release's namespace, a DaemonSet on the etcd
nodes (etcd.namespace), a DaemonSet of per-node probes (perNode.namespace). Each namespace has
the probes' ServiceAccount, NetworkPolicy and ConfigMap of configuration files.
*/}}

{{/* The namespaces with probes, as a JSON list of (namespace, ServiceAccount, configuration) rows. */}}
{{- define "fioprobe.probe.namespaces" -}}
{{- $v := .Values -}}
{{- $rows := list -}}
{{- if include "fioprobe.storageClasses" . | fromJsonArray -}}
{{- $rows = append $rows (dict "namespace" .Release.Namespace "account" "fioprobe" "kind" "storageClasses") -}}
{{- end -}}
{{- if $v.etcd.enabled -}}
{{- $rows = append $rows (dict "namespace" $v.etcd.namespace "account" "fioprobe-etcd" "kind" "etcd") -}}
{{- end -}}
{{- if $v.perNode.enabled -}}
{{- $rows = append $rows (dict "namespace" $v.perNode.namespace "account" "fioprobe" "kind" "perNode") -}}
{{- end -}}
{{- toJson $rows -}}
{{- end }}

{{/*
The probe container: (dict "root" $ "every" bool "members" args "noProbeMount" bool
"resources" map "extraMounts" list). `every`: a DaemonSet's `fioprobe run --every` (the
etcd members' options after it); a CronJob's runs once.
*/}}
{{- define "fioprobe.probe.container" -}}
{{- $v := .root.Values -}}
{{- $pgw := $v.pushgateway -}}
name: "fioprobe"
image: {{ printf "%s:%s" $v.image.name $v.image.tag | toJson }}
imagePullPolicy: {{ $v.image.pullPolicy | toJson }}
command:
  - "fioprobe"
  - "run"
  - "--config"
  - {{ printf "%s/config.yaml" $v.configMountPath | toJson }}
  {{- if .every }}
  - "--every"
  - {{ printf "%d" (mul (int $v.everyMinutes) 60) | toJson }}
  {{- end }}
  {{- range .members }}
  - {{ . | toJson }}
  {{- end }}
env:
  - name: "NODE_NAME"
    valueFrom:
      fieldRef:
        fieldPath: "spec.nodeName"
resources:
  {{- toYaml (.resources | default $v.probeResources) | nindent 2 }}
securityContext:
  {{- include "fioprobe.containerSecurityContext" . | nindent 2 }}
volumeMounts:
  - name: "config"
    mountPath: {{ $v.configMountPath | toJson }}
    readOnly: true
  {{- if not .noProbeMount }}
  - name: "probe"
    mountPath: {{ $v.probeMountPath | toJson }}
  {{- end }}
  - name: "tmp"
    mountPath: "/tmp"
  {{- if $pgw.auth.enabled }}
  - name: "pushgateway-auth"
    mountPath: "/var/run/secrets/fioprobe/pushgateway-auth"
    readOnly: true
  {{- end }}
  {{- if $pgw.tls.enabled }}
  - name: "pushgateway-ca"
    mountPath: "/var/run/secrets/fioprobe/pushgateway-ca"
    readOnly: true
  {{- end }}
  {{- with .extraMounts }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}

{{/*
The probe pods' volumes, a YAML list: (dict "root" $ "configKey" k "probe" volume-or-nil), the
probed directory's volume without its name.
*/}}
{{- define "fioprobe.probe.volumes" -}}
{{- $pgw := .root.Values.pushgateway -}}
- name: "config"
  configMap:
    name: "fioprobe-config"
    items:
      - key: {{ .configKey | toJson }}
        path: "config.yaml"
{{- with .probe }}
- {{ merge (dict "name" "probe") . | toJson }}
{{- end }}
- name: "tmp"
  emptyDir:
    sizeLimit: "16Mi"
{{- if $pgw.auth.enabled }}
- name: "pushgateway-auth"
  secret:
    secretName: {{ $pgw.auth.secretName | toJson }}
    items:
      - key: "username"
        path: "username"
      - key: "password"
        path: "password"
{{- end }}
{{- if $pgw.tls.enabled }}
- name: "pushgateway-ca"
  secret:
    secretName: {{ $pgw.tls.caSecretName | toJson }}
    items:
      - key: "ca.crt"
        path: "ca.crt"
{{- end }}
{{- end }}

{{/* The name of a StorageClass probe's CronJob and PVC: fioprobe-<name> as a DNS name. */}}
{{- define "fioprobe.probe.name" -}}
{{- include "fioprobe.dnsName" (dict "text" (printf "fioprobe-%s" .name)) -}}
{{- end }}

{{/* The volume of a per-node StorageClass entry in the DaemonSet's pods: sc-<name>. */}}
{{- define "fioprobe.perNode.volumeName" -}}
{{- include "fioprobe.dnsName" (dict "text" (printf "sc-%s" .name) "max" 63) -}}
{{- end }}
