"""`fioprobe run --config`: the CronJob entrypoint, end to end with real fio and Pushgateway."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import fioprobe, gateway_group, gauge
from fioprobe.target.volumes import GIB
from support import fixtures as fx
from support import services

throttled_loop_factory = fx.throttled_loop_factory


def test_run_probes_every_target_and_profile(tmp_path: Path, pushgateway: services.Service) -> None:
    plain, gp2, etcd = tmp_path / "plain", tmp_path / "gp2", tmp_path / "etcd"
    plain.mkdir()
    gp2.mkdir()
    etcd.mkdir()
    config = tmp_path / "config.yaml"
    config.write_text(
        f"pushgateway: {{url: {pushgateway.url}}}\n"
        "targets:\n"
        f"  - {{name: plain, directory: {plain}, profiles: [etcd-fsync]}}\n"
        f"  - name: gp2-small\n    directory: {gp2}\n"
        "    volume: {type: gp2, size: 100Gi, provisioner: ebs.csi.aws.com, dedicated: true}\n"
        "    profiles: [etcd-fsync, {name: randwrite-iops, runtime: 2}]\n"
        f"  - {{name: etcd-disk, directory: {etcd}, node_local: true, etcd_disk: true,"
        " profiles: [etcd-fsync]}\n"
    )
    result = fioprobe("run", "--config", str(config), "--node", "cp-1")
    assert result.returncode == 0, result.stderr.decode()

    for key in (
        {"storageclass": "plain", "profile": "etcd-fsync"},
        {"storageclass": "gp2-small", "profile": "etcd-fsync"},
        {"storageclass": "gp2-small", "profile": "randwrite-iops"},
        {"storageclass": "etcd-disk", "profile": "etcd-fsync", "node": "cp-1"},
    ):
        group = gateway_group(pushgateway, **key)
        assert group is not None, key
        assert gauge(group, "fioprobe_success") == 1
        assert gauge(group, "fioprobe_runs_total") == 1

    group = gateway_group(pushgateway, storageclass="gp2-small", profile="randwrite-iops")
    assert gauge(group, "fioprobe_volume_size_bytes") == 100 * GIB
    assert gauge(group, "fioprobe_volume_baseline_iops") == 300
    assert gauge(group, "fioprobe_volume_burst_iops") == 3000
    # The probe's own writes above the baseline spent modelled credits from a full bucket.
    ratio = gauge(group, "fioprobe_volume_burst_balance_ratio")
    assert 0.9 < ratio < 1.0
    (info,) = group["fioprobe_info"]
    assert info["labels"]["volume_type"] == "gp2"
    assert info["labels"]["provisioner"] == "ebs.csi.aws.com"
    assert info["labels"]["histogram_source"] == "bins"
    # Which disks hold etcd is the configuration's fact, published with every push.
    assert info["labels"]["etcd_disk"] == "false"
    etcd = gateway_group(pushgateway, storageclass="etcd-disk", profile="etcd-fsync", node="cp-1")
    assert etcd["fioprobe_info"][0]["labels"]["etcd_disk"] == "true"

    # Both profiles spend from the volume's one bucket: the later run sees the earlier's IO.
    first = gateway_group(pushgateway, storageclass="gp2-small", profile="etcd-fsync")
    assert gauge(first, "fioprobe_volume_burst_balance_ratio") > ratio

    # The probe's cost equals what fio wrote, and the state lives on the probe volume.
    states = sorted((gp2 / ".fioprobe-state").glob("*.json"))
    assert [p.name for p in states] == [
        "credits-storageclass-gp2-small.json",
        "storageclass-gp2-small_profile-etcd-fsync.json",
        "storageclass-gp2-small_profile-randwrite-iops.json",
    ]
    written = json.loads(states[2].read_text())["totals"]["written_bytes_total"]
    assert gauge(group, "fioprobe_written_bytes_total") == written > 0
    assert [p.name for p in gp2.iterdir()] == [".fioprobe-state"]


def test_node_local_target_without_node_is_skipped_loudly(
    tmp_path: Path, pushgateway: services.Service
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        f"pushgateway: {{url: {pushgateway.url}}}\n"
        f"targets: [{{name: etcd-disk, directory: {tmp_path}, node_local: true,"
        " profiles: [etcd-fsync]}]\n"
    )
    result = fioprobe("run", "--config", str(config), env={"NODE_NAME": ""})
    assert result.returncode == 2
    assert "skipping node-local target etcd-disk: no --node/NODE_NAME" in result.stderr.decode()


def test_bad_config_runs_nothing(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("pushgateway: {url: http://127.0.0.1:9}\ntargets: [{name: x}]\n")
    result = fioprobe("run", "--config", str(config))
    assert result.returncode == 2
    assert result.stderr.decode().strip() == (
        f"fioprobe: error: {config}: targets[0].directory: is required"
    )


@pytest.mark.slow
def test_burst_ceiling_reports_the_throttle(
    tmp_path: Path, state_dir: Path, pushgateway: services.Service, throttled_loop_factory
) -> None:
    """A volume throttled to 100 write IOPS (a gp2 out of credits): ceiling within 15% of 100."""
    volume = throttled_loop_factory(size_bytes=256 * 1024**2, write_iops=100)

    def ceiling(storageclass: str) -> float:
        command = [sys.executable, "-m", "fioprobe", "probe", "--profile", "burst-ceiling",
                   "--dir", str(volume.path), "--gateway", pushgateway.url,
                   "--storageclass", storageclass, "--quiet"]  # fmt: skip
        subprocess.run(volume.cgroup.wrap(command), check=True, timeout=60)
        group = gateway_group(pushgateway, storageclass=storageclass, profile="burst-ceiling")
        return gauge(group, "fioprobe_write_iops")

    throttled = ceiling("throttled")
    assert 85 <= throttled <= 115, throttled
    volume.lift()
    unthrottled = ceiling("unthrottled")
    assert unthrottled > 10 * throttled, unthrottled
