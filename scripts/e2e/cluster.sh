#!/usr/bin/env bash
# A single-node Kubernetes cluster on this machine, for `make e2e`:
#   cluster.sh up     start etcd, kube-apiserver, controller-manager, scheduler, containerd,
#                     kubelet, kube-proxy and CoreDNS; local PersistentVolumes; images loaded
#   cluster.sh down   stop every process by the pid recorded at start, unmount everything
#                     mounted under the run directory, undo the network and sysctl changes
#   cluster.sh default-storageclass <name>
#                     make <name> the cluster's only default StorageClass (the annotation
#                     storageclass.kubernetes.io/is-default-class moves to it from every other
#                     class): `local-path` for a user's defaults, `standard` back to the start
#
# StorageClasses: `standard` (the default after `up`), gp2, gp3, e2e-slow, e2e-full,
# e2e-readonly and e2e-bench are kubernetes.io/no-provisioner classes over local
# PersistentVolumes that `up` makes (storage_up). `local-path` has a real dynamic provisioner,
# rancher.io/local-path (local-path-provisioner, built by setup.sh from
# scripts/e2e/local-path/go.mod, deployed from scripts/e2e/local-path.yaml by local_path_up):
# WaitForFirstConsumer, reclaimPolicy Delete, each volume a directory (mode 0777, a hostPath PV)
# under $RUN/local-path that a helper pod of the e2e base image makes and removes. It is not
# the default unless asked: `cluster.sh default-storageclass local-path` on a running cluster,
# or FIOPROBE_E2E_DEFAULT_STORAGECLASS=local-path for `up`. scripts/e2e/check-local-path.sh
# checks it end to end (a PVC without storageClassName, a non-root pod writing to it).
# Everything lives under $FIOPROBE_E2E_RUN (default /tmp/fioprobe-e2e): state, logs, pids, the
# kubeconfig (admin.kubeconfig). Binaries and images come from scripts/e2e/setup.sh.
#
# Traffic stays on this machine: the node IP is a /32 on lo, pods sit on their own bridge with
# host-local addresses, forwarding from that bridge to any other interface is dropped, CoreDNS
# has no forward plugin, and containerd pulls through a proxy address nothing listens on.
set -euo pipefail
SELF=$(realpath "$0")
HERE=$(dirname "$SELF")
REPO=$(realpath "$HERE/../..")
RUN=${FIOPROBE_E2E_RUN:-/tmp/fioprobe-e2e}
CACHE_ROOT=${XDG_CACHE_HOME:-$HOME/.cache}/fioprobe-e2e

# Addresses: private ranges of our own, nothing else on this machine uses them.
NODE_IP=10.213.0.1
# A name no default of fioprobe mentions: the etcd probes find the node by its role label.
NODE_NAME=${FIOPROBE_E2E_NODE:-e2e-cp-a}
POD_CIDR=10.213.64.0/24
SERVICE_CIDR=10.213.128.0/24
API_SERVICE_IP=10.213.128.1
DNS_SERVICE_IP=10.213.128.10
BRIDGE=fpe2e0
ETCD_PORT=23790
CHAIN=FIOPROBE-E2E
# sysctls that the kubelet, kube-proxy or this script may change; restored by `down`.
SYSCTLS=(net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables vm.overcommit_memory
  vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys
  kernel.keys.root_maxbytes net.ipv4.conf.all.route_localnet)

say() { printf 'e2e-cluster: %s\n' "$*" >&2; }
die() {
  say "ERROR: $*"
  exit 1
}

# wait_until <seconds> <what> <command...>: a bounded wait with a message that says what failed.
wait_until() {
  local limit=$1 what=$2
  shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      say "timed out after ${limit}s waiting for: $what"
      return 1
    fi
    sleep 1
  done
}

kubectl() { "$KUBECTL" --kubeconfig="$RUN/admin.kubeconfig" "$@"; }

# start <name> <command...>: runs it in the background, its own process group, logs to
# $RUN/logs/<name>.log, pid recorded for `down`.
start() {
  local name=$1
  shift
  setsid "$@" >"$RUN/logs/$name.log" 2>&1 </dev/null &
  echo "$name $!" >>"$RUN/pids"
}

load_paths() {
  [[ -f $CACHE_ROOT/paths.env ]] || die "run scripts/e2e/setup.sh first"
  # shellcheck disable=SC1091
  source "$CACHE_ROOT/paths.env"
  KUBE_TOOLS=$REPO/.tools/kube
  [[ -x $KUBE_TOOLS/bin/kube-apiserver ]] || die "no kube-apiserver: run make setup first"
  KUBECTL=$KUBE_TOOLS/bin/kubectl
}

# --- certificates --------------------------------------------------------------------------
certs() {
  local d=$RUN/pki
  mkdir -p "$d"
  (
    cd "$d"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 \
      -subj /CN=fioprobe-e2e-ca 2>/dev/null
    # name subject SANs
    issue() {
      local name=$1 subj=$2 san=${3:-}
      openssl req -newkey rsa:2048 -nodes -keyout "$name.key" -out "$name.csr" -subj "$subj" 2>/dev/null
      if [[ -n $san ]]; then
        printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$san" >"$name.ext"
      else
        printf 'extendedKeyUsage=clientAuth\n' >"$name.ext"
      fi
      openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
        -extfile "$name.ext" -out "$name.crt" 2>/dev/null
    }
    issue apiserver /CN=kube-apiserver \
      "IP:$NODE_IP,IP:$API_SERVICE_IP,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
    issue admin "/O=system:masters/CN=fioprobe-e2e-admin"
    issue apiserver-kubelet "/O=system:masters/CN=kube-apiserver-kubelet-client"
    issue kubelet "/O=system:nodes/CN=system:node:$NODE_NAME"
    issue kubelet-server "/CN=$NODE_NAME" "IP:$NODE_IP,DNS:$NODE_NAME"
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  )
  kubeconfig admin "$RUN/admin.kubeconfig"
  kubeconfig kubelet "$RUN/kubelet.kubeconfig"
}

kubeconfig() { # <cert name> <file>
  local d=$RUN/pki
  cat >"$2" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: {server: "https://$NODE_IP:6443", certificate-authority: "$d/ca.crt"}
users:
- name: $1
  user: {client-certificate: "$d/$1.crt", client-key: "$d/$1.key"}
contexts:
- name: e2e
  context: {cluster: e2e, user: $1}
current-context: e2e
EOF
}

# --- network -------------------------------------------------------------------------------
network_up() {
  for s in "${SYSCTLS[@]}"; do
    printf '%s=%s\n' "$s" "$(sysctl -n "$s" 2>/dev/null || echo)" >>"$RUN/sysctls.before"
  done
  ip addr add "$NODE_IP/32" dev lo
  echo "addr" >>"$RUN/network"
  # Routed service traffic between pods on the bridge needs forwarding and bridged packets in
  # iptables (kube-proxy's DNAT); the chain below keeps that forwarding inside the bridge.
  sysctl -qw net.ipv4.ip_forward=1
  sysctl -qw net.bridge.bridge-nf-call-iptables=1
  iptables -N "$CHAIN"
  echo "chain" >>"$RUN/network"
  iptables -A "$CHAIN" -i "$BRIDGE" ! -o "$BRIDGE" -j DROP
  iptables -I FORWARD 1 -j "$CHAIN"
  mkdir -p "$RUN/cni/net.d" "$RUN/cni/ipam"
  cat >"$RUN/cni/net.d/10-fioprobe-e2e.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "fioprobe-e2e",
  "plugins": [
    {
      "type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local", "dataDir": "$RUN/cni/ipam",
        "ranges": [[{"subnet": "$POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
}

# --- images --------------------------------------------------------------------------------
# podman with its own storage under the cache (kept between runs: the warm image build) and
# host networking for builds (no podman network, no iptables rules of its own).
podman_() {
  podman --root "$CACHE_ROOT/podman/storage" --runroot "$CACHE_ROOT/podman/run" \
    --cgroup-manager cgroupfs --events-backend none "$@"
}

images() {
  local ctx=$RUN/image-ctx
  mkdir -p "$ctx"
  # The Dockerfile's base: debootstrap's minbase, plus (test image only) the CA certificates
  # and pip configuration of this machine's TLS-intercepting package proxy.
  local base_id
  base_id=$(sha256sum "$ROOTFS_TAR" /usr/local/share/ca-certificates/*.crt /etc/pip.conf 2>/dev/null |
    sha256sum | cut -c1-12)
  if ! podman_ image exists "localhost/fioprobe-e2e/base:$base_id"; then
    say "importing the bookworm base image"
    local t_base=$SECONDS
    rm -rf "$ctx/base"
    mkdir -p "$ctx/base/usr/local/share/ca-certificates" "$ctx/base/etc"
    cp /usr/local/share/ca-certificates/*.crt "$ctx/base/usr/local/share/ca-certificates/" 2>/dev/null || true
    [[ -f /etc/pip.conf ]] && cp /etc/pip.conf "$ctx/base/etc/pip.conf"
    cp "$ROOTFS_TAR" "$ctx/base.tar"
    # Files only: a second entry for a directory already in the tarball breaks the import.
    (cd "$ctx/base" && find . -type f | sort >"$ctx/base.files")
    tar -C "$ctx/base" --no-recursion -rf "$ctx/base.tar" -T "$ctx/base.files"
    podman_ import "$ctx/base.tar" "localhost/fioprobe-e2e/base:$base_id" >/dev/null
    rm -f "$ctx/base.tar"
    echo "base_image_import_seconds $((SECONDS - t_base))" >>"$RUN/measurements"
  fi
  podman_ tag "localhost/fioprobe-e2e/base:$base_id" docker.io/library/debian:12-slim

  # The project's image from its unmodified Dockerfile through `make image`, the command the
  # README gives users, named as the manifests name it (manifests/config.libsonnet's image over
  # the defaults; the tag: fioprobe's version); from the base imported above, pulling nothing.
  local probe_image
  say "building the probe image with make image"
  local t0=$SECONDS
  probe_image=$(make -C "$REPO" --no-print-directory image IMAGE_PULL=never \
    CONTAINER_TOOL="podman --root $CACHE_ROOT/podman/storage --runroot $CACHE_ROOT/podman/run --cgroup-manager cgroupfs --events-backend none" \
    IMAGE_BUILD_FLAGS="--runtime runc --network host --ulimit nofile=1024:1024" \
    2>"$RUN/logs/image-build.log" | tail -1) && [[ -n $probe_image ]] ||
    { tail -30 "$RUN/logs/image-build.log" >&2; die "image build failed"; }
  say "built $probe_image"
  echo "image_build_seconds $((SECONDS - t0))" >>"$RUN/measurements"
  echo "image_size_bytes $(podman_ image inspect --format '{{.Size}}' "$probe_image")" >>"$RUN/measurements"
  echo "$probe_image" >"$RUN/probe-image"

  # The Pushgateway: Debian's, under the name the manifests use.
  local pgw_image
  pgw_image=$(awk -F"'" '/image: .quay.io\/prometheus\/pushgateway/ {print $2; exit}' \
    "$REPO/manifests/lib/defaults.libsonnet")
  [[ -n $pgw_image ]] || die "cannot read the Pushgateway image from manifests/lib/defaults.libsonnet"
  cat >"$ctx/Containerfile.pushgateway" <<'EOF'
FROM docker.io/library/debian:12-slim
RUN apt-get update && apt-get install -y --no-install-recommends prometheus-pushgateway \
    && rm -rf /var/lib/apt/lists/*
ENTRYPOINT ["/usr/bin/prometheus-pushgateway"]
EOF
  t0=$SECONDS
  podman_ build --runtime runc --network host --pull=never --ulimit nofile=1024:1024 \
    -t "$pgw_image" -f "$ctx/Containerfile.pushgateway" "$ctx" >"$RUN/logs/pushgateway-build.log" 2>&1 ||
    { tail -30 "$RUN/logs/pushgateway-build.log" >&2; die "Pushgateway image build failed"; }
  echo "pushgateway_image_build_seconds $((SECONDS - t0))" >>"$RUN/measurements"

  # pause and CoreDNS: one static binary each.
  mkdir -p "$ctx/pause" "$ctx/coredns"
  cp "$PAUSE_BIN/pause" "$ctx/pause/"
  printf 'FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n' >"$ctx/pause/Containerfile"
  podman_ build --runtime runc --network none -t localhost/fioprobe-e2e/pause:1 \
    -f "$ctx/pause/Containerfile" "$ctx/pause" >>"$RUN/logs/image-build.log" 2>&1
  cp "$COREDNS_BIN/coredns" "$ctx/coredns/"
  printf 'FROM scratch\nCOPY coredns /coredns\nENTRYPOINT ["/coredns"]\n' >"$ctx/coredns/Containerfile"
  podman_ build --runtime runc --network none -t localhost/fioprobe-e2e/coredns:1 \
    -f "$ctx/coredns/Containerfile" "$ctx/coredns" >>"$RUN/logs/image-build.log" 2>&1

  t0=$SECONDS
  for image in "$probe_image" "$pgw_image" localhost/fioprobe-e2e/pause:1 localhost/fioprobe-e2e/coredns:1; do
    podman_ save --format docker-archive -o "$ctx/image.tar" "$image" >/dev/null
    ctr --address "$RUN/containerd/containerd.sock" -n k8s.io images import "$ctx/image.tar" >/dev/null
    rm -f "$ctx/image.tar"
  done
  echo "image_load_seconds $((SECONDS - t0))" >>"$RUN/measurements"
  # Earlier builds of the same names are left untagged: drop them, or the cache grows by a
  # layer per run.
  podman_ image prune -f >/dev/null
}

# --- components ----------------------------------------------------------------------------
containerd_up() {
  mkdir -p "$RUN/containerd"
  cat >"$RUN/containerd/config.toml" <<EOF
version = 2
root = "$RUN/containerd/root"
state = "$RUN/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$RUN/containerd/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$RUN/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/fioprobe-e2e/pause:1"
  # Root here lacks CAP_SYS_RESOURCE: without this, runc fails to create every sandbox.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$RUN/cni/net.d"
EOF
  # A pull of an image that was not loaded must fail here, not reach a registry.
  start containerd env HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 NO_PROXY= \
    containerd --config "$RUN/containerd/config.toml"
  wait_until 30 "containerd socket" test -S "$RUN/containerd/containerd.sock"
}

control_plane_up() {
  # Under a name of its own: a `pkill -x etcd` elsewhere on a shared machine (another suite's
  # setup) must not end this cluster's etcd.
  mkdir -p "$RUN/bin"
  ln -sf "$(command -v etcd)" "$RUN/bin/fioprobe-e2e-etcd"
  start etcd "$RUN/bin/fioprobe-e2e-etcd" --name e2e --data-dir "$RUN/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls http://127.0.0.1:23800 --initial-advertise-peer-urls http://127.0.0.1:23800 \
    --initial-cluster e2e=http://127.0.0.1:23800 --unsafe-no-fsync
  local p=$RUN/pki
  start kube-apiserver "$KUBE_TOOLS/bin/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" --bind-address="$NODE_IP" --advertise-address="$NODE_IP" \
    --secure-port=6443 --cert-dir="$p" --tls-cert-file="$p/apiserver.crt" \
    --tls-private-key-file="$p/apiserver.key" --client-ca-file="$p/ca.crt" \
    --service-account-key-file="$p/sa.pub" --service-account-signing-key-file="$p/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc \
    --service-cluster-ip-range="$SERVICE_CIDR" --authorization-mode=Node,RBAC \
    --enable-admission-plugins=NodeRestriction --profiling=false \
    --kubelet-client-certificate="$p/apiserver-kubelet.crt" --kubelet-client-key="$p/apiserver-kubelet.key" \
    --kubelet-certificate-authority="$p/ca.crt" --kubelet-preferred-address-types=InternalIP
  wait_until 90 "kube-apiserver /readyz" kubectl get --raw /readyz
  start kube-controller-manager "$KUBE_BIN/kube-controller-manager" \
    --kubeconfig="$RUN/admin.kubeconfig" --authentication-kubeconfig="$RUN/admin.kubeconfig" \
    --authorization-kubeconfig="$RUN/admin.kubeconfig" --leader-elect=false \
    --bind-address=127.0.0.1 --secure-port=10257 --cert-dir="$RUN/kcm" \
    --service-account-private-key-file="$p/sa.key" --root-ca-file="$p/ca.crt" \
    --use-service-account-credentials=true --service-cluster-ip-range="$SERVICE_CIDR" \
    --cluster-signing-cert-file="$p/ca.crt" --cluster-signing-key-file="$p/ca.key" \
    --controllers='*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller'
  start kube-scheduler "$KUBE_BIN/kube-scheduler" --kubeconfig="$RUN/admin.kubeconfig" \
    --authentication-kubeconfig="$RUN/admin.kubeconfig" --authorization-kubeconfig="$RUN/admin.kubeconfig" \
    --leader-elect=false --bind-address=127.0.0.1 --secure-port=10259 --cert-dir="$RUN/scheduler"
}

node_up() {
  mkdir -p "$RUN/kubelet" "$RUN/pod-logs"
  printf 'search cluster.local\n' >"$RUN/resolv.conf"
  cat >"$RUN/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine's cgroups are v1 and have no systemd; swap is whatever the host has.
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://$RUN/containerd/containerd.sock
address: $NODE_IP
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
tlsCertFile: $RUN/pki/kubelet-server.crt
tlsPrivateKeyFile: $RUN/pki/kubelet-server.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $RUN/pki/ca.crt}
authorization: {mode: Webhook}
clusterDNS: [$DNS_SERVICE_IP]
clusterDomain: cluster.local
resolvConf: $RUN/resolv.conf
podLogsDir: $RUN/pod-logs
podCIDR: $POD_CIDR
# The run directory is on the machine's disk with other users: never evict for its fill level.
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
syncFrequency: 10s
fileCheckFrequency: 10s
EOF
  start kubelet "$KUBE_BIN/kubelet" --config="$RUN/kubelet-config.yaml" \
    --kubeconfig="$RUN/kubelet.kubeconfig" --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" \
    --root-dir="$RUN/kubelet" --cert-dir="$RUN/kubelet/pki" --v=1
  cat >"$RUN/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: $RUN/admin.kubeconfig}
hostnameOverride: $NODE_NAME
bindAddress: $NODE_IP
clusterCIDR: $POD_CIDR
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: [$NODE_IP/32]
# Leave the host's conntrack sysctls and route_localnet alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false}
EOF
  start kube-proxy "$KUBE_BIN/kube-proxy" --config="$RUN/kube-proxy.yaml"
  wait_until 120 "node $NODE_NAME Ready" \
    bash -c "'$KUBECTL' --kubeconfig='$RUN/admin.kubeconfig' get node '$NODE_NAME' -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
}

addons_up() {
  kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    .:53 {
        errors
        health :8080
        ready :8181
        kubernetes cluster.local in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
        }
        cache 30
        loop
        reload
        loadbalance
    }
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: coredns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  replicas: 1
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      serviceAccountName: coredns
      dnsPolicy: Default
      containers:
      - name: coredns
        image: localhost/fioprobe-e2e/coredns:1
        imagePullPolicy: Never
        args: [-conf, /etc/coredns/Corefile]
        ports:
        - {name: dns, containerPort: 53, protocol: UDP}
        - {name: dns-tcp, containerPort: 53, protocol: TCP}
        readinessProbe: {httpGet: {path: /ready, port: 8181}, periodSeconds: 2}
        securityContext:
          allowPrivilegeEscalation: false
          capabilities: {add: [NET_BIND_SERVICE], drop: [ALL]}
          readOnlyRootFilesystem: true
        volumeMounts: [{name: config, mountPath: /etc/coredns, readOnly: true}]
      volumes: [{name: config, configMap: {name: coredns}}]
---
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  clusterIP: $DNS_SERVICE_IP
  selector: {k8s-app: kube-dns}
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
EOF
}

# Disks with a fault, as the node would have them (the e2e configuration, scripts/e2e/config.jsonnet,
# probes each): two slow ones, FUSE passthroughs adding SLOW_FSYNC_MS to every fsync
# (fioprobe.demo.slowdisk, the demo's; the daemons are recorded in the pid file like every process), one
# for a StorageClass and one holding the node's etcd probe directory; a full one (a 16 MiB
# tmpfs with 14 MiB taken: less free space than a profile's budget plus fioprobe's margin);
# a read-only one (a tmpfs mounted read-only, owned and moded as fsGroup had left it before it
# turned read-only).
# The slow disks pass through to a tmpfs, not to this machine's disk: its own fsync latency
# (10 ms and more at a p99 while other suites run) would raise the alerts without any delay,
# and the tests would prove nothing about the injected one. In memory, the injected delay is
# the only slowness.
SLOW_FSYNC_MS=15
slow_disk() { # <mount point>: backed by a directory of $RUN/disks/backing
  local mnt=$1 backing
  backing=$RUN/disks/backing/$(basename "$mnt")
  mkdir -p "$mnt" "$backing"
  start "slowdisk-$(basename "$mnt")" "$REPO/.venv/bin/python" -m fioprobe.demo.slowdisk \
    --backing "$backing" --mountpoint "$mnt" --fsync-delay-ms "$SLOW_FSYNC_MS"
  wait_until 30 "the slow disk at $mnt" mountpoint -q "$mnt"
}

fault_disks_up() {
  # Each probe run writes at most 4 MiB (the etcd-fsync profile's budget) and removes it.
  mkdir -p "$RUN/disks/backing"
  mount -t tmpfs -o size=64m,mode=0755 fioprobe-e2e-backing "$RUN/disks/backing"
  slow_disk "$RUN/pv/slow"
  slow_disk "$RUN/disks/etcd"
  mkdir -p "$RUN/pv/full" "$RUN/pv/readonly"
  mount -t tmpfs -o size=16m,mode=0755 fioprobe-e2e-full "$RUN/pv/full"
  fallocate -l 14m "$RUN/pv/full/filler"
  mount -t tmpfs -o ro,size=64m,mode=2775,gid=65532 fioprobe-e2e-readonly "$RUN/pv/readonly"
}

# Local PersistentVolumes behind no-provisioner StorageClasses named like the manifests'
# (gp2, gp3), the fault disks above (e2e-slow, e2e-full, e2e-readonly), three for the servers of
# a distributed benchmark (e2e-bench, tests/e2e/test_30_distributed.py) and a default class for
# the Pushgateways' PVCs and the Helm release's probe (scripts/e2e/helm-values.yaml): the
# kubelet applies fsGroup to local volumes as it does to EBS volumes.
storage_up() {
  fault_disks_up
  local docs="" sc
  for sc in gp2 gp3 e2e-slow e2e-full e2e-readonly e2e-bench standard; do
    local default=false
    [[ $sc == standard ]] && default=true
    docs+="---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: $sc
  annotations: {storageclass.kubernetes.io/is-default-class: \"$default\"}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
"
  done
  # A class whose provisioner does not exist: its claims stay Pending, with no ProvisioningFailed
  # (nothing answers), which the provisioning probe must report as a step past its deadline.
  docs+="---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: e2e-noprovisioner}
provisioner: example.com/fioprobe-e2e-none
volumeBindingMode: Immediate
"
  local spec
  # name class capacity
  for spec in "gp2-0 gp2 100Gi" "gp3-0 gp3 20Gi" "slow e2e-slow 1Gi" "full e2e-full 1Gi" \
    "readonly e2e-readonly 1Gi" "standard-0 standard 1Gi" "standard-1 standard 1Gi" \
    "standard-2 standard 1Gi" "standard-3 standard 1Gi" \
    "bench-0 e2e-bench 1Gi" "bench-1 e2e-bench 1Gi" "bench-2 e2e-bench 1Gi"; do
    read -r name sc cap <<<"$spec"
    mkdir -p "$RUN/pv/$name"
    docs+="---
apiVersion: v1
kind: PersistentVolume
metadata: {name: e2e-$name}
spec:
  capacity: {storage: $cap}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: $sc
  local: {path: $RUN/pv/$name}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [$NODE_NAME]}]
"
  done
  kubectl apply -f - >/dev/null <<<"$docs"
}

# --- local-path-provisioner: a dynamic provisioner behind the StorageClass `local-path` -------
# Its image: the static binary setup.sh built, copied into the e2e base image (no RUN step);
# the helper pods run the base image itself, under a name of its own. Both go into containerd
# in one archive (the base layer is the probe image's and is stored once).
LOCAL_PATH_HELPER_IMAGE=localhost/fioprobe-e2e/base:1
local_path_images() {
  LOCAL_PATH_IMAGE=localhost/fioprobe-e2e/local-path-provisioner:$LOCAL_PATH_VERSION
  local ctx=$RUN/image-ctx/local-path t0=$SECONDS
  mkdir -p "$ctx"
  cp "$LOCAL_PATH_BIN/local-path-provisioner" "$ctx/"
  printf '%s\n' 'FROM docker.io/library/debian:12-slim' \
    'COPY local-path-provisioner /usr/local/bin/local-path-provisioner' \
    'USER 65532:65532' 'ENTRYPOINT ["/usr/local/bin/local-path-provisioner"]' >"$ctx/Containerfile"
  podman_ build --runtime runc --network none --pull=never -t "$LOCAL_PATH_IMAGE" \
    -f "$ctx/Containerfile" "$ctx" >"$RUN/logs/local-path-image-build.log" 2>&1 ||
    { tail -30 "$RUN/logs/local-path-image-build.log" >&2; die "local-path-provisioner image build failed"; }
  podman_ tag docker.io/library/debian:12-slim "$LOCAL_PATH_HELPER_IMAGE"
  echo "local_path_image_build_seconds $((SECONDS - t0))" >>"$RUN/measurements"
  t0=$SECONDS
  podman_ save --quiet --multi-image-archive --format docker-archive -o "$ctx/images.tar" \
    "$LOCAL_PATH_IMAGE" "$LOCAL_PATH_HELPER_IMAGE" >/dev/null
  ctr --address "$RUN/containerd/containerd.sock" -n k8s.io images import "$ctx/images.tar" >/dev/null
  rm -rf "$ctx"
  echo "local_path_image_load_seconds $((SECONDS - t0))" >>"$RUN/measurements"
  podman_ image prune -f >/dev/null
}

# The namespace local-path-storage with its ServiceAccount, RBAC, ConfigMap and Deployment, and
# the StorageClass `local-path` (not the default): scripts/e2e/local-path.yaml with its images
# and the volumes' directory filled in. local_path_ready waits for the Deployment.
local_path_up() {
  local_path_images
  mkdir -p "$RUN/local-path"
  sed -e "s|@PROVISIONER_IMAGE@|$LOCAL_PATH_IMAGE|g" -e "s|@HELPER_IMAGE@|$LOCAL_PATH_HELPER_IMAGE|g" \
    -e "s|@VOLUME_DIR@|$RUN/local-path|g" "$HERE/local-path.yaml" >"$RUN/local-path.yaml"
  LOCAL_PATH_APPLIED=$SECONDS
  kubectl apply -f "$RUN/local-path.yaml" >/dev/null
}

local_path_ready() {
  wait_until 120 "local-path-provisioner Available" \
    kubectl -n local-path-storage wait --for=condition=Available deployment/local-path-provisioner --timeout=5s || {
    kubectl -n local-path-storage get pods -o wide >&2
    return 1
  }
  echo "local_path_ready_seconds $((SECONDS - LOCAL_PATH_APPLIED))" >>"$RUN/measurements"
}

# default_storageclass <name>: <name> becomes the default StorageClass, then every other class
# marked default stops being one (in this order, so that a PVC created meanwhile always gets a
# class: with two defaults, the DefaultStorageClass admission takes the newest).
DEFAULT_ANNOTATION=storageclass.kubernetes.io/is-default-class
default_storageclass() {
  local want=$1 sc
  kubectl get storageclass "$want" >/dev/null || die "no StorageClass $want"
  kubectl annotate --overwrite storageclass "$want" "$DEFAULT_ANNOTATION=true" >/dev/null
  for sc in $(kubectl get storageclass -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.annotations.storageclass\.kubernetes\.io/is-default-class}{"\n"}{end}' |
    awk -F= '$2 == "true" {print $1}'); do
    [[ $sc == "$want" ]] || kubectl annotate --overwrite storageclass "$sc" "$DEFAULT_ANNOTATION=false" >/dev/null
  done
  say "default StorageClass: $want"
}

up() {
  [[ ! -e $RUN/pids ]] || die "$RUN/pids exists: run '$0 down' first"
  load_paths
  mkdir -p "$RUN/logs"
  : >"$RUN/pids"
  : >"$RUN/network"
  : >"$RUN/measurements"
  [[ -d /var/log/containers ]] || echo "/var/log/containers" >>"$RUN/created-dirs"
  local t0=$SECONDS
  certs
  network_up
  containerd_up
  control_plane_up
  images
  node_up
  # The control-plane role, as kubeadm labels its nodes (the kubelet may not set
  # node-role.kubernetes.io/* on itself; the admin does): fioprobe's etcd probes find it by
  # this label. No taint: the single node also runs every other pod.
  kubectl label node "$NODE_NAME" node-role.kubernetes.io/control-plane= >/dev/null
  addons_up
  storage_up
  local_path_up
  wait_until 120 "CoreDNS ready" kubectl -n kube-system wait --for=condition=Available deployment/coredns --timeout=5s
  local_path_ready
  if [[ -n ${FIOPROBE_E2E_DEFAULT_STORAGECLASS:-} ]]; then
    default_storageclass "$FIOPROBE_E2E_DEFAULT_STORAGECLASS"
  fi
  echo "bringup_seconds $((SECONDS - t0))" >>"$RUN/measurements"
  say "cluster up in $((SECONDS - t0))s (kubeconfig: $RUN/admin.kubeconfig)"
}

# --- teardown --------------------------------------------------------------------------------
# Stops processes in reverse start order (TERM, then KILL after a bound), then whatever the
# kubelet and containerd left: container processes (shims), mounts, cgroups, network state.
kill_tree() { # <pid>: the process group started by `start`
  local pid=$1
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || return 0
  local i
  for i in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.2
  done
  kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
}

down() {
  [[ -d $RUN ]] || return 0
  set +e
  if [[ -f $RUN/pids ]]; then
    # containers first (their shims are in their own process groups), while containerd runs
    local name pid
    tac "$RUN/pids" | while read -r name pid; do
      [[ $name == kubelet ]] && kill_tree "$pid"
    done
    if [[ -S $RUN/containerd/containerd.sock ]]; then
      local task
      for task in $(ctr --address "$RUN/containerd/containerd.sock" -n k8s.io tasks ls -q 2>/dev/null); do
        ctr --address "$RUN/containerd/containerd.sock" -n k8s.io tasks kill -s KILL "$task" >/dev/null 2>&1
      done
      sleep 1
    fi
    tac "$RUN/pids" | while read -r name pid; do
      kill_tree "$pid"
    done
  fi
  # containerd-shim processes whose working state is in our run directory (started by our
  # containerd; each has the run directory's socket on its command line).
  local shim
  for shim in $(pgrep -f "containerd-shim.*-address $RUN/containerd/containerd.sock" 2>/dev/null); do
    kill -KILL "$shim" 2>/dev/null
  done
  # Processes started by the scenario tests (Prometheus, Alertmanager: their files are in the
  # run directory) if pytest could not stop them itself.
  local left
  for left in $(pgrep -f -- "$RUN/" 2>/dev/null); do
    kill_tree "$left"
  done
  # Kube-proxy's iptables rules, then ours.
  if [[ -f $CACHE_ROOT/paths.env ]]; then
    # shellcheck disable=SC1091
    source "$CACHE_ROOT/paths.env"
    [[ -f $RUN/kube-proxy.yaml ]] && "$KUBE_BIN/kube-proxy" --cleanup --config="$RUN/kube-proxy.yaml" >/dev/null 2>&1
  fi
  if grep -qx chain "$RUN/network" 2>/dev/null; then
    iptables -D FORWARD -j "$CHAIN" 2>/dev/null
    iptables -F "$CHAIN" 2>/dev/null
    iptables -X "$CHAIN" 2>/dev/null
  fi
  # Chains the kubelet and kube-proxy created (firewall, canaries, hints), in every table:
  # first the rules of the built-in chains that jump to them, then the chains.
  local table chain rule
  for table in filter nat mangle; do
    iptables -t "$table" -S 2>/dev/null | awk '$1 == "-A" && $2 !~ /^KUBE-/ && / -j KUBE-/' |
      while IFS= read -r rule; do
        # shellcheck disable=SC2086
        iptables -t "$table" ${rule/-A /-D } 2>/dev/null
      done
    for chain in $(iptables -t "$table" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^KUBE-/ {print $2}'); do
      iptables -t "$table" -F "$chain" 2>/dev/null
    done
    for chain in $(iptables -t "$table" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^KUBE-/ {print $2}'); do
      iptables -t "$table" -X "$chain" 2>/dev/null
    done
  done
  # Mounts under the run directory (volumes, container root filesystems, network namespaces),
  # deepest first. The local-path volumes (directories under $RUN/local-path, bind-mounted into
  # their pods) go with them and with the run directory; their PVs go with etcd's data.
  local m
  for m in $(awk -v r="$RUN/" 'index($5, r) == 1 {print $5}' /proc/self/mountinfo | sort -r); do
    umount -l "$m" 2>/dev/null
  done
  # Network namespaces of pods (bind mounts under /var/run/netns made by the CNI of containerd).
  for m in $(awk '$5 ~ /^\/run\/netns\/cni-/ {print $5}' /proc/self/mountinfo); do
    umount "$m" 2>/dev/null && rm -f "$m"
  done
  ip link del "$BRIDGE" 2>/dev/null
  if grep -qx addr "$RUN/network" 2>/dev/null; then
    ip addr del "$NODE_IP/32" dev lo 2>/dev/null
  fi
  if [[ -f $RUN/sysctls.before ]]; then
    local line
    while IFS= read -r line; do
      [[ ${line#*=} == "" ]] && continue
      sysctl -qw "$line" 2>/dev/null
    done <"$RUN/sysctls.before"
  fi
  # cgroups the kubelet and podman's builds made (v1: one tree per controller), leaves first.
  for m in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/*/kubepods.slice /sys/fs/cgroup/*/libpod_parent; do
    [[ -d $m ]] && find "$m" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  # Pod log links the kubelet made in the one directory it does not take from configuration.
  if [[ -d /var/log/containers ]]; then
    find /var/log/containers -maxdepth 1 -type l -lname "$RUN/*" -delete 2>/dev/null
    grep -qx /var/log/containers "$RUN/created-dirs" 2>/dev/null && rmdir /var/log/containers 2>/dev/null
  fi
  rm -rf "$RUN"
  [[ -d $RUN ]] && say "WARNING: could not remove all of $RUN (mounts still busy?)"
  set -e
  return 0
}

case ${1:-} in
  up) up ;;
  down) down ;;
  default-storageclass)
    [[ -n ${2:-} ]] || {
      echo "usage: $0 default-storageclass <name>" >&2
      exit 2
    }
    [[ -f $RUN/admin.kubeconfig ]] || die "no cluster in $RUN"
    load_paths
    default_storageclass "$2"
    ;;
  *)
    echo "usage: $0 up|down|default-storageclass <name>" >&2
    exit 2
    ;;
esac
