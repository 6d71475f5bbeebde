"""A node-local target with a profile small enough for the short slots of a staggered run
(`fioprobe run --every --member`): the profile's jobs directory and the configuration, for
the stagger tests and the Kubernetes client's.
"""

from __future__ import annotations

from pathlib import Path

#: A profile that fits a short slot: 1 s of budget (etcd-fsync's pattern, 64 KiB). With a
#: second to start, the 15 s fio may take to stop and 2 s to read the members first, a pass
#: needs 19 s: a slot of 30 s (two members every 60 s) leaves 9 s for a slow start on a
#: loaded machine.
SLOT_FSYNC = """\
# slot-fsync: etcd-fsync's pattern, small enough for a test's short slots.
# fioprobe-budget-bytes: 262144
# fioprobe-budget-seconds: 1
[slot-fsync]
ioengine=sync
rw=write
bs=2300
fdatasync=1
size=64k
runtime=1
"""


def jobs_dir(tmp_path: Path) -> Path:
    jobs = tmp_path / "jobs"
    jobs.mkdir(exist_ok=True)
    (jobs / "slot-fsync.fio").write_text(SLOT_FSYNC)
    return jobs


def write_config(tmp_path: Path, gateway_url: str, name: str, profile: str = "slot-fsync") -> Path:
    """A configuration with one node-local target (its disk and state in `tmp_path`)."""
    disk = tmp_path / f"disk-{name}"
    disk.mkdir(exist_ok=True)
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        f"owner: stagger-test\npushgateway: {{url: {gateway_url}}}\ntargets:\n"
        f"  - {{name: etcd, directory: {disk}, node_local: true,\n"
        f"     state_dir: {tmp_path / 'state' / name}, profiles: [{{name: {profile}}}]}}\n"
    )
    return path
