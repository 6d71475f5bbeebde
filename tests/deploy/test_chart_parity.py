"""The Helm chart and the jsonnet manifests cannot drift: for the same configuration they give
the same objects, field for field, but Helm's own labels and the namespaces Helm leaves to
the user (tests/support/chart.py says which).

Each configuration is one layer over manifests/config.libsonnet, which is also what the
chart's values.yaml holds (scripts/generate.d/32-chart.sh), rendered by the real `helm
template` and the real go-jsonnet generator. The variants are the switches a platform engineer
turns: the platform, the stream, Pushgateway auth and TLS, sharding, an existing Pushgateway,
the etcd probes off, named or found by their own role labels, StorageClasses with their own
schedule or StorageClass name, per-node probes,
each probe interval of the chart, monitoring toggles and labels, another namespace.
"""

from __future__ import annotations

import copy
import functools
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO
from support.benchmarks import QUALIFY_GP3
from support.chart import (
    CHART,
    HELM,
    PER_NODE,
    VARIANTS,
    benchmark_objects,
    chart_objects,
    compare,
    is_benchmark,
    manifest_objects,
)

#: Rendered into another namespace: the release's for the chart, `namespace` for jsonnet.
NAMESPACES = {"default": "fioprobe", "other-namespace": "storage-probes"}


@functools.cache
def _example_storage_classes() -> list[dict[str, Any]]:
    """manifests/config.libsonnet's StorageClasses: the chart names none by default (it probes
    the cluster's default class, which `helm template` cannot look up), so each layer gives
    both renderings the manifests' example classes."""
    done = subprocess.run(
        [str(REPO / ".tools" / "bin" / "go-jsonnet"), "-J", str(REPO), "-e",
         "(import 'manifests/config.libsonnet').storageClasses"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    classes: list[dict[str, Any]] = json.loads(done.stdout)
    return classes


def _values(overrides: dict[str, Any]) -> dict[str, Any]:
    """The chart's values for a manifests layer: the same, less the manifests' `namespace`,
    with the manifests' example StorageClasses where the layer names none."""
    values = {k: v for k, v in overrides.items() if k != "namespace"}
    values.setdefault("storageClasses", _example_storage_classes())
    return values


@pytest.fixture(scope="module", autouse=True)
def _helm() -> None:
    if not HELM.exists():
        pytest.fail(f"{HELM} missing: run `make setup` (scripts/setup.d/34-helm.sh)")


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_the_chart_renders_what_the_manifests_render(name: str, tmp_path: Path) -> None:
    overrides = VARIANTS[name]
    problems = compare(chart_objects(_values(overrides)), manifest_objects(overrides, tmp_path))
    assert problems == [], "\n".join(problems[:40])


#: The example of docs/DISTRIBUTED.md, with an IO depth sweep (the deadlines count its runs).
BENCHMARK: dict[str, Any] = {
    **QUALIFY_GP3,
    "plan": {**QUALIFY_GP3["plan"], "iodepths": [1, 4, 16]},
}

#: (the configuration, the benchmark's changes): what changes a benchmark's objects.
BENCHMARK_VARIANTS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "default": ({}, {}),
    "openshift": ({"platform": "openshift"}, {}),
    "sharded-pushgateway": ({"pushgateway": {"replicas": 3}}, {}),
    "existing-pushgateway": ({"pushgateway": {"url": "https://pgw.monitoring.svc:9443"}}, {}),
    "existing-pushgateway-addresses": (
        {"pushgateway": {"url": "http://pgw.example.internal:9091", "cidrs": ["10.20.0.0/16"]}},
        {},
    ),
    "no-push-keep-volumes-auth": (
        {"pushgateway": {"auth": {"enabled": True}}},
        {"push": False, "keepVolumes": True, "nodeSelector": {}},
    ),
    "one-phase-no-plan-defaults": (
        {"image": {"tag": "1.2.3"}, "probeUser": 1000, "dns": {"port": 5353}},
        {"plan": {"phases": ["randwrite"], "budget": {"bytes_per_server": "1g",
                                                      "seconds_per_server": 50}}},
    ),
    "empty-plan-longest-name": (
        {"namespace": "storage-probes"},
        {"name": "q" * 37, "servers": 1, "plan": {}},
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(BENCHMARK_VARIANTS))
def test_a_benchmark_renders_as_manifests_distributed_renders_it(name: str) -> None:
    """`benchmarks` in the values: each one's objects are components/distributed.libsonnet's
    for the same configuration, and the rest of the release is as without it."""
    overrides, change = BENCHMARK_VARIANTS[name]
    benchmark = {**BENCHMARK, **change}
    namespace = overrides.get("namespace", "fioprobe")
    values = _values(overrides)
    chart = chart_objects({**values, "benchmarks": [benchmark]}, namespace=namespace)
    ours = {k: v for k, v in chart.items() if is_benchmark(v)}
    problems = compare(ours, benchmark_objects(benchmark, overrides))
    assert problems == [], "\n".join(problems[:40])
    rest = {k: v for k, v in chart.items() if not is_benchmark(v)}
    assert compare(rest, chart_objects(values, namespace=namespace)) == []


def test_two_benchmarks_in_one_release() -> None:
    other = {**BENCHMARK, "name": "qualify-io2", "storageclass": "io2"}
    chart = chart_objects({"benchmarks": [BENCHMARK, other]})
    expected = {**benchmark_objects(BENCHMARK, {}), **benchmark_objects(other, {})}
    problems = compare({k: v for k, v in chart.items() if is_benchmark(v)}, expected)
    assert problems == [], "\n".join(problems[:40])


def test_the_odf_examples_are_one_configuration(tmp_path: Path) -> None:
    """charts/fioprobe/examples/odf-values.yaml and manifests/examples/odf.libsonnet: the same
    keys, and the same objects rendered both ways."""
    values = yaml.safe_load((CHART / "examples" / "odf-values.yaml").read_text())
    jsonnet = subprocess.run(
        [str(REPO / ".tools" / "bin" / "go-jsonnet"),
         str(REPO / "manifests" / "examples" / "odf.libsonnet")],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    overrides = json.loads(jsonnet.stdout)
    assert values == overrides
    problems = compare(chart_objects(values), manifest_objects(overrides, tmp_path))
    assert problems == [], "\n".join(problems[:40])


def test_in_another_namespace_too(tmp_path: Path) -> None:
    overrides = {"namespace": "storage-probes", **PER_NODE}
    chart = chart_objects(_values(overrides), namespace="storage-probes")
    problems = compare(chart, manifest_objects(overrides, tmp_path))
    assert problems == [], "\n".join(problems[:40])


def test_a_field_changed_on_one_side_is_a_difference(tmp_path: Path) -> None:
    """The comparison sees a changed field, a missing object and an extra label."""
    chart = chart_objects(_values({}))
    manifests = manifest_objects({}, tmp_path)
    assert compare(chart, manifests) == []
    changed = copy.deepcopy(chart)
    cronjob = next(k for k in changed if k[0] == "CronJob")
    changed[cronjob]["spec"]["startingDeadlineSeconds"] += 1
    del changed[next(k for k in changed if k[0] == "ServiceMonitor")]
    rule = next(k for k in changed if k[0] == "PrometheusRule")
    changed[rule]["metadata"]["labels"]["extra"] = "x"
    problems = compare(changed, manifests)
    assert any("startingDeadlineSeconds" in p for p in problems), problems
    assert any("ServiceMonitor" in p and "only in the manifests" in p for p in problems), problems
    assert any("labels.extra: only in chart" in p for p in problems), problems


def test_a_template_changed_alone_fails_the_comparison(tmp_path: Path) -> None:
    """A chart whose CronJob template drifts from components/probes.libsonnet is caught."""
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart)
    template = chart / "templates" / "probes" / "cronjob.yaml"
    text = template.read_text()
    assert "terminationGracePeriodSeconds: 30" in text
    template.write_text(
        text.replace("terminationGracePeriodSeconds: 30", "terminationGracePeriodSeconds: 31")
    )
    problems = compare(
        chart_objects(_values({}), chart=chart), manifest_objects({}, tmp_path / "out")
    )
    assert problems and all("terminationGracePeriodSeconds" in p for p in problems), problems
