"""Values that cannot work are refused at install, by every door, naming the key and what is
allowed.

Why: a volume type fioprobe does not model (`gp4`), a misspelt profile (`etcd-fsnyc`) or a
scrape interval that is no duration (`often`) used to install cleanly; then every run exited 2
with the reason only in a pod log, or the operator's CRD refused the object halfway through
the install. One table of the classes of bad value, each tried three ways with the real tools:
the jsonnet configuration (manifests/lib/params.libsonnet's exact message), `helm template`
(the chart's values.schema.json, generated from the same schema) and, where the key reaches the
probe's configuration, fioprobe's own loader, so that all three refuse the same thing. The
lists they check against have one home each (the package's volume models, jobs/);
manifests/lib/catalog.json copies them for jsonnet and is checked current here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO
from fioprobe.target.config import ConfigError, load_config
from fioprobe.target.volumes import NEEDS, VOLUME_TYPES
from support.chart import HELM, HELM4, helm_template
from support.manifests import problems

PROFILES = "burst-ceiling, etcd-fsync, randread-iops, randwrite-iops, seqread-bw or seqwrite-bw"
TYPES = "gp2, gp3, io1, io2, st1, sc1, ceph-rbd or unknown"
DURATION = "must be a Prometheus duration such as 30s, 1m or 1h30m"
QUANTITY = "must be a quantity of bytes such as 20Gi or 500Mi"


def storage_class(volume: dict[str, Any], profiles: list[Any] | None = None) -> dict[str, Any]:
    """A storageClasses entry with `volume` and `profiles` (etcd-fsync by default)."""
    return {"name": "a", "volume": volume, "profiles": profiles or ["etcd-fsync"]}


#: (class, values, the jsonnet configuration's message or None where the key is the chart's
#: own, fragments of helm's message, the volume or profile fioprobe's loader is given or None).
CASES: list[tuple[str, dict[str, Any], str | None, list[str], dict[str, Any] | None]] = [
    (
        "volume type not modelled",
        {"etcd": {"volume": {"type": "gp4"}}},
        f'etcd.volume.type: must be one of {TYPES}, got "gp4"',
        ["at '/etcd/volume/type'", "value must be one of 'gp2', 'gp3'", "'unknown'"],
        {"volume": {"type": "gp4"}},
    ),
    (
        "volume type in another case",
        {"storageClasses": [storage_class({"type": "GP3", "size": "1Gi"})]},
        f'storageClasses[0].volume.type: must be one of {TYPES}, got "GP3"',
        ["at '/storageClasses/0/volume/type'", "value must be one of"],
        {"volume": {"type": "GP3", "size": "1Gi"}},
    ),
    (
        "gp2 without its size",
        {"etcd": {"volume": {"type": "gp2"}}},
        "etcd.volume: gp2 needs the volume size: its baseline is 3 IOPS per GiB: set size, "
        'got {"type":"gp2"}',
        ["at '/etcd/volume'", "missing property 'size'"],
        {"volume": {"type": "gp2"}},
    ),
    (
        "io2 without its provisioned iops",
        {"storageClasses": [storage_class({"type": "io2", "size": "1Gi"})]},
        "storageClasses[0].volume: io2 needs its provisioned iops: set iops, got "
        '{"size":"1Gi","type":"io2"}',
        ["at '/storageClasses/0/volume'", "missing property 'iops'"],
        {"volume": {"type": "io2", "size": "1Gi"}},
    ),
    (
        "st1 without its size",
        {
            "perNode": {
                "enabled": True,
                "localDisks": [
                    {"name": "d", "volume": {"type": "st1"}, "profiles": ["etcd-fsync"]}
                ],
            }
        },
        "perNode.localDisks[0].volume: st1 needs the volume size: its throughput is per TiB: "
        'set size, got {"type":"st1"}',
        ["at '/perNode/localDisks/0/volume'", "missing property 'size'"],
        {"volume": {"type": "st1"}},
    ),
    (
        "size no quantity",
        {"storageClasses": [storage_class({"size": "twenty"})]},
        f'storageClasses[0].volume.size: {QUANTITY}, got "twenty"',
        ["at '/storageClasses/0/volume/size'", "does not match pattern"],
        {"volume": {"size": "twenty"}},
    ),
    (
        "size of no bytes",
        {"storageClasses": [storage_class({"size": "0Gi"})]},
        f'storageClasses[0].volume.size: {QUANTITY}, got "0Gi"',
        ["at '/storageClasses/0/volume/size'", "'not' failed"],
        {"volume": {"size": "0Gi"}},
    ),
    (
        "iops of zero",
        {"storageClasses": [storage_class({"type": "gp3", "size": "1Gi", "iops": 0})]},
        "storageClasses[0].volume.iops: must be more than 0, got 0",
        ["at '/storageClasses/0/volume/iops'"],
        {"volume": {"type": "gp3", "size": "1Gi", "iops": 0}},
    ),
    (
        "throughput no quantity",
        {"storageClasses": [storage_class({"size": "1Gi", "throughput": "fast"})]},
        f'storageClasses[0].volume.throughput: {QUANTITY}, got "fast"',
        ["at '/storageClasses/0/volume/throughput'"],
        {"volume": {"size": "1Gi", "throughput": "fast"}},
    ),
    (
        "profile not shipped",
        {"etcd": {"profiles": ["etcd-fsnyc"]}},
        f'etcd.profiles[0]: must be one of the profiles in jobs/: {PROFILES}, got "etcd-fsnyc"',
        ["at '/etcd/profiles/0'", "value must be one of 'burst-ceiling', 'etcd-fsync'"],
        {"profiles": ["etcd-fsnyc"]},
    ),
    (
        "profile with overrides not shipped",
        {"storageClasses": [storage_class({"size": "1Gi"}, [{"name": "randread", "runtime": 5}])]},
        "storageClasses[0].profiles[0].name: must be one of the profiles in jobs/: "
        f'{PROFILES}, got "randread"',
        ["at '/storageClasses/0/profiles/0/name'", "value must be one of"],
        {"profiles": [{"name": "randread", "runtime": 5}]},
    ),
    (
        "scrape interval no duration",
        {"monitoring": {"serviceMonitor": {"interval": "often"}}},
        f'monitoring.serviceMonitor.interval: {DURATION}, got "often"',
        ["at '/monitoring/serviceMonitor/interval'", "does not match pattern"],
        None,
    ),
    (
        "scrape interval without a unit",
        {"monitoring": {"podMonitor": {"interval": "15"}}},
        f'monitoring.podMonitor.interval: {DURATION}, got "15"',
        ["at '/monitoring/podMonitor/interval'", "does not match pattern"],
        None,
    ),
    (
        "duration units out of order",
        {"monitoring": {"podMonitor": {"interval": "30s1m"}}},
        f'monitoring.podMonitor.interval: {DURATION}, got "30s1m"',
        ["at '/monitoring/podMonitor/interval'", "does not match pattern"],
        None,
    ),
    (
        "duration of zero",
        {"monitoring": {"serviceMonitor": {"interval": "0s"}}},
        f'monitoring.serviceMonitor.interval: {DURATION}, got "0s"',
        ["at '/monitoring/serviceMonitor/interval'", "'not' failed"],
        None,
    ),
    (
        "duration the Pushgateway cannot read",
        {"pushgateway": {"persistenceInterval": "1d"}},
        "pushgateway.persistenceInterval: must be a duration such as 30s, 1m or 1h30m (h, m, s "
        'or ms: the Pushgateway reads it with Go, which has no d, w or y), got "1d"',
        ["at '/pushgateway/persistenceInterval'", "does not match pattern"],
        None,
    ),
    (
        "needed setting null",
        {"storageClasses": [storage_class({"type": "io1", "size": "1Gi", "iops": None})]},
        "storageClasses[0].volume: io1 needs its provisioned iops: set iops, got "
        '{"iops":null,"size":"1Gi","type":"io1"}',
        ["at '/storageClasses/0/volume", "iops"],
        {"volume": {"type": "io1", "size": "1Gi", "iops": None}},
    ),
    (
        "address block without its prefix",
        {"pushgateway": {"url": "http://pgw.example:9091", "cidrs": ["10.0.0.1"]}},
        "pushgateway.cidrs[0]: must be an address block such as 10.20.0.0/16 or fd00::/8, got "
        '"10.0.0.1"',
        ["at '/pushgateway/cidrs/0'", "does not match pattern"],
        None,
    ),
    (
        "empty name",
        {"etcd": {"name": ""}},
        'etcd.name: must not be empty, got ""',
        ["at '/etcd/name'", "minLength"],
        None,
    ),
    (
        "empty object name",
        {"pushgateway": {"name": ""}},
        'pushgateway.name: must not be empty, got ""',
        ["at '/pushgateway/name'", "minLength"],
        None,
    ),
    (
        "name twice",
        {
            "perNode": {
                "enabled": True,
                "localDisks": [
                    {"name": "d", "profiles": ["etcd-fsync"]},
                    {"name": "d", "profiles": ["etcd-fsync"]},
                ],
            }
        },
        'perNode.localDisks: name "d" appears more than once',
        ["perNode.localDisks: a name appears more than once: d, d"],
        None,
    ),
    (
        "stream PVC size no quantity",
        {"continuous": {"pvcSize": "1 gig"}},
        f'continuous.pvcSize: {QUANTITY}, got "1 gig"',
        ["at '/continuous/pvcSize'", "does not match pattern"],
        None,
    ),
    # The chart's own keys: the default StorageClass's probe.
    (
        "default class profile not shipped",
        {"defaultStorageClass": {"profiles": ["etcd-fsnyc"]}},
        None,
        ["at '/defaultStorageClass/profiles/0'", "value must be one of 'burst-ceiling'"],
        None,
    ),
    (
        "default class size no quantity",
        {"defaultStorageClass": {"size": "big"}},
        None,
        ["at '/defaultStorageClass/size'", "does not match pattern"],
        None,
    ),
]
IDS = [case[0] for case in CASES]


def jsonnet_source(values: dict[str, Any]) -> str:
    return json.dumps(values)


@pytest.mark.parametrize(
    ("values", "message"),
    [(c[1], c[2]) for c in CASES if c[2] is not None],
    ids=[c[0] for c in CASES if c[2] is not None],
)
def test_the_jsonnet_configuration_refuses_it_naming_the_key(
    values: dict[str, Any], message: str
) -> None:
    assert problems(jsonnet_source(values)) == [message]


@pytest.mark.parametrize("binary", [HELM, HELM4], ids=["helm3", "helm4"])
@pytest.mark.parametrize(("values", "fragments"), [(c[1], c[3]) for c in CASES], ids=IDS)
def test_helm_template_refuses_it_naming_the_key(
    values: dict[str, Any], fragments: list[str], binary: Path
) -> None:
    result = helm_template(values, binary=binary)
    assert result.returncode != 0, f"accepted: {values}"
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


@pytest.mark.parametrize(
    "target",
    [c[4] for c in CASES if c[4] is not None],
    ids=[c[0] for c in CASES if c[4] is not None],
)
def test_fioprobe_refuses_the_same_volume_or_profile(
    target: dict[str, Any], tmp_path: Path
) -> None:
    """The probe's configuration, as the chart would write it, is refused by fioprobe too:
    the install refuses nothing fioprobe would have run."""
    config = {
        "pushgateway": {"url": "http://127.0.0.1:9"},
        "targets": [
            {
                "name": "a",
                "directory": str(tmp_path),
                "profiles": ["etcd-fsync"],
                "volume": {"size": "1Gi"},
                **target,
            }
        ],
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    # Named at the key the deployment wrote: the volume's, or the profile's.
    key = "targets[0].volume" if "volume" in target else "targets[0].profiles[0]"
    assert f"{path}: {key}" in str(refused.value), refused.value


def test_the_defaults_and_the_examples_pass_every_door() -> None:
    """The same checks accept what the chart ships: its defaults and its example values."""
    assert helm_template({}).returncode == 0
    for example in sorted((REPO / "charts" / "fioprobe" / "examples").glob("*.yaml")):
        result = helm_template(yaml.safe_load(example.read_text()))
        assert result.returncode == 0, (example.name, result.stderr)


def test_the_catalog_is_the_packages_lists() -> None:
    """manifests/lib/catalog.json and lib/volume-types.json are what scripts/catalog.py makes
    from the package and jobs/ now."""
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "catalog.py"), "--check"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    catalog = json.loads((REPO / "manifests" / "lib" / "catalog.json").read_text())
    assert catalog["volumeTypes"] == list(VOLUME_TYPES)
    assert catalog["volumeTypeNeeds"] == NEEDS
    assert catalog["profiles"] == sorted(p.stem for p in (REPO / "jobs").glob("*.fio"))
    mixin = json.loads((REPO / "lib" / "volume-types.json").read_text())
    assert mixin["volumeTypes"] == list(VOLUME_TYPES)


def test_every_type_fioprobe_models_is_accepted_with_what_it_needs() -> None:
    """No door refuses a type fioprobe models, given the settings it needs."""
    for kind in VOLUME_TYPES:
        volume: dict[str, Any] = {"type": kind, "size": "100Gi"}
        if "iops" in NEEDS.get(kind, {}):
            volume["iops"] = 1000
        values = {"storageClasses": [storage_class(volume)]}
        result = helm_template(values)
        assert result.returncode == 0, (kind, result.stderr)
        proc = subprocess.run(
            [str(REPO / ".tools" / "bin" / "go-jsonnet"), "-J", str(REPO), "-e",
             "(import 'manifests/lib/monitoring-config.libsonnet').merged({}, "
             f"{jsonnet_source(values)}).storageClasses[0].volume.type"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert proc.returncode == 0 and json.loads(proc.stdout) == kind, proc.stderr
