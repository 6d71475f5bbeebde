{{/*
Helpers of the fioprobe chart. Every template renders the objects that manifests/components/
renders for the same configuration (tests/deploy/test_chart_parity.py compares them); the comments
there say why each field is what it is. Names are the manifests' fixed names (one release per
namespace); `app.kubernetes.io/instance` is the probe target, as in the manifests, so Helm's
own labels are only helm.sh/chart and app.kubernetes.io/managed-by.
*/}}

{{/* Labels that select pods: (dict "component" c "instance" i), instance optional. */}}
{{- define "fioprobe.selectorLabels" -}}
app.kubernetes.io/component: {{ .component | toJson }}
{{- with .instance }}
app.kubernetes.io/instance: {{ . | toJson }}
{{- end }}
app.kubernetes.io/name: "fioprobe"
{{- end }}

{{/* Labels of objects and pod templates, without Helm's: (dict "root" $ "component" c "instance" i). */}}
{{- define "fioprobe.podLabels" -}}
{{ include "fioprobe.selectorLabels" . }}
app.kubernetes.io/part-of: "fioprobe"
app.kubernetes.io/version: {{ .root.Values.version | toJson }}
{{- end }}

{{/* Labels of every object: the pods' and Helm's own. */}}
{{- define "fioprobe.labels" -}}
{{ include "fioprobe.podLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | toJson }}
app.kubernetes.io/managed-by: {{ .root.Release.Service | toJson }}
{{- end }}

{{/* metadata of an object: (dict "root" $ "component" c "name" n "namespace" ns "instance" i "extra" labels). */}}
{{- define "fioprobe.metadata" -}}
metadata:
  name: {{ .name | toJson }}
  {{- with .namespace }}
  namespace: {{ . | toJson }}
  {{- end }}
  labels:
    {{- include "fioprobe.labels" . | nindent 4 }}
    {{- range $k, $v := .extra }}
    {{- if not (has $k (list "app.kubernetes.io/component" "app.kubernetes.io/instance" "app.kubernetes.io/name"
      "app.kubernetes.io/part-of" "app.kubernetes.io/version")) }}
    {{ $k | toJson }}: {{ $v | toJson }}
    {{- end }}
    {{- end }}
{{- end }}

{{/*
The labels a monitor or rule carries for its Prometheus: its own from values, and
release=<releaseLabel> for kube-prometheus-stack's selectors (true: this release's name).
*/}}
{{- define "fioprobe.monitorLabels" -}}
{{- $labels := deepCopy (.labels | default dict) -}}
{{- $release := .root.Values.releaseLabel -}}
{{- if kindIs "string" $release }}{{ $_ := set $labels "release" $release }}
{{- else if $release }}{{ $_ := set $labels "release" .root.Release.Name }}{{ end -}}
{{- toJson $labels -}}
{{- end }}

{{/* A DNS-1123 name from free text, at most `max` characters (manifests/lib/common.libsonnet dnsName). */}}
{{- define "fioprobe.dnsName" -}}
{{- $name := regexReplaceAll "[^a-z0-9-]" (lower .text) "-" -}}
{{- if gt (len $name) (int (.max | default 52)) -}}
{{- fail (printf "name %s is longer than %d characters" $name (int (.max | default 52))) -}}
{{- end -}}
{{- $name -}}
{{- end }}

{{/* Cron schedule of the probe at `index` of its kind (manifests/lib/common.libsonnet schedule). */}}
{{- define "fioprobe.schedule" -}}
{{- $every := int .root.Values.everyMinutes -}}
{{- if .explicit }}{{ .explicit }}
{{- else if eq $every 60 }}{{ printf "%d * * * *" (mod (int .index) $every) }}
{{- else if eq $every 1 }}* * * * *
{{- else }}{{ printf "%d-59/%d * * * *" (mod (int .index) $every) $every }}{{ end -}}
{{- end }}

{{/*
Pod securityContext and template annotations on the platform (manifests/lib/common.libsonnet
podSecurity): (dict "root" $ "user" uid "hostPath" bool). Renders {"securityContext": ...,
"annotations": ...} as JSON for fromJson.
*/}}
{{- define "fioprobe.podSecurity" -}}
{{- $openshift := eq .root.Values.platform "openshift" -}}
{{- $ctx := dict "runAsNonRoot" true "seccompProfile" (dict "type" "RuntimeDefault") "fsGroupChangePolicy"
  "OnRootMismatch" -}}
{{- if or .hostPath (not $openshift) -}}
{{- $_ := set $ctx "runAsUser" (int64 .user) -}}
{{- $_ := set $ctx "runAsGroup" (int64 .user) -}}
{{- $_ := set $ctx "fsGroup" (int64 .user) -}}
{{- end -}}
{{- $annotations := dict -}}
{{- if $openshift -}}
{{- $_ := set $annotations "openshift.io/required-scc" (ternary (include "fioprobe.hostPathScc" .) "restricted-v2"
  (not (not .hostPath))) -}}
{{- end -}}
{{- toJson (dict "securityContext" $ctx "annotations" $annotations) -}}
{{- end }}

{{/* The hostPath pods' SCC on OpenShift (manifests/lib/common.libsonnet hostPathScc): (dict "root" $). */}}
{{- define "fioprobe.hostPathScc" -}}
{{- (.root.Files.Get "files/derived.json" | fromJson).hostPathScc -}}
{{- end }}

{{/* The restricted container securityContext (manifests/lib/common.libsonnet). */}}
{{- define "fioprobe.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: "RuntimeDefault"
{{- end }}

{{/* The probes' Pushgateway URLs (manifests/lib/sizing.libsonnet urls), as a JSON list. */}}
{{- define "fioprobe.pushgatewayUrls" -}}
{{- $pgw := .Values.pushgateway -}}
{{- $scheme := ternary "https" "http" $pgw.tls.enabled -}}
{{- $urls := list -}}
{{- $replicas := int (include "fioprobe.replicas" .) -}}
{{- if $pgw.url -}}
{{- $urls = list $pgw.url -}}
{{- else if eq $replicas 1 -}}
{{- $urls = list (printf "%s://%s.%s.svc:%d" $scheme $pgw.name .Release.Namespace (int $pgw.port)) -}}
{{- else -}}
{{- range $i := until $replicas -}}
{{- $urls = append $urls (printf "%s://%s-%d.%s.%s.svc:%d" $scheme $pgw.name $i $pgw.name $.Release.Namespace
  (int $pgw.port)) -}}
{{- end -}}
{{- end -}}
{{- toJson $urls -}}
{{- end }}

{{/* Every Pushgateway group the configuration pushes (manifests/lib/sizing.libsonnet expectedGroups). */}}
{{- define "fioprobe.expectedGroups" -}}
{{- $n := 0 -}}
{{- range include "fioprobe.storageClasses" . | fromJsonArray }}{{ $n = add $n (len .profiles) }}{{ end -}}
{{- $etcdNodes := ternary (ternary (len .Values.etcd.nodes) 3 (gt (len .Values.etcd.nodes) 0)) 0
  .Values.etcd.enabled -}}
{{- $n = add $n (mul $etcdNodes (len .Values.etcd.profiles)) -}}
{{- if .Values.perNode.enabled -}}
{{- $per := 0 -}}
{{- range concat .Values.perNode.localDisks .Values.perNode.storageClasses }}{{ $per = add $per
  (len .profiles) }}{{ end -}}
{{- $n = add $n (mul (int .Values.perNode.expectedNodes) $per) -}}
{{- end -}}
{{- $n -}}
{{- end }}

{{/* Pushgateway replicas (manifests/lib/sizing.libsonnet replicas). */}}
{{- define "fioprobe.replicas" -}}
{{- $pgw := .Values.pushgateway -}}
{{- if eq (toString $pgw.replicas) "auto" -}}
{{- $per := $pgw.groupsPerReplica | default (index (.Files.Get "files/derived.json" | fromJson).groupsPerReplica
  (toString (int .Values.everyMinutes))) -}}
{{- max 1 (ceil (divf (int (include "fioprobe.expectedGroups" .)) $per)) | int -}}
{{- else -}}
{{- int $pgw.replicas -}}
{{- end -}}
{{- end }}

{{/* A CPU quantity in millicores (manifests/lib/sizing.libsonnet cpuMillis). */}}
{{- define "fioprobe.cpuMillis" -}}
{{- $q := toString . -}}
{{- if hasSuffix "m" $q }}{{ trimSuffix "m" $q | float64 }}{{ else }}{{ mulf (float64 $q) 1000 }}{{ end -}}
{{- end }}

{{/* The CPU request of a sharded Pushgateway's replica (manifests/lib/sizing.libsonnet replicaCpuRequest). */}}
{{- define "fioprobe.replicaCpuRequest" -}}
{{- $groups := int (include "fioprobe.expectedGroups" .) -}}
{{- $share := ceil (divf $groups (int (include "fioprobe.replicas" .))) -}}
{{- $rule := mulf 10 (ceil (mulf (divf (mulf 0.000081 $share $share) (mul (int .Values.everyMinutes) 60)) 100)) -}}
{{- $resources := .Values.pushgateway.resources -}}
{{- $wanted := maxf $rule (float64 (include "fioprobe.cpuMillis" (get $resources.requests "cpu" | default "0"))) -}}
{{- if hasKey $resources.limits "cpu" -}}
{{- $wanted = minf $wanted (float64 (include "fioprobe.cpuMillis" (get $resources.limits "cpu"))) -}}
{{- end -}}
{{- printf "%dm" (int64 $wanted) -}}
{{- end }}

{{/*
Worst case of one probe run in seconds, per profile, plus a minute for the pod
(components/probes.libsonnet activeDeadline): (dict "root" $ "profiles" list).
*/}}
{{- define "fioprobe.activeDeadline" -}}
{{- $v := .root.Values -}}
{{- $perProfile := add (int $v.profileTimeoutSeconds) 25 60 (mul 2 (int $v.pushgateway.timeoutSeconds)
  (int $v.pushgateway.attempts)) -}}
{{- add (mul (len .profiles) $perProfile) 60 -}}
{{- end }}

{{/*
What JSON Schema cannot check, and the manifests refuse (manifests/lib/defaults.libsonnet, the
components' asserts): unique names, sizes within bounds, directories that do not overlap.
*/}}
{{- define "fioprobe.validate" -}}
{{- $v := .Values -}}
{{- range $list := list (list "storageClasses" $v.storageClasses) (list "perNode.localDisks" $v.perNode.localDisks)
  (list "perNode.storageClasses" $v.perNode.storageClasses) -}}
{{- $names := list -}}
{{- range index $list 1 }}{{ $names = append $names .name }}{{ end -}}
{{- if ne (len $names) (len (uniq $names)) -}}
{{- fail (printf "%s: a name appears more than once: %s" (index $list 0) (join ", " $names)) -}}
{{- end -}}
{{- end -}}
{{- if $v.continuous.enabled -}}
{{- $bytes := include "fioprobe.quantityBytes" $v.continuous.fileSize | float64 -}}
{{- if or (lt $bytes 65536.0) (gt $bytes 1073741824.0) (ne $bytes (floor $bytes)) -}}
{{- fail (print "continuous.fileSize: must be a whole number of bytes from 64Ki to 1Gi, "
  (printf "a quantity like 4Mi or 65536, got %s" $v.continuous.fileSize)) -}}
{{- end -}}
{{- if lt $bytes (float64 $v.continuous.writeSize) -}}
{{- fail (printf "continuous.fileSize (%s) must hold at least one write of continuous.writeSize (%d bytes)"
  $v.continuous.fileSize (int $v.continuous.writeSize)) -}}
{{- end -}}
{{- end -}}
{{- $state := printf "%s/" $v.stateHostPath -}}
{{- $etcdDir := printf "%s/" $v.etcd.hostPath -}}
{{- $dataDir := printf "%s/" $v.etcd.dataDir -}}
{{- if and $v.etcd.enabled (or (hasPrefix $etcdDir $state) (hasPrefix $state $etcdDir)) -}}
{{- fail (printf "stateHostPath %s overlaps etcd.hostPath %s, the probed directory; give it a directory of its own"
  $v.stateHostPath $v.etcd.hostPath) -}}
{{- end -}}
{{- if and $v.etcd.enabled (or (hasPrefix $etcdDir $dataDir) (hasPrefix $dataDir $etcdDir)) -}}
{{- fail (printf "etcd.hostPath %s overlaps etcd.dataDir %s; give the probe a directory of its own beside etcd's data"
  $v.etcd.hostPath $v.etcd.dataDir) -}}
{{- end -}}
{{- if and $v.etcd.enabled (or (hasPrefix $state $dataDir) (hasPrefix $dataDir $state)) -}}
{{- fail (printf "stateHostPath %s overlaps etcd.dataDir %s; the probe's state must not be among etcd's files"
  $v.stateHostPath $v.etcd.dataDir) -}}
{{- end -}}
{{- if $v.perNode.enabled -}}
{{- if not (or $v.perNode.localDisks $v.perNode.storageClasses) -}}
{{- fail "perNode.enabled needs perNode.localDisks or perNode.storageClasses" -}}
{{- end -}}
{{- $names := list -}}
{{- range concat $v.perNode.localDisks $v.perNode.storageClasses }}{{ $names = append $names .name }}{{ end -}}
{{- if or (ne (len $names) (len (uniq $names))) (and $v.etcd.enabled (has $v.etcd.name $names)) -}}
{{- fail (print "perNode.localDisks and perNode.storageClasses need names of their own, "
  (printf "different from each other and from etcd.name, got %s" (join ", " $names))) -}}
{{- end -}}
{{- range $v.perNode.localDisks -}}
{{- $dir := printf "%s/%s" $v.perNode.hostPath .name -}}
{{- if or (eq $v.stateHostPath $dir) (hasPrefix (printf "%s/" $dir) $v.stateHostPath) (hasPrefix $state $dir) -}}
{{- fail (printf "stateHostPath %s overlaps the directories of perNode.localDisks %s; give it a directory of its own"
  $v.stateHostPath .name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/* Bytes of a size as fioprobe reads one (manifests/lib/common.libsonnet quantityBytes). */}}
{{- define "fioprobe.quantityBytes" -}}
{{- $scales := dict "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "K" 1e3 "M" 1e6 "G" 1e9 "T"
  1e12 -}}
{{- $suffix := regexFind "(Ki|Mi|Gi|Ti|K|M|G|T)$" . -}}
{{- $number := trimSuffix $suffix . -}}
{{- mulf (float64 $number) (get $scales $suffix | default 1.0) -}}
{{- end }}

{{/* The NetworkPolicy peer of the Prometheus that scrapes (manifests/lib/common.libsonnet
     prometheusPeer), as JSON. */}}
{{- define "fioprobe.prometheusPeer" -}}
{{- $m := .Values.monitoring -}}
{{- $peer := dict "namespaceSelector" dict -}}
{{- with $m.prometheusNamespace }}{{ $_ := set $peer "namespaceSelector"
  (dict "matchLabels" (dict "kubernetes.io/metadata.name" .)) }}{{ end -}}
{{- with $m.prometheusPodSelector }}{{ $_ := set $peer "podSelector" (dict "matchLabels" .) }}{{ end -}}
{{- toJson $peer -}}
{{- end }}

{{/*
"true" when the prometheus-operator objects are rendered: monitoring.operator, and the cluster
serves monitoring.coreos.com/v1 (`helm template` without a cluster: --api-versions names it).
Without the API, applying them would fail on "no matches for kind": the notes say what to do.
*/}}
{{- define "fioprobe.operator" -}}
{{- if and .Values.monitoring.operator (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1") }}true{{ end -}}
{{- end }}

{{/*
The StorageClasses probed, as a JSON list of storageClasses entries: the configured ones, or,
with none and defaultStorageClass.enabled, the cluster's default StorageClass as Helm's lookup
finds it at install (the newest of several defaults, as Kubernetes picks it; none under `helm
template`), named as it is, with the volume type its provisioner and parameters say.
*/}}
{{- define "fioprobe.storageClasses" -}}
{{- $v := .Values -}}
{{- $d := $v.defaultStorageClass -}}
{{- if or $v.storageClasses (not $d.enabled) -}}
{{- toJson $v.storageClasses -}}
{{- else -}}
{{- with include "fioprobe.defaultStorageClass" . | fromJson -}}
{{- toJson (list (dict "name" .metadata.name "volume" (include "fioprobe.volumeOfClass"
  (dict "class" . "size" $d.size) | fromJson) "profiles" $d.profiles)) -}}
{{- else -}}
[]
{{- end -}}
{{- end -}}
{{- end }}

{{/* The cluster's default StorageClass (lookup), as JSON; {} where there is none or no cluster. */}}
{{- define "fioprobe.defaultStorageClass" -}}
{{- $found := dict -}}
{{- range (lookup "storage.k8s.io/v1" "StorageClass" "" "").items | default list -}}
{{- $annotations := .metadata.annotations | default dict -}}
{{- $default := or (eq (get $annotations "storageclass.kubernetes.io/is-default-class") "true")
  (eq (get $annotations "storageclass.beta.kubernetes.io/is-default-class") "true") -}}
{{- if and $default (gt (dig "metadata" "creationTimestamp" "" .) (dig "metadata" "creationTimestamp" "" $found)) -}}
{{- $found = . -}}
{{- end -}}
{{- end -}}
{{- toJson $found -}}
{{- end }}

{{/*
fioprobe's volume model of a StorageClass object: (dict "class" obj "size" quantity). EBS (CSI
or in-tree): parameters.type (CSI's default gp3, in-tree's gp2), with provisioned iops
(parameters.iops, or iopsPerGB times the size) and gp3's throughput (MiB/s); io1/io2 without
either are `unknown` (their model needs the IOPS). Ceph RBD (any *rbd.csi.ceph.com): ceph-rbd.
*/}}
{{- define "fioprobe.volumeOfClass" -}}
{{- $class := .class -}}
{{- $parameters := $class.parameters | default dict -}}
{{- $provisioner := $class.provisioner | default "" -}}
{{- $volume := dict "type" "unknown" "size" .size "provisioner" $provisioner "dedicated" true -}}
{{- if has $provisioner (list "ebs.csi.aws.com" "kubernetes.io/aws-ebs") -}}
{{- $type := lower (get $parameters "type" | default (ternary "gp3" "gp2" (eq $provisioner "ebs.csi.aws.com"))) -}}
{{- $sizeGiB := div (int64 (include "fioprobe.quantityBytes" .size | float64)) 1073741824 -}}
{{- $iops := get $parameters "iops" | default "" -}}
{{- if and (not $iops) (get $parameters "iopsPerGB") }}{{ $iops = toString
  (mul (int64 (get $parameters "iopsPerGB")) $sizeGiB) }}{{ end -}}
{{- /* EBS's bounds: gp3 provisions 3,000 to 16,000 IOPS; an io1/io2 class without a positive
  figure is not modelled (its model needs the IOPS). */ -}}
{{- if and $iops (eq $type "gp3") }}{{ $iops = toString (max 3000 (min 16000 (int64 $iops))) }}{{ end -}}
{{- if has $type (list "gp2" "gp3" "st1" "sc1") -}}
{{- $_ := set $volume "type" $type -}}
{{- else if and (has $type (list "io1" "io2")) $iops (gt (int64 $iops) 0) -}}
{{- $_ := set $volume "type" $type -}}
{{- end -}}
{{- if and $iops (gt (int64 $iops) 0) (has $type (list "gp3" "io1" "io2")) (ne (get $volume "type") "unknown") }}{{ $_
  := set $volume "iops" (int64 $iops) }}{{ end -}}
{{- with get $parameters "throughput" }}{{ if eq $type "gp3" }}{{ $_ := set $volume "throughput"
  (printf "%sMi" .) }}{{ end }}{{ end -}}
{{- else if hasSuffix "rbd.csi.ceph.com" $provisioner -}}
{{- $_ := set $volume "type" "ceph-rbd" -}}
{{- end -}}
{{- toJson $volume -}}
{{- end }}

{{/* The egress rule to an existing Pushgateway (manifests/lib/common.libsonnet
     toExistingPushgateway), as JSON: its port, on
  pushgateway.cidrs or any address. */}}
{{- define "fioprobe.toExistingPushgateway" -}}
{{- $port := regexFind ":[0-9]+(/|$)" (trimPrefix "https://" (trimPrefix "http://" .url)) | trimAll ":/" | int -}}
{{- $rule := dict "ports" (list (dict "protocol" "TCP" "port" $port)) -}}
{{- with .cidrs }}{{ $_ := set $rule "to" (list) }}{{ range . }}{{ $_ := set $rule "to"
  (append $rule.to (dict "ipBlock" (dict "cidr" .))) }}{{ end }}{{ end -}}
{{- toJson $rule -}}
{{- end }}
