"""An etcd target's probe directory must be on etcd's filesystem (`etcd_data_dir`).

Real filesystems: the test's own directory (the root disk here) and a tmpfs mounted in it,
so "another disk" is a different device number, as a dedicated etcd disk would be. The
scheduled probe runs through `fioprobe run` with real fio and a real Pushgateway, whose
/metrics is read as Prometheus would; the stream through `fioprobe continuous`, scraped.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import fioprobe
from support import services
from support.continuous import stream, wait_until

NODE = "cp-1"


@pytest.fixture
def other_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of its own: a filesystem on another device than the test's directory."""
    if os.geteuid() != 0:
        pytest.fail("needs root to mount tmpfs (CI runs as root)")
    mountpoint = tmp_path / "other-disk"
    mountpoint.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(mountpoint)],
                   check=True, timeout=30)  # fmt: skip
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", str(mountpoint)], check=True, timeout=30)


def device(path: Path) -> str:
    number = os.stat(path).st_dev
    return f"{os.major(number)}:{os.minor(number)}"


class Layout:
    """etcd's data directory and the probe directories of every case, made on disk."""

    def __init__(self, tmp_path: Path, other_disk: Path) -> None:
        self.data = tmp_path / "etcd-data"
        self.data.mkdir(mode=0o700)  # as etcd keeps it: the probe only stats it
        (self.data / "member").mkdir()
        self.same = tmp_path / "probe-same"
        self.other = other_disk / "probe"
        self.missing = tmp_path / "probe-missing"
        self.symlinked = tmp_path / "probe-symlinked"
        self.a_file = tmp_path / "probe-a-file"
        for directory in (self.same, self.other, self.missing, self.symlinked, self.a_file):
            directory.mkdir()
        self.link = tmp_path / "etcd-link"
        self.link.symlink_to(self.data)
        self.file = tmp_path / "etcd-file"
        self.file.write_text("not a directory")
        self.nowhere = tmp_path / "no-etcd-here"
        #: name -> (probe directory, etcd_data_dir)
        self.targets = {
            "same": (self.same, self.data),
            "other": (self.other, self.data),
            "missing": (self.missing, self.nowhere),
            "symlinked": (self.symlinked, self.link),
            "a-file": (self.a_file, self.file),
        }
        self.refused = [name for name in self.targets if name != "same"]
        self.messages = {
            "other": (
                f"{self.other}: the probe directory is not on etcd's filesystem ({self.data} "
                f"is on device {device(self.data)}, the probe directory on "
                f"{device(self.other)}); the probe would measure another disk than etcd's"
            ),
            "missing": (
                f"etcd's data directory {self.nowhere} does not exist here: is etcd.dataDir "
                "right for this distribution?"
            ),
            "symlinked": (
                f"etcd's data directory {self.link} is a symlink: give the real directory, as "
                "etcd.dataDir names it"
            ),
            "a-file": (
                f"etcd's data directory {self.file} is not a directory: is etcd.dataDir right?"
            ),
        }

    def config(self, path: Path, gateway_url: str, state: Path) -> Path:
        lines = [f"pushgateway: {{url: '{gateway_url}'}}", "targets:"]
        for name, (directory, data_dir) in self.targets.items():
            lines += [
                f"  - name: {name}",
                f"    directory: {directory}",
                "    node_local: true",
                "    etcd_disk: true",
                f"    etcd_data_dir: {data_dir}",
                f"    state_dir: {state / name}",
                "    profiles: [etcd-fsync]",
            ]
        path.write_text("\n".join(lines) + "\n")
        return path


def info_labels(samples: services.Samples, name: str, **labels: str) -> list[dict[str, str]]:
    return [
        dict(ls) for (n, ls), _ in samples.items()
        if n == name and set(labels.items()) <= set(ls)
    ]  # fmt: skip


def value(samples: services.Samples, name: str, **labels: str) -> float | None:
    found = [v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= set(ls)]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else None


def test_run_refuses_a_probe_directory_off_etcds_filesystem(
    tmp_path: Path, other_disk: Path, pushgateway: services.Service
) -> None:
    layout = Layout(tmp_path, other_disk)
    before = {name: os.stat(d).st_mtime_ns for name, (d, _) in layout.targets.items()}
    config = layout.config(tmp_path / "config.yaml", pushgateway.url, tmp_path / "states")

    result = fioprobe("run", "--config", str(config), "--node", NODE)

    log = result.stderr.decode()
    assert result.returncode == 2, log  # unsafe_target: the configuration's to fix
    assert "Traceback" not in log
    samples = services.scrape(pushgateway.url + "/metrics")
    # The target on etcd's filesystem ran and keeps its etcd role.
    same = {"storageclass": "same", "node": NODE, "profile": "etcd-fsync"}
    assert value(samples, "fioprobe_success", **same) == 1
    (info,) = info_labels(samples, "fioprobe_info", **same)
    assert info["etcd_disk"] == "true"
    for name in layout.refused:
        key = {"storageclass": name, "node": NODE, "profile": "etcd-fsync"}
        assert value(samples, "fioprobe_success", **key) == 0, name
        reasons = info_labels(samples, "fioprobe_failure_reason_info", **key)
        assert [r["reason"] for r in reasons] == ["unsafe_target"], name
        # It measured nothing of etcd's disk, and says so: no etcd role for this push.
        (info,) = info_labels(samples, "fioprobe_info", **key)
        assert info["etcd_disk"] == "false", name
        line = f"storageclass': '{name}'"
        (said,) = [x for x in log.splitlines() if line in x and "FAILED (unsafe_target)" in x]
        assert layout.messages[name] in said, (name, said)
        # Nothing was written in its probe directory: not even a run directory made and
        # removed (which would change the directory's mtime).
        directory = layout.targets[name][0]
        assert list(directory.iterdir()) == [], name
        assert os.stat(directory).st_mtime_ns == before[name], name
    # etcd's data directory was only looked at.
    assert sorted(p.name for p in layout.data.iterdir()) == ["member"]


def test_stream_refuses_a_target_off_etcds_filesystem_and_claims_no_etcd_disk(
    tmp_path: Path, other_disk: Path
) -> None:
    layout = Layout(tmp_path, other_disk)
    config = layout.config(tmp_path / "config.yaml", "http://127.0.0.1:9", tmp_path / "states")
    errors = "fioprobe_continuous_errors_total"
    with stream(tmp_path, "--config", str(config), "--node", NODE, "--interval", "0.2") as s:

        def settled() -> bool:
            written = s.value("fioprobe_continuous_operations_total", storageclass="same")
            return written >= 3 and all(
                s.value(errors, storageclass=name, reason="unsafe_target") >= 2
                for name in layout.refused
            )

        # Two errors each: a refused target stays refused at every retry of its set-up.
        wait_until("the good target writes, every refused one is refused twice", settled, 60)
        samples = s.scrape()
        (info,) = info_labels(samples, "fioprobe_continuous_info", storageclass="same")
        assert info["etcd_disk"] == "true"
        assert value(samples, "fioprobe_continuous_success", storageclass="same") == 1
        for name in layout.refused:
            (info,) = info_labels(samples, "fioprobe_continuous_info", storageclass=name)
            assert info["etcd_disk"] == "false", name
            assert value(samples, "fioprobe_continuous_success", storageclass=name) == 0
            ops = value(samples, "fioprobe_continuous_operations_total", storageclass=name)
            assert ops == 0, name
            assert list(layout.targets[name][0].iterdir()) == [], name
        code, _ = s.stop()
    assert code == 0
    log = s.stderr()
    assert "Traceback" not in log
    for name in layout.refused:
        said = f"continuous: {name} on {NODE}: unsafe_target:"
        lines = [x for x in log.splitlines() if said in x]
        assert len(lines) == 1, (name, log)  # one line when it starts failing, not per retry
        assert layout.messages[name] in lines[0], (name, lines[0])
    assert sorted(p.name for p in layout.data.iterdir()) == ["member"]
