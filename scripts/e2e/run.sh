#!/usr/bin/env bash
# `make e2e`: fioprobe on a real single-node Kubernetes cluster on this machine.
#   1. builds what the cluster needs (scripts/e2e/setup.sh; cached, idempotent)
#   2. brings the cluster up (scripts/e2e/cluster.sh up) and builds the image from the
#      unmodified Dockerfile into it
#   3. does what docs/MANIFESTS.md tells a user: configuration -> generate -> the
#      prometheus-operator CRDs -> `kubectl apply -k` (and, beside it, what
#      charts/fioprobe/README.md tells one: `helm install`); the configuration changes are in
#      scripts/e2e/config.jsonnet (a one-minute interval, so the CronJobs fire within the
#      test's time, and a StorageClass per injected fault)
#   4. runs the scenario tests (tests/e2e, pytest)
#   5. tears everything down, also on failure and on SIGINT/SIGTERM/SIGHUP
# It changes the machine (network addresses, iptables, sysctls, mounts, cgroups, processes) for
# its duration, so it runs only as root and only where told that the machine is disposable:
# CI=true (CI machines are thrown away) or FIOPROBE_E2E_ALLOW=1.
set -euo pipefail
cd "$(dirname "$(realpath "$0")")/../.."
REPO=$PWD
export FIOPROBE_E2E_RUN=${FIOPROBE_E2E_RUN:-/tmp/fioprobe-e2e}
RUN=$FIOPROBE_E2E_RUN
CACHE_ROOT=${XDG_CACHE_HOME:-$HOME/.cache}/fioprobe-e2e
say() { printf 'e2e: %s\n' "$*" >&2; }

if [[ $(id -u) != 0 ]]; then
  say "refusing to run: the cluster needs root (network, mounts, cgroups)"
  exit 2
fi
if [[ ${CI:-} != true && ${FIOPROBE_E2E_ALLOW:-} != 1 ]]; then
  say "refusing to run: it changes this machine's network, iptables, sysctls and mounts while"
  say "it runs. Set FIOPROBE_E2E_ALLOW=1 on a disposable machine (CI=true does the same)."
  exit 2
fi

export PATH=$REPO/.tools/bin:$REPO/.venv/bin:$PATH
t_start=$SECONDS
bash scripts/e2e/setup.sh
setup_seconds=$((SECONDS - t_start))
echo "setup_seconds $setup_seconds" >"$CACHE_ROOT/last-setup"

pytest_pid=""
finish() {
  local rc=$?
  trap - EXIT INT TERM HUP
  if [[ -n $pytest_pid ]] && kill -0 "$pytest_pid" 2>/dev/null; then
    # SIGINT first: pytest then runs its fixtures' teardown, which stops the Prometheus and
    # Alertmanager it started (in sessions of their own, out of reach of a group signal).
    # Then TERM and KILL, each after a bounded wait.
    local sig i
    for sig in INT TERM KILL; do
      kill -"$sig" -- "-$pytest_pid" 2>/dev/null
      for i in $(seq 1 100); do
        kill -0 "$pytest_pid" 2>/dev/null || break 2
        sleep 0.2
      done
    done
  fi
  if [[ -f $RUN/measurements ]]; then
    cp "$RUN/measurements" "$CACHE_ROOT/last-measurements"
    say "measurements (also in $CACHE_ROOT/last-measurements):"
    sed 's/^/  /' "$RUN/measurements" >&2
  fi
  if [[ ${FIOPROBE_E2E_KEEP:-} == 1 && $rc != 0 ]]; then
    say "FIOPROBE_E2E_KEEP=1: cluster left up for inspection; scripts/e2e/cluster.sh down ends it"
  else
    say "tearing down"
    down
  fi
  exit "$rc"
}

# The cluster down, then what the chart's installs made on the host outside the run directory
# (listed in it by run.sh and the tests): removed once no pod can write there any more, a
# filesystem a test mounted under one first (deepest first).
down() {
  local node_dirs=() d m
  if [[ -f $RUN/first-install-node-dirs ]]; then
    mapfile -t node_dirs <"$RUN/first-install-node-dirs"
  fi
  bash scripts/e2e/cluster.sh down
  for d in "${node_dirs[@]}"; do
    [[ $d == /var/lib/* ]] || continue
    for m in $(awk -v d="$d/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r); do
      umount -l "$m" || true
    done
    rm -rf --one-file-system "$d"
  done
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# A run that was killed without its trap (SIGKILL, power) left its state behind: undo it first.
if [[ -e $RUN ]]; then
  say "removing what an earlier run left in $RUN"
  down
fi
bash scripts/e2e/cluster.sh up
# This run's setup (steps listed only when they had work to do: a cold cache) with the rest.
{
  echo "setup_seconds $setup_seconds"
  cat "$CACHE_ROOT/last-setup-steps"
} >>"$RUN/measurements"
export KUBECONFIG=$RUN/admin.kubeconfig
kubectl_() { "$REPO/.tools/kube/bin/kubectl" "$@"; }

crds_up() {
  kubectl_ apply --server-side -f "$REPO/.tools/kube/crds" >/dev/null
  # `kubectl wait` fails at once ("accessor error: <nil>") on a CRD the apiserver has not given
  # a status yet, instead of waiting: ask again, within one bounded minute.
  local crds=(crd/servicemonitors.monitoring.coreos.com crd/podmonitors.monitoring.coreos.com
    crd/prometheusrules.monitoring.coreos.com)
  local crd_deadline=$((SECONDS + 60))
  until kubectl_ wait --for=condition=Established --timeout=10s "${crds[@]}" >/dev/null 2>&1; do
    if ((SECONDS >= crd_deadline)); then
      say "the prometheus-operator CRDs were not Established within 60s"
      kubectl_ get "${crds[@]}" -o wide >&2 || true
      exit 1
    fi
    sleep 1
  done
}

main_install() {
  # The configuration a user would write: the repository's config.libsonnet with the overrides
  # of scripts/e2e/config.jsonnet (a one-minute interval, a StorageClass per fault, the etcd
  # probe directory on the node's slow etcd disk that cluster.sh mounted; the etcd node found by
  # its role label).
  local etcd_dir=$RUN/disks/etcd/etcd-fioprobe
  bash scripts/generate.d/30-manifests.sh "$RUN/manifests" \
    --tla-code "overrides=(import 'scripts/e2e/config.jsonnet')('$RUN')"
  # The etcd probe directory and the state directory are created by the deployment (its
  # prepare step); they must not exist before (tests/e2e checks owner and mode afterwards). The
  # directory standing for etcd's data is the node's, as on a control-plane node.
  [[ ! -e $etcd_dir && ! -e $RUN/state ]] || { say "$etcd_dir or $RUN/state exists before the install"; exit 1; }
  mkdir -p "$RUN/disks/etcd/data"
  crds_up
  date +%s.%N >"$RUN/applied-at"
  kubectl_ apply -k "$RUN/manifests" >"$RUN/logs/apply.log"
  say "applied $(wc -l <"$RUN/logs/apply.log") objects"

  # The Helm chart beside the manifests, installed with Helm 4 (the first install below is Helm
  # 3's, upgraded and uninstalled by Helm 4): the namespace first (Pod Security restricted), then
  # `helm install` with a values file (scripts/e2e/helm-values.yaml: a StorageClass probe every
  # minute, its own Pushgateway; the etcd probes and the streams stay the manifests').
  # tests/e2e/test_30_helm.py checks that its probe pushes, then uninstalls it.
  kubectl_ create namespace fioprobe-helm >/dev/null
  kubectl_ label namespace fioprobe-helm pod-security.kubernetes.io/enforce=restricted \
    pod-security.kubernetes.io/warn=restricted pod-security.kubernetes.io/audit=restricted >/dev/null
  date +%s.%N >"$RUN/helm-installed-at"
  "$REPO/.tools/bin/helm4" install fioprobe-helm "$REPO/charts/fioprobe" --kubeconfig "$KUBECONFIG" \
    --namespace fioprobe-helm -f "$REPO/scripts/e2e/helm-values.yaml" >"$RUN/logs/helm-install.log"
  say "helm 4 installed release fioprobe-helm"
}

# The node directories the chart's defaults create on the host (etcd.hostPath, stateHostPath
# and its parent): they must not exist before, and the teardown removes them.
FIRST_INSTALL_NODE_DIRS=(/var/lib/etcd-fioprobe /var/lib/fioprobe)

first_install() {
  # The first install on this cluster as a user makes it (charts/fioprobe/README.md, Install):
  # the chart's defaults (its image name is the one `make image` built), with Helm 3 (the tests
  # upgrade and uninstall it with Helm 4, as a user moving to Helm 4 would), a one-minute
  # interval, and where this cluster's etcd keeps its data (etcd.dataDir: the one fact of a
  # distribution; here the run directory's etcd, on the same filesystem as /var/lib). A real
  # dynamic provisioner behind the default StorageClass; no namespace, directory or object
  # made first but the prometheus-operator CRDs (kube-prometheus would have them). The node
  # starts without its control-plane role label, as a managed cluster's nodes are; the first
  # test gives it the label (a control-plane node joining later).
  local d
  for d in "${FIRST_INSTALL_NODE_DIRS[@]}"; do
    [[ ! -e $d ]] || { say "$d exists before the first install; on a disposable machine, remove it"; exit 1; }
    echo "$d" >>"$RUN/first-install-node-dirs"
  done
  bash scripts/e2e/cluster.sh default-storageclass local-path
  kubectl_ label node --all node-role.kubernetes.io/control-plane- >/dev/null
  crds_up
  date +%s.%N >"$RUN/applied-at"
  "$REPO/.tools/bin/helm" install fioprobe "$REPO/charts/fioprobe" --kubeconfig "$KUBECONFIG" \
    --namespace fioprobe --create-namespace --set everyMinutes=1 --set etcd.dataDir="$RUN/etcd" \
    >"$RUN/logs/helm-install.log"
  say "helm installed release fioprobe (first install)"
}

upgrade_install() {
  # The chart as its users have it before the etcd disks were found by role (tests/e2e/data:
  # the chart at 438fcbc), installed as its README said: the two namespaces with their Pod
  # Security labels and the node directories made by hand, etcd's node named in the values
  # (tests/e2e/upgrade/old-values.yaml). etcd.dataDir keeps the new chart's default,
  # /var/lib/etcd, which Debian's etcd package made on this machine (the unit tests' etcd).
  local d built named
  # The old values name the image `make image` built and the node has (nothing is pulled here).
  built=$("$REPO/.venv/bin/python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["image"])' \
    "$REPO/publish.json")
  named=$("$REPO/.venv/bin/python" -c 'import sys,yaml; print(yaml.safe_load(open(sys.argv[1]))["image"]["name"])' \
    "$REPO/tests/e2e/upgrade/old-values.yaml")
  [[ $named == "$built" ]] ||
    { say "tests/e2e/upgrade/old-values.yaml names the image $named, make image builds $built"; exit 1; }
  [[ -d /var/lib/etcd ]] || { say "no /var/lib/etcd (the chart's default etcd.dataDir) on this machine"; exit 1; }
  for d in "${FIRST_INSTALL_NODE_DIRS[@]}"; do
    [[ ! -e $d ]] || { say "$d exists before the install; on a disposable machine, remove it"; exit 1; }
    echo "$d" >>"$RUN/first-install-node-dirs"
  done
  install -d -o 65532 -g 65532 -m 0700 /var/lib/etcd-fioprobe /var/lib/fioprobe/state
  bash scripts/e2e/cluster.sh default-storageclass local-path
  kubectl_ create namespace fioprobe >/dev/null
  kubectl_ label namespace fioprobe pod-security.kubernetes.io/enforce=restricted >/dev/null
  kubectl_ create namespace fioprobe-etcd >/dev/null
  kubectl_ label namespace fioprobe-etcd pod-security.kubernetes.io/enforce=privileged \
    pod-security.kubernetes.io/warn=restricted pod-security.kubernetes.io/audit=restricted >/dev/null
  crds_up
  date +%s.%N >"$RUN/applied-at"
  "$REPO/.tools/bin/helm" install fioprobe "$REPO/tests/e2e/data/fioprobe-chart-438fcbc.tgz" \
    --kubeconfig "$KUBECONFIG" --namespace fioprobe -f "$REPO/tests/e2e/upgrade/old-values.yaml" \
    >"$RUN/logs/helm-install.log"
  say "helm installed release fioprobe from the chart at 438fcbc"
}

main_uninstall() {
  # The main suite's objects gone before the first install, so that the two never share a name:
  # the manifests (their namespaces with them) and the Helm release beside them, if a test left
  # it. The local Prometheus and Alertmanager of the first install start on empty storage.
  say "removing the main suite's install"
  "$REPO/.tools/bin/helm4" uninstall fioprobe-helm --kubeconfig "$KUBECONFIG" --namespace fioprobe-helm \
    --ignore-not-found --wait --timeout 5m >/dev/null
  kubectl_ delete -k "$RUN/manifests" --ignore-not-found --wait=true --timeout=300s >/dev/null
  kubectl_ delete namespace fioprobe-helm --ignore-not-found --wait=true --timeout=300s >/dev/null
  rm -rf "$RUN/prometheus" "$RUN/alertmanager"
}

# The scenario tests (`run_scenarios SUITE DIR...`), in their own process group so that the
# trap can end them. A background job of a non-interactive shell starts with SIGINT ignored, and
# Python then installs no KeyboardInterrupt handler: reset it, so the trap's SIGINT lets pytest
# stop its fixtures.
run_scenarios() {
  local suite=$1
  shift
  set +e
  FIOPROBE_E2E_SUITE=$suite setsid env --default-signal=INT "$REPO/.venv/bin/python" -m pytest \
    -p no:cacheprovider -c "$REPO/tests/e2e/pytest.ini" "$@" &
  pytest_pid=$!
  wait "$pytest_pid"
  local rc=$?
  pytest_pid=""
  set -e
  return "$rc"
}

# Which suite: `main` (`make e2e`: the manifests and a Helm release beside them,
# tests/e2e/test_*.py, then, on the same cluster once they are removed, the first install with
# one interval of each wait) or `first-install` (`make e2e-first-install`: the first install
# alone, four intervals of each wait) or `upgrade` (`make e2e-upgrade`: the chart at 438fcbc with
# its users' values, then `helm upgrade` to this checkout's).
export FIOPROBE_E2E_SUITE=${FIOPROBE_E2E_SUITE:-main}
rc=0
case $FIOPROBE_E2E_SUITE in
  main)
    main_install
    # Arguments (a -k, a test's path) are for the main suite; the first install runs whole.
    run_scenarios main "$REPO/tests/e2e" "$@" || rc=$?
    if [[ $rc == 0 ]]; then
      main_uninstall
      first_install
      FIOPROBE_E2E_INTERVALS=1 run_scenarios first-install "$REPO/tests/e2e/first_install" || rc=$?
    fi
    ;;
  first-install)
    first_install
    FIOPROBE_E2E_INTERVALS=4 run_scenarios first-install "$REPO/tests/e2e/first_install" "$@" || rc=$?
    ;;
  upgrade)
    upgrade_install
    run_scenarios upgrade "$REPO/tests/e2e/upgrade" "$@" || rc=$?
    ;;
  *)
    say "FIOPROBE_E2E_SUITE must be main, first-install or upgrade, got $FIOPROBE_E2E_SUITE"
    exit 2
    ;;
esac
echo "total_seconds $((SECONDS - t_start))" >>"$RUN/measurements"
exit "$rc"
