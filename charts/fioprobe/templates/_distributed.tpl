{{/*
Distributed benchmarks (components/distributed.libsonnet, docs/DISTRIBUTED.md), in
templates/distributed/: for each entry of `benchmarks`, its plan, its fio servers (a headless
Service and a StatefulSet with a PVC each), its client Job and the NetworkPolicies that let only
that client reach the servers. Applied at once: the client waits for its servers to listen
(--wait-for-servers). Removing the entry (helm upgrade) deletes them all, PVCs included unless
keepVolumes. The comments of the component say why each field is what it is.
*/}}

{{/* What the manifests refuse and JSON Schema cannot say: names used twice, a push with auth or TLS. */}}
{{- define "fioprobe.distributed.validate" -}}
{{- $pgw := .Values.pushgateway -}}
{{- $names := list -}}
{{- range .Values.benchmarks }}{{ $names = append $names .name }}{{ end -}}
{{- if ne (len $names) (len (uniq $names)) -}}
{{- fail (printf "benchmarks: a name appears more than once: %s" (join ", " $names)) -}}
{{- end -}}
{{- range .Values.benchmarks -}}
{{- if and (include "fioprobe.distributed.push" .) (or $pgw.auth.enabled $pgw.tls.enabled) -}}
{{- fail "distributed: push to a Pushgateway with auth or TLS is not supported yet; set push: false" -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/* Whether a benchmark pushes its result: "true" or "" (push, true by default). */}}
{{- define "fioprobe.distributed.push" -}}
{{- if ternary .push true (hasKey . "push") }}true{{ end -}}
{{- end }}

{{/* The fio servers' port. */}}
{{- define "fioprobe.distributed.port" -}}
8765
{{- end }}

{{/* The plan file: the benchmark's plan with the keys that come from the entry, as JSON. */}}
{{- define "fioprobe.distributed.plan" -}}
{{- $plan := deepCopy (.plan | default dict) -}}
{{- $_ := set $plan "name" .name -}}
{{- $_ := set $plan "storageclass" .storageclass -}}
{{- $_ := set $plan "servers" .servers -}}
{{- $_ := set $plan "node_selector" (.nodeSelector | default dict) -}}
{{- $_ := set $plan "volume_size" .volumeSize -}}
{{- toJson $plan -}}
{{- end }}

{{/*
Computed at install, as the component computes them: the client's deadline (the servers' wait,
the budget, a minute per phase run, the push and its grace), the client's grace and how long
the servers live; as JSON: (dict "root" $ "benchmark" b).
*/}}
{{- define "fioprobe.distributed.deadlines" -}}
{{- $pgw := .root.Values.pushgateway -}}
{{- $plan := .benchmark.plan | default dict -}}
{{- $phases := $plan.phases | default (list "prepare" "randread" "randwrite") -}}
{{- if not (kindIs "slice" $phases) }}{{ $phases = list }}{{ end -}}
{{- $sweep := 1 -}}
{{- if and (kindIs "slice" $plan.iodepths) $plan.iodepths }}{{ $sweep = len $plan.iodepths }}{{ end -}}
{{- $random := 0 -}}
{{- range $phases }}{{ if ne . "prepare" }}{{ $random = add1 $random }}{{ end }}{{ end -}}
{{- $phaseRuns := add (ternary 1 0 (has "prepare" $phases)) (mul $sweep $random) -}}
{{- $push := include "fioprobe.distributed.push" .benchmark -}}
{{- $pushSeconds := ternary (mul 2 (int $pgw.timeoutSeconds) (int $pgw.attempts)) 0 (not (not $push)) -}}
{{- $budgetSeconds := 3600 -}}
{{- if and (kindIs "map" $plan.budget) (hasKey ($plan.budget | default dict) "seconds_per_server") -}}
{{- $budgetSeconds = int $plan.budget.seconds_per_server -}}
{{- end -}}
{{- $clientGrace := add 10 30 $pushSeconds 10 -}}
{{- $serverWait := int (include "fioprobe.distributed.serverWait" .) -}}
{{- $deadline := add 60 $serverWait $budgetSeconds (mul $phaseRuns 60) $clientGrace -}}
{{- toJson (dict "deadline" $deadline "clientGrace" $clientGrace "serverSeconds" (add 600 $deadline $clientGrace)) -}}
{{- end }}

{{/* Seconds the client waits for its servers to listen. */}}
{{- define "fioprobe.distributed.serverWait" -}}
300
{{- end }}
