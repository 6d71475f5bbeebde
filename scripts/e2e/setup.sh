#!/usr/bin/env bash
# Installs and builds everything the end-to-end cluster needs (`make e2e`), idempotently:
#   - Debian packages: containerd, runc, podman, debootstrap, CNI plugins, iptables, conntrack;
#   - from Go modules: kubelet, kube-controller-manager, kube-scheduler, kube-proxy
#     (scripts/e2e/kube, the same k8s.io/kubernetes pin as the project's kube-apiserver),
#     a minimal CoreDNS (scripts/e2e/coredns), the pause program (scripts/e2e/pause) and
#     local-path-provisioner, the dynamic provisioner of the `local-path` StorageClass
#     (scripts/e2e/local-path, github.com/rancher/local-path-provisioner pinned in its go.mod);
#   - a Debian bookworm minbase root filesystem made by debootstrap (the mirror apt already
#     uses), the base of every image of the cluster.
# Builds are cached under ${XDG_CACHE_HOME:-~/.cache}/fioprobe-e2e/<what>-<hash of inputs>/, so a
# second run does nothing. Only package registries are contacted (apt, the Go module proxy).
set -euo pipefail
SELF=$(realpath "$0")
HERE=$(dirname "$SELF")
cd "$HERE/../.."
CACHE_ROOT=${XDG_CACHE_HOME:-$HOME/.cache}/fioprobe-e2e
mkdir -p "$CACHE_ROOT"
say() { printf 'e2e-setup: %s\n' "$*"; }
# Seconds each step took when it had work to do, for docs/MANIFESTS.md's cold numbers
# (`make e2e` prints them with its measurements).
TIMES=$CACHE_ROOT/last-setup-steps
: >"$TIMES"
timed() { # <step name> <command...>: its status is the command's
  local step=$1 t0=$SECONDS rc=0
  shift
  "$@" || rc=$?
  echo "setup_step_seconds{$step} $((SECONDS - t0))" >>"$TIMES"
  return "$rc"
}

# --- Debian packages ---------------------------------------------------------------------
APT_PACKAGES=(containerd runc podman debootstrap containernetworking-plugins iptables conntrack
  iproute2 util-linux fuse3)
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if ((${#missing[@]})); then
  say "installing Debian packages: ${missing[*]}"
  apt_t0=$SECONDS
  export DEBIAN_FRONTEND=noninteractive
  # policy-rc.d: no package may start its service here; the cluster starts its own containerd
  # with its own configuration and state directories.
  policy=/usr/sbin/policy-rc.d
  created_policy=false
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod +x "$policy"
    created_policy=true
  fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  if $created_policy; then rm -f "$policy"; fi
  echo "setup_step_seconds{debian-packages} $((SECONDS - apt_t0))" >>"$TIMES"
fi

# --- Go builds ---------------------------------------------------------------------------
# One cache entry per module: its go.mod/go.sum/sources and the link flags name the entry, so
# a change to them rebuilds and an unchanged tree reuses it (editing this script does not).
build_module() { # <name> <module dir> <output dir var> <CGO_ENABLED> <packages...>
  local name=$1 dir=$2 var=$3 cgo=$4
  shift 4
  local hash entry
  local inputs=("$dir"/go.mod "$dir"/*.go)
  [[ -f $dir/go.sum ]] && inputs+=("$dir/go.sum")
  hash=$( (cat "${inputs[@]}" && echo "$LDFLAGS $cgo $*") | sha256sum | cut -c1-12)
  entry=$CACHE_ROOT/$name-$hash
  if [[ ! -f $entry/.complete ]]; then
    say "building $name (go build; cached afterwards)"
    local tmp=$entry.tmp.$$
    rm -rf "$tmp"
    mkdir -p "$tmp"
    (cd "$dir" && timed "$name" env CGO_ENABLED="$cgo" go build -trimpath -ldflags "$LDFLAGS" -o "$tmp/" "$@")
    touch "$tmp/.complete"
    rm -rf "$entry"
    mv "$tmp" "$entry"
  fi
  printf -v "$var" '%s' "$entry"
}

kube_version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' scripts/e2e/kube/go.mod)
minor=$(cut -d. -f2 <<<"$kube_version")
LDFLAGS="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  LDFLAGS+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
done
# Cold (empty Go build cache): about 30 minutes on 2 busy cores; with the packages the
# kube-apiserver build of scripts/setup.d already cached, a few minutes. That sharing needs the
# same build settings as that build, cgo included (Go's default, 1 where a C compiler is): a
# package's cache key covers it, and nearly every package depends on `net`, which cgo changes.
# These binaries run on the host, so dynamic linking is fine; the two below go into images
# FROM scratch and must be static.
kube_cgo=$(go env CGO_ENABLED)
build_module "kube-$kube_version" scripts/e2e/kube KUBE_BIN "$kube_cgo" \
  k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy
LDFLAGS="-s -w"
build_module coredns scripts/e2e/coredns COREDNS_BIN 0 .
build_module pause scripts/e2e/pause PAUSE_BIN 0 .
# local-path-provisioner as its own release builds it (scripts/build: static, cgo off, the
# version stamped into main.VERSION); it goes into an image on the e2e base. Its client-go is
# v0.30, so it shares hardly a package with the kube build above and builds nearly from scratch:
# on 2 cores beside other suites (load 4 to 7), 173 s right after the kube build; 13 s + 292 s
# with empty module and build caches. `go install ...@v0.0.30` is accepted by the module proxy
# too; the wrapper module keeps its go.sum in the repository, as the other builds do.
lpp_version=$(awk '$1 == "require" && $2 == "github.com/rancher/local-path-provisioner" {print $3}' \
  scripts/e2e/local-path/go.mod)
LDFLAGS="-s -w -X main.VERSION=$lpp_version"
build_module "local-path-provisioner-$lpp_version" scripts/e2e/local-path LOCAL_PATH_BIN 0 \
  github.com/rancher/local-path-provisioner

# --- Debian root filesystem ---------------------------------------------------------------
# minbase bookworm from the mirror apt uses; a tarball that `podman import` turns into the
# Dockerfile's base image. Rebuilt when this script changes.
mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}
rootfs_hash=$(printf '%s minbase bookworm v1' "$mirror" | sha256sum | cut -c1-12)
ROOTFS_TAR=$CACHE_ROOT/bookworm-minbase-$rootfs_hash.tar
if [[ ! -f $ROOTFS_TAR ]]; then
  say "debootstrap --variant=minbase bookworm ($mirror)"
  tmp=$(mktemp -d "$CACHE_ROOT/rootfs.XXXXXX")
  timed debootstrap debootstrap --variant=minbase bookworm "$tmp/root" "$mirror" >"$tmp/log" 2>&1 ||
    { tail -20 "$tmp/log" >&2; rm -rf "$tmp"; exit 1; }
  rm -rf "$tmp"/root/var/cache/apt/archives/*.deb "$tmp"/root/var/lib/apt/lists/*
  tar -C "$tmp/root" -cf "$tmp/rootfs.tar" .
  mv "$tmp/rootfs.tar" "$ROOTFS_TAR"
  rm -rf "$tmp"
fi

# Where the cluster scripts find everything (sourced by scripts/e2e/cluster.sh).
cat >"$CACHE_ROOT/paths.env" <<EOF
KUBE_BIN=$KUBE_BIN
COREDNS_BIN=$COREDNS_BIN
PAUSE_BIN=$PAUSE_BIN
LOCAL_PATH_BIN=$LOCAL_PATH_BIN
LOCAL_PATH_VERSION=$lpp_version
ROOTFS_TAR=$ROOTFS_TAR
KUBE_VERSION=$kube_version
EOF
