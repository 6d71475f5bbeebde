#!/usr/bin/env bash
# `make image`: the probe image from the Dockerfile, for the machine's own architecture, with
# podman or docker, named as the manifests and the chart name it (image.name:image.tag of
# manifests/config.libsonnet over the defaults, publish.json's image and fioprobe's version),
# unless IMAGE=name:tag is given. `make e2e` builds through this script, so the command a user
# runs is the tested one.
#
# Settings (environment or make variables):
#   IMAGE            the name:tag to build (default: the manifests' image, as above)
#   CONTAINER_TOOL   podman or docker, with any global options (default: podman if present,
#                    else docker); e2e: podman with its own storage
#   IMAGE_PULL       never: build only from a base image already present (e2e: the Debian
#                    base it imports; nothing is pulled); default: the tool's own, which pulls
#                    debian:12-slim only when it is missing
#   IMAGE_BUILD_FLAGS further `build` options (e2e: --runtime runc --network host)
# Prints the image's name on the last line of its output.
set -euo pipefail
cd "$(dirname "$(realpath "$0")")/.."
die() { printf 'make image: %s\n' "$*" >&2; exit 1; }

image=${IMAGE:-}
if [[ -z $image ]]; then
  # go-jsonnet from make setup, else Debian's jsonnet (make setup-core installs it).
  evaluate=.tools/bin/go-jsonnet
  [[ -x $evaluate ]] || evaluate=$(command -v jsonnet) ||
    die "no jsonnet to read the manifests' image with: run make setup-core, or give IMAGE=name:tag"
  image=$("$evaluate" -J . -J vendor -S -e \
    "local i = (import 'manifests/main.libsonnet')().config.image; i.name + ':' + i.tag") ||
    die "cannot read image.name and image.tag from manifests/config.libsonnet"
fi
[[ $image =~ ^[a-z0-9]([a-z0-9._/:-]*[a-z0-9])?:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]] ||
  die "IMAGE must be name:tag, got '$image'"

tool=${CONTAINER_TOOL:-}
if [[ -z $tool ]]; then
  if command -v podman >/dev/null; then tool=podman
  elif command -v docker >/dev/null; then tool=docker
  else die "neither podman nor docker is installed; install one, or set CONTAINER_TOOL"
  fi
fi
read -r -a tool_words <<<"$tool"
command -v "${tool_words[0]}" >/dev/null || die "CONTAINER_TOOL: ${tool_words[0]} is not installed"
read -r -a extra <<<"${IMAGE_BUILD_FLAGS:-}"
pull=()
case ${IMAGE_PULL:-} in
  '') ;;
  never) pull=(--pull=never) ;;
  *) die "IMAGE_PULL must be never or unset, got '$IMAGE_PULL'" ;;
esac

printf 'make image: building %s with %s\n' "$image" "${tool_words[0]}" >&2
"${tool_words[@]}" build "${pull[@]}" "${extra[@]}" -t "$image" -f Dockerfile . >&2
echo "$image"
