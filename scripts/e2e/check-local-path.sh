#!/usr/bin/env bash
# Checks the e2e cluster's dynamic provisioner (StorageClass `local-path`, scripts/e2e/local-path.yaml)
# end to end, as a workload on a user's cluster with its defaults would use it:
#   1. `local-path` is the one default StorageClass (`cluster.sh default-storageclass local-path`
#      makes it so; this script changes no StorageClass);
#   2. a PVC without storageClassName gets `local-path` from the DefaultStorageClass admission,
#      and stays Pending with no volume while nothing consumes it (WaitForFirstConsumer);
#   3. a pod of the e2e base image, restricted (user and group 65532, no capabilities, in a
#      namespace enforcing Pod Security `restricted`), is scheduled, the PVC binds to a PV the
#      provisioner made (hostPath, reclaimPolicy Delete, on this node, in the configured
#      directory, made 0777 by the helper pod), and the pod writes a file and fsyncs it
#      (dd conv=fsync); the file is on the node's disk, owned by 65532;
#   4. deleting the pod and the PVC deletes the PV and its directory (the teardown helper pod
#      ran); both helper pods left their events and are gone.
# Usage (on the node, the cluster up): scripts/e2e/check-local-path.sh
#   KUBECONFIG            default $FIOPROBE_E2E_RUN/admin.kubeconfig
#   FIOPROBE_E2E_RUN      the run directory (default /tmp/fioprobe-e2e)
# Prints its measurements as `name seconds` lines (and appends them to $RUN/measurements):
# local_path_pvc_bound_seconds (pod created -> PVC Bound), local_path_pod_succeeded_seconds
# (pod created -> wrote and exited), local_path_pv_deleted_seconds (PVC deleted -> PV and
# directory gone). Exit status 0 when every check passed, 1 with the failed check named.
# Every wait is bounded; its namespace is removed on the way out, also on failure.
set -euo pipefail
REPO=$(realpath "$(dirname "$(realpath "$0")")/../..")
RUN=${FIOPROBE_E2E_RUN:-/tmp/fioprobe-e2e}
export KUBECONFIG=${KUBECONFIG:-$RUN/admin.kubeconfig}
KUBECTL=$REPO/.tools/kube/bin/kubectl
NS=e2e-local-path-check
CLASS=local-path
WAIT=120

kubectl() { "$KUBECTL" "$@"; }
say() { printf 'check-local-path: %s\n' "$*" >&2; }
fail() {
  say "FAILED: $*"
  exit 1
}
now() { echo "$EPOCHREALTIME"; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.1f", b - a}'; }
measure() { # <name> <seconds>
  echo "$1 $2"
  if [[ -f $RUN/measurements ]]; then echo "$1 $2" >>"$RUN/measurements"; fi
}
# poll <what> <command...>: until it succeeds, every 0.2 s, at most $WAIT seconds.
poll() {
  local what=$1 deadline=$((SECONDS + WAIT))
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "not within ${WAIT}s: $what"
    sleep 0.2
  done
}
field() { kubectl get "$@" 2>/dev/null; } # a jsonpath read that may find nothing yet

finish() {
  local rc=$?
  trap - EXIT
  if ((rc != 0)); then
    say "state at the failure:"
    kubectl -n "$NS" get pvc,pods -o wide >&2 || true
    kubectl get pv -o wide >&2 || true
    kubectl -n local-path-storage get pods -o wide >&2 || true
    kubectl -n local-path-storage logs deployment/local-path-provisioner --tail=30 >&2 || true
  fi
  kubectl delete namespace "$NS" --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1 || true
  exit "$rc"
}

[[ -x $KUBECTL ]] || fail "no kubectl at $KUBECTL (make setup)"
[[ -f $KUBECONFIG ]] || fail "no kubeconfig at $KUBECONFIG (is the cluster up?)"

# 1. The default StorageClass, and what the provisioner was configured with.
defaults=$(kubectl get storageclass -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.annotations.storageclass\.kubernetes\.io/is-default-class}{"\n"}{end}' |
  awk -F= '$2 == "true" {print $1}' | paste -sd, -)
[[ $defaults == "$CLASS" ]] ||
  fail "the default StorageClass is '$defaults', not $CLASS (scripts/e2e/cluster.sh default-storageclass $CLASS)"
image=$(kubectl -n local-path-storage get configmap local-path-config -o jsonpath='{.data.helperPod\.yaml}' |
  awk '$1 == "image:" {gsub(/"/, "", $2); print $2; exit}')
volume_dir=$(kubectl -n local-path-storage get configmap local-path-config -o jsonpath='{.data.config\.json}' |
  tr -d ' \n' | sed -n 's/.*"paths":\["\([^"]*\)".*/\1/p')
[[ -n $image && -n $volume_dir ]] || fail "cannot read the helper image and the volume directory from local-path-config"
node=$(kubectl get nodes -o jsonpath='{.items[0].metadata.name}')

# 2. The claim, as a chart or a user would write it: no storageClassName.
trap finish EXIT
if kubectl get namespace "$NS" >/dev/null 2>&1; then
  say "removing $NS left by an earlier run"
  kubectl delete namespace "$NS" --wait=true --timeout=${WAIT}s >/dev/null
fi
kubectl create namespace "$NS" >/dev/null
kubectl label namespace "$NS" pod-security.kubernetes.io/enforce=restricted >/dev/null
sc=$(kubectl -n "$NS" create -o jsonpath='{.spec.storageClassName}' -f - <<EOF
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 64Mi}}
EOF
)
[[ $sc == "$CLASS" ]] || fail "the PVC got storageClassName '$sc' at admission, not $CLASS"
say "PVC data got storageClassName $sc from the DefaultStorageClass admission"
sleep 3
phase=$(field -n "$NS" pvc data -o jsonpath='{.status.phase}/{.spec.volumeName}')
[[ $phase == Pending/ ]] || fail "with no consumer the PVC should be Pending with no volume, is '$phase'"

# 3. A consumer: the base image as user 65532, restricted, writing and fsyncing 1 MiB.
t_pod=$(now)
kubectl -n "$NS" create -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: writer}
spec:
  restartPolicy: Never
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    runAsGroup: 65532
    seccompProfile: {type: RuntimeDefault}
  containers:
  - name: writer
    image: $image
    imagePullPolicy: Never
    command: [/bin/sh, -c, 'set -eu; id -u; dd if=/dev/zero of=/data/fsynced bs=64k count=16 conv=fsync 2>/dev/null; stat -c "%u %g %s" /data/fsynced']
    securityContext:
      allowPrivilegeEscalation: false
      capabilities: {drop: [ALL]}
      readOnlyRootFilesystem: true
    volumeMounts: [{name: data, mountPath: /data}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
EOF
bound() { [[ $(field -n "$NS" pvc data -o jsonpath='{.status.phase}') == Bound ]]; }
poll "PVC data Bound" bound
measure local_path_pvc_bound_seconds "$(since "$t_pod")"
pv=$(kubectl -n "$NS" get pvc data -o jsonpath='{.spec.volumeName}')
got=$(kubectl get pv "$pv" -o jsonpath='{.spec.storageClassName} {.spec.persistentVolumeReclaimPolicy} {.metadata.annotations.pv\.kubernetes\.io/provisioned-by} {.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]}')
[[ $got == "$CLASS Delete rancher.io/local-path $node" ]] ||
  fail "PV $pv: class, reclaim policy, provisioner, node are '$got', not '$CLASS Delete rancher.io/local-path $node'"
path=$(kubectl get pv "$pv" -o jsonpath='{.spec.hostPath.path}')
[[ $path == "$volume_dir"/* ]] || fail "PV $pv is at '$path', not under $volume_dir"
[[ $(stat -c %a "$path") == 777 ]] || fail "$path is not mode 0777 (the helper pod's setup makes it so): $(stat -c %a "$path")"
say "PV $pv ($CLASS, Delete) at $path on $node"

ended() { [[ $(field -n "$NS" pod writer -o jsonpath='{.status.phase}') =~ ^(Succeeded|Failed)$ ]]; }
poll "pod writer ended" ended
measure local_path_pod_succeeded_seconds "$(since "$t_pod")"
log=$(kubectl -n "$NS" logs writer)
[[ $(kubectl -n "$NS" get pod writer -o jsonpath='{.status.phase}') == Succeeded ]] ||
  fail "pod writer failed: $log"
[[ $log == $'65532\n65532 65532 1048576' ]] || fail "the writer printed '$log', expected uid 65532 and a 1 MiB file of 65532:65532"
[[ $(stat -c '%u %s' "$path/fsynced") == "65532 1048576" ]] ||
  fail "on the node, $path/fsynced is '$(stat -c '%u %s' "$path/fsynced" 2>&1)', not 65532's 1 MiB"
say "the pod wrote and fsynced 1 MiB as 65532; the file is on the node at $path"

# 4. Deleting: the PV goes (reclaimPolicy Delete) and the teardown helper pod removes the directory.
kubectl -n "$NS" delete pod writer --wait=true --timeout=${WAIT}s >/dev/null
t_del=$(now)
kubectl -n "$NS" delete pvc data --wait=true --timeout=${WAIT}s >/dev/null
pv_gone() { ! kubectl get pv "$pv" >/dev/null 2>&1; }
poll "PV $pv deleted" pv_gone
dir_gone() { [[ ! -e $path ]]; }
poll "directory $path removed" dir_gone
measure local_path_pv_deleted_seconds "$(since "$t_del")"
events=$(kubectl -n local-path-storage get events -o jsonpath='{range .items[*]}{.involvedObject.name}{"\n"}{end}')
for action in create delete; do
  grep -qx "helper-pod-$action-$pv" <<<"$events" || fail "no event of the helper pod helper-pod-$action-$pv"
done
no_helpers() { [[ -z $(kubectl -n local-path-storage get pods -o name | grep helper-pod) ]]; }
poll "helper pods removed" no_helpers
say "PV $pv and $path removed by the provisioner's helper pods"
say "ok"
