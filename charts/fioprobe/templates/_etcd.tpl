{{/*
What the pods on the etcd nodes share (manifests/lib/etcd-nodes.libsonnet): the nodes they run on, the
members of the stagger, the step that creates their node directories, etcd's data directory.
*/}}

{{/* Whether the deployment creates the node directories (not on OpenShift: SELinux labels): "true" or "". */}}
{{- define "fioprobe.etcdPrepares" -}}
{{- if ne .Values.platform "openshift" }}true{{ end -}}
{{- end }}

{{/* A node directory of the etcd pods, as JSON: (dict "root" $ "name" n "path" p). */}}
{{- define "fioprobe.etcdHostPath" -}}
{{- toJson (dict "name" .name "hostPath" (dict "path" .path "type"
  (ternary "DirectoryOrCreate" "Directory" (eq (include "fioprobe.etcdPrepares" .root) "true")))) -}}
{{- end }}

{{/* The node affinity of the etcd pods, as JSON: the role labels (ORed terms) or the named nodes. */}}
{{- define "fioprobe.etcdAffinity" -}}
{{- $e := .Values.etcd -}}
{{- $terms := list -}}
{{- if $e.nodes -}}
{{- $terms = list (dict "matchFields" (list (dict "key" "metadata.name" "operator" "In" "values" $e.nodes))) -}}
{{- else -}}
{{- range $e.roleLabels }}{{ $terms = append $terms (dict "matchExpressions"
  (list (dict "key" . "operator" "Exists"))) }}{{ end -}}
{{- end -}}
{{- toJson (dict "nodeAffinity" (dict "requiredDuringSchedulingIgnoredDuringExecution"
  (dict "nodeSelectorTerms" $terms))) -}}
{{- end }}

{{/* The `fioprobe run --every` options naming the members, as a JSON list. */}}
{{- define "fioprobe.etcdMemberArgs" -}}
{{- $e := .Values.etcd -}}
{{- $args := list -}}
{{- if $e.nodes -}}
{{- range $e.nodes }}{{ $args = concat $args (list "--member" .) }}{{ end -}}
{{- else -}}
{{- range $e.roleLabels }}{{ $args = concat $args (list "--members-label" .) }}{{ end -}}
{{- end -}}
{{- toJson $args -}}
{{- end }}

{{/*
The init containers of an etcd pod, a YAML list, or nothing on OpenShift: the prepare step
(manifests/lib/etcd-nodes.libsonnet prepareContainer), uid 0 with CAP_CHOWN and CAP_FOWNER on exactly
the pod's DirectoryOrCreate volumes: (dict "root" $ "volumes" list).
*/}}
{{- define "fioprobe.etcdInitContainers" -}}
{{- $v := .root.Values -}}
{{- if include "fioprobe.etcdPrepares" .root -}}
- name: "prepare"
  image: {{ printf "%s:%s" $v.image.name $v.image.tag | toJson }}
  imagePullPolicy: {{ $v.image.pullPolicy | toJson }}
  command:
    - "fioprobe"
    - "prepare-dirs"
    - "--owner"
    - {{ printf "%d" (int $v.probeUser) | toJson }}
    {{- range .volumes }}
    - "--path"
    - {{ printf "/prepare/%s=%s" .name .hostPath.path | toJson }}
    {{- end }}
  resources:
    requests:
      cpu: "10m"
      memory: "32Mi"
    limits:
      cpu: "500m"
      memory: "96Mi"
  securityContext:
    allowPrivilegeEscalation: false
    readOnlyRootFilesystem: true
    runAsNonRoot: false
    runAsUser: 0
    runAsGroup: 0
    capabilities:
      drop: ["ALL"]
      add: ["CHOWN", "FOWNER"]
    seccompProfile:
      type: "RuntimeDefault"
  terminationMessagePolicy: "FallbackToLogsOnError"
  volumeMounts:
    {{- range .volumes }}
    - name: {{ .name | toJson }}
      mountPath: {{ printf "/prepare/%s" .name | toJson }}
    {{- end }}
{{- end -}}
{{- end }}

{{/*
A namespace the chart creates with its Pod Security labels (hostPath needs "privileged"; the
provisioning probe's test namespace enforces "restricted"), unless it exists already and is not
this release's: a namespace created by hand for an earlier version stays the user's (Helm could
not adopt it), and the notes say so. (dict "root" $ "name" ns "component" c "enforce" level).
*/}}
{{- define "fioprobe.ownNamespace" -}}
{{- $existing := lookup "v1" "Namespace" "" .name -}}
{{- $ours := eq (dig "metadata" "annotations" "meta.helm.sh/release-name" "" $existing) .root.Release.Name -}}
{{- if or (not $existing) $ours }}
apiVersion: v1
kind: Namespace
{{ include "fioprobe.metadata" (dict "root" .root "component" .component "name" .name "extra"
  (dict "pod-security.kubernetes.io/enforce" .enforce "pod-security.kubernetes.io/warn" "restricted"
  "pod-security.kubernetes.io/audit" "restricted")) }}
{{- end }}
{{- end }}
