{{/*
The continuous stream (components/continuous.libsonnet), in templates/continuous/: a DaemonSet
on the etcd nodes (hostPath) and a one-replica StatefulSet with a small PVC per StorageClass,
scraped through a PodMonitor.
*/}}

{{/* Whether the etcd nodes have a stream: "true" or "". */}}
{{- define "fioprobe.continuous.etcd" -}}
{{- $s := .Values.continuous -}}
{{- if and $s.enabled $s.etcd .Values.etcd.enabled }}true{{ end -}}
{{- end }}

{{/* The StorageClasses with a stream, as a JSON list (those probed: fioprobe.storageClasses). */}}
{{- define "fioprobe.continuous.storageClasses" -}}
{{- $s := .Values.continuous -}}
{{- if and $s.enabled $s.storageClasses }}{{ include "fioprobe.storageClasses" . }}{{ else }}[]{{ end -}}
{{- end }}

{{/* The namespaces of the stream pods, sorted, as a JSON list: the etcd one, the release's. */}}
{{- define "fioprobe.continuous.namespaces" -}}
{{- $namespaces := list -}}
{{- if include "fioprobe.continuous.etcd" . }}{{ $namespaces = append $namespaces .Values.etcd.namespace }}{{ end -}}
{{- if include "fioprobe.continuous.storageClasses" . | fromJsonArray -}}
{{- $namespaces = append $namespaces .Release.Namespace -}}
{{- end -}}
{{- $namespaces | uniq | sortAlpha | toJson -}}
{{- end }}

{{/* The stream's Pushgateway (it pushes its run's outcome): one URL or the shards. */}}
{{- define "fioprobe.continuous.pushgateway" -}}
{{- $urls := include "fioprobe.pushgatewayUrls" . | fromJsonArray -}}
{{- toJson (ternary (dict "url" (first $urls)) (dict "shards" $urls) (eq (len $urls) 1)) -}}
{{- end }}

{{/* A stream pod's spec: (dict "root" $ "configKey" k "etcd" bool), etcd for the etcd nodes'. */}}
{{- define "fioprobe.continuous.podSpec" -}}
{{- $v := .root.Values -}}
{{- $s := $v.continuous -}}
{{- $security := include "fioprobe.podSecurity" (dict "root" .root "user" $v.probeUser "hostPath" .etcd) | fromJson -}}
serviceAccountName: "fioprobe-continuous"
automountServiceAccountToken: false
enableServiceLinks: false
terminationGracePeriodSeconds: 10
securityContext:
  {{- toYaml $security.securityContext | nindent 2 }}
{{- if .etcd }}
{{- $probe := include "fioprobe.etcdHostPath" (dict "root" .root "name" "probe" "path" $v.etcd.hostPath) | fromJson }}
{{- with include "fioprobe.etcdInitContainers" (dict "root" .root "volumes" (list $probe)) }}
initContainers:
  {{- . | nindent 2 }}
{{- end }}
affinity:
  {{- include "fioprobe.etcdAffinity" .root | fromJson | toYaml | nindent 2 }}
tolerations: {{ include "fioprobe.listItems" $v.etcd.tolerations }}
{{- end }}
containers:
  - name: "continuous"
    image: {{ printf "%s:%s" $v.image.name $v.image.tag | toJson }}
    imagePullPolicy: {{ $v.image.pullPolicy | toJson }}
    command:
      - "fioprobe"
      - "continuous"
      - "--config"
      - {{ printf "%s/config.yaml" $v.configMountPath | toJson }}
      - "--listen"
      - {{ printf ":%d" (int $s.port) | toJson }}
      - "--interval"
      - {{ printf "%.10g" (float64 $s.intervalSeconds) | toJson }}
      - "--write-size"
      - {{ printf "%d" (int $s.writeSize) | toJson }}
      - "--file-size"
      - {{ $s.fileSize | toJson }}
      - "--stall-threshold"
      - {{ printf "%.10g" (float64 $s.stallThresholdSeconds) | toJson }}
    env:
      - name: "NODE_NAME"
        valueFrom:
          fieldRef:
            fieldPath: "spec.nodeName"
    ports:
      - name: "metrics"
        containerPort: {{ int $s.port }}
        protocol: "TCP"
    readinessProbe:
      httpGet:
        path: "/metrics"
        port: "metrics"
      timeoutSeconds: 5
      periodSeconds: 10
    livenessProbe:
      httpGet:
        path: "/metrics"
        port: "metrics"
      timeoutSeconds: 5
      periodSeconds: 30
      failureThreshold: 6
    resources:
      {{- toYaml $s.resources | nindent 6 }}
    securityContext:
      {{- include "fioprobe.containerSecurityContext" . | nindent 6 }}
    volumeMounts:
      - name: "config"
        mountPath: {{ $v.configMountPath | toJson }}
        readOnly: true
      - name: "probe"
        mountPath: {{ $v.probeMountPath | toJson }}
      - name: "tmp"
        mountPath: "/tmp"
      {{- if .etcd }}
      - name: "etcd-data"
        mountPath: "/etcd-data"
        readOnly: true
      {{- end }}
volumes:
  - name: "config"
    configMap:
      name: "fioprobe-continuous"
      items:
        - key: {{ .configKey | toJson }}
          path: "config.yaml"
  - name: "tmp"
    emptyDir:
      sizeLimit: "16Mi"
  {{- if .etcd }}
  - {{ include "fioprobe.etcdHostPath" (dict "root" .root "name" "probe" "path" $v.etcd.hostPath) }}
  - name: "etcd-data"
    hostPath:
      path: {{ $v.etcd.dataDir | toJson }}
      type: "Directory"
  {{- end }}
{{- end }}
