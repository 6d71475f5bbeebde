"""The jsonnet manifests as the tests use them: rendered by the real generator
(scripts/generate.d/30-manifests.sh, go-jsonnet) into a directory, read back one object per
file, the pod template of a workload, and the problems the configuration's checks report.

The same rendering compared with the Helm chart's is support/chart.py.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from support.paths import GO_JSONNET, REPO

MANIFESTS = REPO / "manifests"
GENERATED = MANIFESTS / "generated"
GENERATE = REPO / "scripts" / "generate.d" / "30-manifests.sh"
#: How every problem the configuration's checks (manifests/lib/params.libsonnet) report begins.
PREFIX = "fioprobe manifests config: "

#: Generated files that are not Kubernetes objects, never in the kustomization: the
#: continuous stream's scrape configuration, for a Prometheus without prometheus-operator.
NOT_OBJECTS = {"continuous-scrape-config.yaml"}


def load_objects(directory: Path = GENERATED) -> dict[str, dict[str, Any]]:
    """{file name: object}; every generated file but NOT_OBJECTS holds exactly one object."""
    objects = {}
    for path in sorted(directory.glob("*.yaml")):
        if path.name in NOT_OBJECTS:
            continue
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        assert len(docs) == 1, f"{path.name}: expected one object, got {len(docs)}"
        assert docs[0].get("apiVersion") and docs[0].get("kind"), path.name
        objects[path.name] = docs[0]
    return objects


def pod_spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The pod template of a workload, or None for objects that run no pods."""
    if obj["kind"] == "CronJob":
        return obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    if obj["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
        return obj["spec"]["template"]["spec"]
    return None


def render(tmp_path: Path, overrides: str | None = None) -> Path:
    """Render the manifests into tmp_path with the real generator script."""
    args = ["bash", str(GENERATE), str(tmp_path)]
    if overrides:
        args += ["--tla-code", f"overrides={overrides}"]
    subprocess.run(args, check=True, capture_output=True, timeout=120)
    return tmp_path / "generated"


def jsonnet(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(GO_JSONNET), "-J", str(REPO), "-e", code],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def problems(overrides: str) -> list[str]:
    """The configuration problems jsonnet reports for `overrides` (jsonnet source), in order."""
    proc = jsonnet(
        f"(import 'manifests/lib/monitoring-config.libsonnet').merged({{}}, {overrides})"
    )
    assert proc.returncode != 0, f"accepted: {overrides}"
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("RUNTIME ERROR: " + PREFIX), proc.stderr
    message = [lines[0].removeprefix("RUNTIME ERROR: ")]
    message += [line for line in lines[1:] if line.startswith(PREFIX)]
    return [line.removeprefix(PREFIX) for line in message]
