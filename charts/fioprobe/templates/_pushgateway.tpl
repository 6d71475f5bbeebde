{{/*
The Pushgateway (components/pushgateway.libsonnet), in templates/pushgateway/: a Deployment
with its store on a PVC, or a StatefulSet of replicas when the expected groups need more than
one; Service, ServiceAccount, NetworkPolicy, ServiceMonitor. None with an existing Pushgateway
(pushgateway.url).
*/}}

{{/* Whether the chart runs a Pushgateway of its own: "true" or "". */}}
{{- define "fioprobe.pushgateway.own" -}}
{{- if not .Values.pushgateway.url }}true{{ end -}}
{{- end }}

{{/* Whether it is sharded, a StatefulSet of replicas: "true" or "". */}}
{{- define "fioprobe.pushgateway.sharded" -}}
{{- if gt (int (include "fioprobe.replicas" .)) 1 }}true{{ end -}}
{{- end }}

{{/* Its metadata: (dict "root" $ "extra" labels), extra optional. */}}
{{- define "fioprobe.pushgateway.metadata" -}}
{{- $pgw := .root.Values.pushgateway -}}
{{- include "fioprobe.metadata" (dict
  "root" .root "component" "pushgateway" "name" $pgw.name "namespace" .root.Release.Namespace
  "extra" .extra) }}
{{- end }}

{{/*
The container's resources. Computed at install: a sharded replica's CPU request follows the
sizing rule for its share of the groups (fioprobe.replicaCpuRequest).
*/}}
{{- define "fioprobe.pushgateway.resources" -}}
{{- $resources := deepCopy .Values.pushgateway.resources -}}
{{- if include "fioprobe.pushgateway.sharded" . -}}
{{- $requests := deepCopy ($resources.requests | default dict) -}}
{{- $_ := set $requests "cpu" (include "fioprobe.replicaCpuRequest" .) -}}
{{- $_ := set $resources "requests" $requests -}}
{{- end -}}
{{- toYaml $resources -}}
{{- end }}

{{/* The pod template of the Deployment or the StatefulSet. */}}
{{- define "fioprobe.pushgateway.podTemplate" -}}
{{- $pgw := .Values.pushgateway -}}
{{- $sharded := include "fioprobe.pushgateway.sharded" . -}}
{{- $secured := or $pgw.auth.enabled $pgw.tls.enabled -}}
{{- $scheme := ternary "HTTPS" "HTTP" $pgw.tls.enabled -}}
{{- $security := include "fioprobe.podSecurity" (dict "root" . "user" $pgw.user) | fromJson -}}
metadata:
  labels:
    {{- include "fioprobe.podLabels" (dict "root" . "component" "pushgateway") | nindent 4 }}
  {{- with $security.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  serviceAccountName: {{ $pgw.name | toJson }}
  automountServiceAccountToken: false
  enableServiceLinks: false
  securityContext:
    {{- toYaml $security.securityContext | nindent 4 }}
  containers:
    - name: "pushgateway"
      image: {{ $pgw.image | toJson }}
      args:
        - {{ printf "--web.listen-address=:%d" (int $pgw.port) | toJson }}
        - "--persistence.file=/data/pushgateway.db"
        - {{ printf "--persistence.interval=%s" $pgw.persistenceInterval | toJson }}
        {{- if $secured }}
        - "--web.config.file=/etc/pushgateway/web-config.yml"
        {{- end }}
      ports:
        - name: "web"
          containerPort: {{ int $pgw.port }}
          protocol: "TCP"
      {{- /* With basic auth, /-/ready and /-/healthy ask for it too: the kubelet checks the port. */}}
      readinessProbe:
        periodSeconds: 10
        {{- if $pgw.auth.enabled }}
        tcpSocket:
          port: "web"
        {{- else }}
        httpGet:
          path: "/-/ready"
          port: "web"
          scheme: {{ $scheme | toJson }}
        {{- end }}
      livenessProbe:
        periodSeconds: 30
        failureThreshold: 4
        {{- if $pgw.auth.enabled }}
        tcpSocket:
          port: "web"
        {{- else }}
        httpGet:
          path: "/-/healthy"
          port: "web"
          scheme: {{ $scheme | toJson }}
        {{- end }}
      resources:
        {{- include "fioprobe.pushgateway.resources" . | nindent 8 }}
      securityContext:
        {{- include "fioprobe.containerSecurityContext" . | nindent 8 }}
      volumeMounts:
        - name: "data"
          mountPath: "/data"
        {{- if $secured }}
        - name: "web-config"
          mountPath: "/etc/pushgateway"
          readOnly: true
        {{- end }}
  volumes: {{- if not (or (not $sharded) $secured) }} []{{ end }}
    {{- if not $sharded }}
    - name: "data"
      persistentVolumeClaim:
        claimName: {{ $pgw.name | toJson }}
    {{- end }}
    {{- if $secured }}
    - name: "web-config"
      secret:
        secretName: {{ $pgw.webConfigSecretName | toJson }}
    {{- end }}
  {{- if $sharded }}
  topologySpreadConstraints:
    - maxSkew: 1
      topologyKey: "kubernetes.io/hostname"
      whenUnsatisfiable: "ScheduleAnyway"
      labelSelector:
        matchLabels:
          {{- include "fioprobe.selectorLabels" (dict "component" "pushgateway") | nindent 10 }}
  {{- end }}
{{- end }}
