"""`run_config(..., deadline=...)`: one pass of `fioprobe run` kept to the end of its slot.

Real fio on the slow FUSE disk (every write held, so that fio's file layout outlasts a
short slot: a disk slower than the profile expects, the case the clamp is for) and a real
Pushgateway. Bounds are loose and events are checked in order: the machine is a loaded
2-core one, and the guarantee under test is "fio is gone by the slot's end", which the
clamp keeps with 15 s to spare (`probe.slot.FIO_STOP_SECONDS`), not a latency.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import gateway_group, gauge
from fioprobe.fio.profiles import load_profile
from fioprobe.probe.runner import run_config
from fioprobe.probe.slot import FIO_STOP_SECONDS
from fioprobe.target.config import load_config
from support import services
from support.slowfs import SlowFs, slow_fs

#: Lays out a 2 MiB file in 4 KiB writes before reading it: 512 writes, each held
#: WRITE_DELAY_MS by the slow disk, about 51 s, where its budget says 2 s.
SLOW_LAYOUT = """\
# slow-layout: a read profile whose file layout takes long on a disk that holds every write.
# Measures: nothing worth keeping; it exists to outlast a slot on the slow FUSE disk.
# Budget: 4 MiB of IO (2 MiB laid out, 2 MiB read) and 2 s, which the slow disk overruns.
# Used by: tests/probe/test_run_deadline.py.
# Run by hand: not meant to.
# fioprobe-budget-bytes: 4194304
# fioprobe-budget-seconds: 2
[slow-layout]
ioengine=sync
rw=read
bs=4k
size=2m
runtime=1
"""
WRITE_DELAY_MS = 100
#: How long fio would take without the slot (the layout alone): well beyond the slot below.
UNCLAMPED_SECONDS = 512 * WRITE_DELAY_MS / 1000
#: The slot's end, from the start of the pass: the stop allowance, the profile's budget and
#: a few seconds for fio (what it gets before its clamped timeout).
SLOT_SECONDS = FIO_STOP_SECONDS + 2 + 5
#: After the slot: the removal of fio's files and the push, on a loaded machine.
PUBLISH_MARGIN_SECONDS = 15.0


@pytest.fixture
def slow(tmp_path: Path) -> Iterator[SlowFs]:
    backing, mountpoint = tmp_path / "backing", tmp_path / "slow"
    backing.mkdir()
    mountpoint.mkdir()
    with slow_fs(backing, mountpoint, fsync_delay_ms=0, write_delay_ms=WRITE_DELAY_MS) as fs:
        yield fs


def holders(directory: Path) -> list[int]:
    """PIDs with a descriptor open under `directory` (fio's files, its run directory)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            links = [os.readlink(f"/proc/{entry.name}/fd/{fd}")
                     for fd in os.listdir(f"/proc/{entry.name}/fd")]  # fmt: skip
        except OSError:  # gone meanwhile, or not ours to look at
            continue
        if any(link == str(directory) or link.startswith(f"{directory}/") for link in links):
            found.append(int(entry.name))
    return found


def test_a_slot_ending_soon_stops_a_long_fio_before_its_end(
    tmp_path: Path, slow: SlowFs, pushgateway: services.Service, capfd: pytest.CaptureFixture[str]
) -> None:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "slow-layout.fio").write_text(SLOW_LAYOUT)
    assert load_profile("slow-layout", jobs).budget_seconds == 2
    probe_dir = slow.mountpoint / "probe"
    probe_dir.mkdir()
    config = tmp_path / "config.yaml"
    config.write_text(
        f"pushgateway: {{url: '{pushgateway.url}'}}\ntargets:\n"
        f"  - {{name: slow, directory: {probe_dir}, state_dir: {tmp_path / 'state-slow'},"
        " profiles: [slow-layout]}\n"
    )
    started = time.time()
    deadline = started + SLOT_SECONDS

    code = run_config(
        load_config(config, jobs), only_node=None, jobs_dir=jobs, quiet=True, deadline=deadline
    )

    returned = time.time()
    err = capfd.readouterr().err
    assert code == 1, err
    assert "Traceback" not in err
    # fio was stopped by its clamped timeout, and the line says the slot set it.
    (line,) = [x for x in err.splitlines() if "FAILED (timeout)" in x]
    assert "fio did not finish within" in line and "the run's slot set that timeout" in line, line
    # In order: fio's group is gone when run_config returns (kill_group waited for it), and
    # that was within the slot plus the publish, long before fio would have ended alone.
    assert holders(probe_dir) == []
    assert returned < deadline + PUBLISH_MARGIN_SECONDS < started + UNCLAMPED_SECONDS, (
        returned - started
    )
    # Exactly one outcome, pushed: the timeout.
    group = gateway_group(pushgateway, storageclass="slow", profile="slow-layout")
    assert group is not None
    assert gauge(group, "fioprobe_success") == 0
    (reason,) = group["fioprobe_failure_reason_info"]
    assert reason["labels"]["reason"] == "timeout"
    assert gauge(group, "fioprobe_runs_total") == 1
    assert gauge(group, "fioprobe_failures_total") == 1
    # What the run pushed as its duration ends with the push, before the publish margin.
    assert gauge(group, "fioprobe_duration_seconds") < SLOT_SECONDS + PUBLISH_MARGIN_SECONDS


def test_a_slot_already_over_pushes_a_timeout_per_profile_without_running_fio(
    tmp_path: Path, pushgateway: services.Service, capfd: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    before = os.stat(plain).st_mtime_ns
    # A missing directory shows that the volume part never ran: it would say no_directory.
    missing = tmp_path / "missing"
    config = tmp_path / "config.yaml"
    config.write_text(
        f"pushgateway: {{url: '{pushgateway.url}'}}\ntargets:\n"
        f"  - {{name: plain, directory: {plain}, state_dir: {tmp_path / 'state-plain'},"
        " profiles: [etcd-fsync, randwrite-iops]}\n"
        f"  - {{name: missing, directory: {missing}, state_dir: {tmp_path / 'state-missing'},"
        " profiles: [etcd-fsync]}\n"
    )

    code = run_config(
        load_config(config), only_node=None, jobs_dir=None, quiet=True, deadline=time.time() - 1
    )

    err = capfd.readouterr().err
    assert code == 1, err
    assert "Traceback" not in err
    for storageclass, profile, budget in (
        ("plain", "etcd-fsync", 20),
        ("plain", "randwrite-iops", 10),
        ("missing", "etcd-fsync", 20),
    ):
        group = gateway_group(pushgateway, storageclass=storageclass, profile=profile)
        assert group is not None, (storageclass, profile)
        assert gauge(group, "fioprobe_success") == 0
        (reason,) = group["fioprobe_failure_reason_info"]
        assert reason["labels"]["reason"] == "timeout", (storageclass, profile)
        assert gauge(group, "fioprobe_runs_total") == 1  # one outcome per profile
        (line,) = [
            x for x in err.splitlines()
            if f"'storageclass': '{storageclass}', 'profile': '{profile}'" in x
        ]  # fmt: skip
        directory = plain if storageclass == "plain" else missing
        expected = (
            f"{directory}: the slot had only 0.0s left for fio (its end less 15s to stop fio) "
            f"for the {profile} profile budgeted at {budget}s; it was not started"
        )
        assert "FAILED (timeout) in" in line and expected in line, line
    # fio never ran: no run directory was made (nor removed) in the probe directory.
    assert list(plain.iterdir()) == []
    assert os.stat(plain).st_mtime_ns == before
    assert not missing.exists()


def test_a_pass_runs_the_profiles_its_slot_has_room_for_and_refuses_the_rest(
    tmp_path: Path, pushgateway: services.Service, capfd: pytest.CaptureFixture[str]
) -> None:
    """randwrite-iops (budgeted 10 s) first, then etcd-fsync (20 s) in a slot of 15 + 16 s:
    the first has room even after a slow start, the second cannot have it whatever the
    first took (16 s left at most, for a 20 s budget)."""
    plain = tmp_path / "plain"
    plain.mkdir()
    config = tmp_path / "config.yaml"
    config.write_text(
        f"pushgateway: {{url: '{pushgateway.url}'}}\ntargets:\n"
        f"  - {{name: plain, directory: {plain}, state_dir: {tmp_path / 'state-plain'},"
        " profiles: [randwrite-iops, etcd-fsync]}\n"
    )

    code = run_config(
        load_config(config),
        only_node=None,
        jobs_dir=None,
        quiet=True,
        deadline=time.time() + FIO_STOP_SECONDS + 16,
    )

    err = capfd.readouterr().err
    assert code == 1, err
    ran = gateway_group(pushgateway, storageclass="plain", profile="randwrite-iops")
    assert ran is not None and gauge(ran, "fioprobe_success") == 1, err
    refused = gateway_group(pushgateway, storageclass="plain", profile="etcd-fsync")
    assert refused is not None and gauge(refused, "fioprobe_success") == 0
    (reason,) = refused["fioprobe_failure_reason_info"]
    assert reason["labels"]["reason"] == "timeout"
    assert gauge(refused, "fioprobe_runs_total") == 1
    assert "for the etcd-fsync profile budgeted at 20s; it was not started" in err, err
    assert list(plain.iterdir()) == []
