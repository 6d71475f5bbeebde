# fioprobe: the targets a newcomer needs. `make demo` and `make test` set everything up first.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
export PATH := $(CURDIR)/.tools/bin:$(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: setup setup-core demo test image e2e e2e-first-install e2e-upgrade ceph lint generate bench soak \
	fidelity-stream
setup:
	@bash scripts/setup.sh

## What the demo needs: Debian packages, the virtualenv, Go linters (no test-only extras).
setup-core:
	@bash scripts/setup.sh --core

## The main job on an embedded default: local Pushgateway + Prometheus, etcd-fsync probes on a
## local directory, live summary. Ctrl-C stops everything.
demo: setup-core
	@$(PY) -m fioprobe demo

## The whole test suite (what .ci/run calls).
test: setup lint
	@bash scripts/run-tests.sh

## The probe image from the Dockerfile, for this machine's architecture, with podman or docker,
## named as the manifests and the chart name it (IMAGE=name:tag to name it yourself;
## CONTAINER_TOOL, IMAGE_PULL=never, IMAGE_BUILD_FLAGS: scripts/image.sh). `make e2e` builds
## through it.
image:
	@bash scripts/image.sh

## fioprobe on a real single-node Kubernetes cluster built here (scripts/e2e/run.sh): the image
## from the Dockerfile, `kubectl apply -k`, CronJobs firing, metrics in Prometheus; then, once
## those are removed, the chart's first install with one interval of each wait. Root only, and
## only on a disposable machine: it refuses unless CI=true or FIOPROBE_E2E_ALLOW=1.
e2e: setup
	@bash scripts/e2e/run.sh

## The first install on a cluster of its own (tests/e2e/first_install): `helm install` with the
## chart's defaults on a node that only its role label marks as etcd's, a real provisioner behind
## the default StorageClass; what a new user sees, each quiet wait four intervals long (`make e2e`
## runs it with one). Root and a disposable machine, as `make e2e`.
e2e-first-install: setup
	@FIOPROBE_E2E_SUITE=first-install bash scripts/e2e/run.sh

## The upgrade from the chart at 438fcbc (etcd probes as CronJobs on named nodes, tests/e2e/data)
## with its users' values to this checkout's chart (tests/e2e/upgrade), on a cluster of its own;
## about 20 minutes (the old chart's 5-minute interval). Root and a disposable machine.
e2e-upgrade: setup
	@FIOPROBE_E2E_SUITE=upgrade bash scripts/e2e/run.sh

## The Ceph scenarios (tests/ceph) on a real single-host Ceph 16.2 the tests build under one
## work directory (scripts/ceph/run.sh): healthy, an OSD killed, degraded, below min_size, full,
## recovery; then a check that no daemon, mount or loop device was left. Root only; never beside
## another suite. Not part of `make test` (docs/CEPH.md says why and how long it takes).
ceph: setup
	@bash scripts/ceph/run.sh

## ruff, mypy over the package (settings in pyproject.toml; it checks exporter/fioprobe of this
## checkout, whatever the venv's editable install names), jsonnetfmt + jsonnet-lint over every
## jsonnet file (scripts/lint-jsonnet.sh), and the rendered rules: promtool check rules, the files
## loaded together never repeating a group, pint offline (scripts/lint-mixin.sh, .pint.hcl);
## grafana/dashboard-linter --strict over every rendered dashboard (scripts/lint-dashboards.sh,
## dashboards/.lint); actionlint with shellcheck over the release workflow
## (scripts/lint-workflows.sh).
lint: setup
	@$(VENV)/bin/ruff check exporter tests bench scripts
	@$(VENV)/bin/ruff format --check exporter tests bench scripts
	@$(VENV)/bin/mypy --config-file pyproject.toml
	@bash scripts/lint-jsonnet.sh
	@bash scripts/lint-mixin.sh
	@bash scripts/lint-dashboards.sh
	@bash scripts/lint-workflows.sh

## Regenerate every committed generated file (rules, dashboards, manifests, README metrics).
generate: setup
	@bash scripts/generate.sh

bench: setup
	@bash scripts/run-bench.sh

## The continuous stream against real etcd on the same filesystem (bench/fidelity_stream.py):
## eight disk conditions of 8 minutes each, about 70 minutes; root, alone on the machine; not in
## `make test` or CI. Writes its section of docs/FIDELITY.md. ARGS='--conditions tmpfs' for a
## subset (about 9 minutes per condition).
fidelity-stream: setup
	@PYTHONPATH=$(CURDIR)/tests:$(CURDIR)/bench $(PY) bench/fidelity_stream.py $(ARGS)

## Tests too long for `make test` (pytest marker `soak`, minutes each; root for the FUSE disk):
## 60 etcd-fsync probes in a row on the slow FUSE disk with both CPUs busy.
soak: setup
	@FIOPROBE_SOAK=1 $(PY) -m pytest -m soak tests/probe/test_soak_fuse.py -q
