{{/*
What the pods on the etcd nodes share (lib/etcd-nodes.libsonnet): the nodes they run on, the
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

{{/* The init containers of an etcd pod, as a JSON list: the prepare step, or none. (dict "root" $ "volumes"
  list). */}}
{{- define "fioprobe.etcdInitContainers" -}}
{{- if include "fioprobe.etcdPrepares" .root -}}
{{- toJson (list (include "fioprobe.prepareContainer" . | fromJson)) -}}
{{- else -}}
[]
{{- end -}}
{{- end }}

{{/* Found by role when etcd.nodes is empty: "true" or "". */}}
{{- define "fioprobe.etcdByRole" -}}
{{- if not .Values.etcd.nodes }}true{{ end -}}
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

{{/* The API token, in the probe's container alone (lib/etcd-nodes.libsonnet apiTokenVolume), as JSON. */}}
{{- define "fioprobe.apiTokenVolume" -}}
{{- toJson (dict "name" "kube-api-access" "projected" (dict "sources"
  (list (dict "serviceAccountToken" (dict "path" "token" "expirationSeconds" 3607))
  (dict "configMap" (dict "name" "kube-root-ca.crt" "items" (list (dict "key" "ca.crt" "path" "ca.crt"))))
  (dict "downwardAPI" (dict "items" (list (dict "path" "namespace" "fieldRef"
  (dict "fieldPath" "metadata.namespace")))))))) -}}
{{- end }}

{{/* etcd's data directory, read-only: its volume and its mount, as JSON. */}}
{{- define "fioprobe.etcdDataDirVolume" -}}
{{- toJson (dict "name" "etcd-data" "hostPath" (dict "path" .Values.etcd.dataDir "type" "Directory")) -}}
{{- end }}
{{- define "fioprobe.etcdDataDirMount" -}}
{{- toJson (dict "name" "etcd-data" "mountPath" "/etcd-data" "readOnly" true) -}}
{{- end }}

{{/*
The prepare step (lib/etcd-nodes.libsonnet prepareContainer): uid 0 with CAP_CHOWN and
CAP_FOWNER on exactly the pod's DirectoryOrCreate volumes: (dict "root" $ "volumes" list).
*/}}
{{- define "fioprobe.prepareContainer" -}}
{{- $v := .root.Values -}}
{{- $command := list "fioprobe" "prepare-dirs" "--owner" (printf "%d" (int $v.probeUser)) -}}
{{- $mounts := list -}}
{{- range .volumes -}}
{{- $command = concat $command (list "--path" (printf "/prepare/%s=%s" .name .hostPath.path)) -}}
{{- $mounts = append $mounts (dict "name" .name "mountPath" (printf "/prepare/%s" .name)) -}}
{{- end -}}
{{- $security := include "fioprobe.containerSecurityContext" . | fromYaml -}}
{{- $_ := set $security "runAsUser" 0 -}}
{{- $_ := set $security "runAsGroup" 0 -}}
{{- $_ := set $security "runAsNonRoot" false -}}
{{- $_ := set $security "capabilities" (dict "drop" (list "ALL") "add" (list "CHOWN" "FOWNER")) -}}
{{- toJson (dict
  "name" "prepare"
  "image" (printf "%s:%s" $v.image.name $v.image.tag)
  "imagePullPolicy" $v.image.pullPolicy
  "command" $command
  "resources" (dict "requests" (dict "cpu" "10m" "memory" "32Mi") "limits" (dict "cpu" "500m" "memory" "96Mi"))
  "securityContext" $security
  "terminationMessagePolicy" "FallbackToLogsOnError"
  "volumeMounts" $mounts) -}}
{{- end }}

{{/*
A namespace the chart creates with its Pod Security labels (hostPath needs "privileged"), unless
it exists already and is not this release's: a namespace created by hand for an earlier version
stays the user's (Helm could not adopt it), and the notes say so. (dict "root" $ "name" ns).
*/}}
{{- define "fioprobe.privilegedNamespace" -}}
{{- $existing := lookup "v1" "Namespace" "" .name -}}
{{- $ours := eq (dig "metadata" "annotations" "meta.helm.sh/release-name" "" $existing) .root.Release.Name -}}
{{- if or (not $existing) $ours }}
apiVersion: v1
kind: Namespace
{{ include "fioprobe.metadata" (dict "root" .root "component" "probe" "name" .name "extra"
  (dict "pod-security.kubernetes.io/enforce" "privileged" "pod-security.kubernetes.io/warn" "restricted"
  "pod-security.kubernetes.io/audit" "restricted")) }}
{{- end }}
{{- end }}
