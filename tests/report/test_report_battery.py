"""`fioprobe report` over a battery of real fio runs made here.

The battery is laid out as benchmark batteries are (`<battery>_<group>-fio-<node>/...`):
- `hostdisk` (a folder on the host's disk, two nodes) and `loop` (ext4 on a loop device):
  repeated etcd-style fdatasync runs and a randread queue-depth sweep (iodepth 1, 4, 16);
- `throttled`: one fio run of eight consecutive 1 s random-write jobs on a loop device, in a
  cgroup v1 blkio group that gets a 200 write IOPS limit partway through, as a volume that
  runs out of burst credits does. The report must show that step.
Every table cell is compared with fio's own JSON; the charts are decoded; the HTML is opened
in headless Chromium; the same battery as a .tar.gz gives the same report.
"""

from __future__ import annotations

import contextlib
import json
import math
import statistics
import subprocess
import tarfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from conftest import fioprobe
from support import throttle
from support.fixtures import loop_unavailable
from support.report import (
    check_html_in_chromium,
    check_html_matches_data,
    check_png,
    check_tables_against_fio,
    fio_jobs,
)

pytestmark = pytest.mark.slow

BATTERY = "bat1"
QUEUE_DEPTHS = (1, 4, 16)
THROTTLE_IOPS = 200
BURST_JOBS = 8

FSYNC = ["--name=etcd-fsync", "--ioengine=sync", "--rw=write", "--bs=2300", "--fdatasync=1",
         "--size=256k"]  # fmt: skip


def randread(qd: int) -> list[str]:
    return ["--name=randread", "--ioengine=libaio", "--direct=1", "--rw=randread", "--bs=4k",
            "--size=16m", f"--iodepth={qd}", "--runtime=1", "--time_based"]  # fmt: skip


def burst_jobs() -> list[str]:
    common = ["--ioengine=libaio", "--direct=1", "--rw=randwrite", "--bs=4k", "--size=32m",
              "--iodepth=8", "--runtime=1", "--time_based"]  # fmt: skip
    jobs = ["--name=burst"]
    for _ in range(BURST_JOBS - 1):
        jobs += ["--name=burst", "--stonewall"]
    return common + jobs  # options before the first --name are global


def fio_command(output: Path, directory: Path, args: Sequence[str]) -> list[str]:
    return ["fio", f"--directory={directory}", "--output-format=json+", f"--output={output}",
            *args]  # fmt: skip


def run_fio(output: Path, directory: Path, args: Sequence[str]) -> None:
    output.parent.mkdir(parents=True, exist_ok=True)
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(fio_command(output, directory, args), check=True, capture_output=True,
                   timeout=120)  # fmt: skip


def folder(root: Path, group: str, node: str) -> Path:
    return root / f"{BATTERY}_{group}-fio-{node}"


def make_battery(root: Path, scratch: Path, stack: contextlib.ExitStack) -> dict[str, object]:
    """Run the whole battery; returns facts the tests check against."""
    host = scratch / "host"
    for node in ("node1", "node2"):
        for index in range(1, 4 if node == "node1" else 3):
            run_fio(folder(root, "hostdisk", node) / "etcd-fsync" / f"run-{index}.json",
                    host / node, FSYNC)  # fmt: skip
    for qd in QUEUE_DEPTHS:
        run_fio(folder(root, "hostdisk", "node1") / "qd-sweep" / f"randread-qd{qd}.json",
                host / "node1", randread(qd))  # fmt: skip

    loop = stack.enter_context(
        throttle.loop_mount(scratch / "loop", 256 * 1024 * 1024, image_dir=scratch)
    )
    for index in range(1, 4):
        run_fio(folder(root, "loop", "node1") / "etcd-fsync" / f"run-{index}.json",
                loop.mountpoint, FSYNC)  # fmt: skip
    for qd in QUEUE_DEPTHS:
        run_fio(folder(root, "loop", "node1") / "qd-sweep" / f"randread-qd{qd}.json",
                loop.mountpoint, randread(qd))  # fmt: skip

    throttled = stack.enter_context(
        throttle.throttled_loop_mount(scratch / "throttled", 256 * 1024 * 1024, image_dir=scratch)
    )
    output = folder(root, "throttled", "node1") / "burst" / "burst.json"
    output.parent.mkdir(parents=True)
    proc = throttled.cgroup.popen(
        fio_command(output, throttled.path, burst_jobs()),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    started = time.monotonic()
    time.sleep(3.5)  # about halfway through the third or fourth job
    throttled.set_limits(write_iops=THROTTLE_IOPS)
    throttled_after = time.monotonic() - started
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode(errors="replace")
    return {"throttled_after_s": throttled_after}


@pytest.fixture(scope="module")
def battery(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict]]:
    reason = loop_unavailable() or throttle.blkio_available()
    if reason:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("battery")
    scratch = tmp_path_factory.mktemp("battery-scratch")
    with contextlib.ExitStack() as stack:
        facts = make_battery(root, scratch, stack)
    assert throttle.leftovers() == []
    yield root, facts


@pytest.fixture(scope="module")
def report(battery, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root, _ = battery
    out = tmp_path_factory.mktemp("battery-report")
    result = fioprobe("report", str(root), "-o", str(out), "--baseline", "hostdisk",
                      "--title", "battery")  # fmt: skip
    assert result.returncode == 0, result.stderr.decode()
    return out, json.loads((out / "report.json").read_text())


def documents(data: dict) -> dict[str, dict]:
    return {e["source"]: json.loads(Path(e["source"]).read_text()) for e in data["entries"]}


def test_groups_nodes_and_every_cell_equals_fio(report) -> None:
    out, data = report
    assert data["groups"] == ["hostdisk", "loop", "throttled"]  # baseline first
    assert data["files"]["unreadable"] == []
    assert check_tables_against_fio(data, documents(data)) >= 60
    assert check_html_matches_data(out, data) >= 60
    # The repeated fsync runs make cells of several runs: the lower median, n shown.
    cell = data["tables"]["sync-p99"]["rows"]["etcd-fsync"]["hostdisk"]
    assert cell["n"] == 5 and "(n=5)" in (out / "report.md").read_text()
    # Per-node tables: hostdisk ran on two nodes.
    node_table = data["tables"]["node-sync-p99"]
    assert {"hostdisk / node1", "hostdisk / node2"} <= set(node_table["columns"])
    node2 = node_table["rows"]["etcd-fsync"]["hostdisk / node2"]
    assert node2["n"] == 2 and all("fio-node2" in s for s in node2["sources"])


def test_queue_depth_sweep_gives_response_curves(report) -> None:
    out, data = report
    docs = documents(data)
    (sweep,) = [s for s in data["sweeps"] if s["family"] == "randread"]
    assert sweep["option"] == "iodepth" and sweep["op"] == "read"
    assert set(sweep["curves"]) == {"hostdisk", "loop"}
    for points in sweep["curves"].values():
        assert [p["setting"] for p in points] == list(QUEUE_DEPTHS)
        for point in points:
            job = fio_jobs(docs[point["source"]])[0]
            assert point["iops"] == job["read"]["iops"]
            assert point["mean"] == job["read"]["clat_ns"]["mean"] / 1e9
    # Rows tell the settings apart.
    rows = data["tables"]["read-p99"]["rows"]
    assert {f"randread [iodepth={qd}]" for qd in QUEUE_DEPTHS} <= set(rows)
    assert "Response curves" in (out / "report.md").read_text()


def test_throttled_partway_shows_a_step(report) -> None:
    out, data = report
    (line,) = [t for t in data["timelines"] if t["group"] == "throttled"]
    assert line["family"] == "burst" and line["op"] == "write"
    assert [j["job"] for j in line["jobs"]] == [f"burst.{i}" for i in range(BURST_JOBS)]
    iops = line["iops"]
    step = line["iops_step"]
    assert step is not None, iops
    assert 2 <= step["at"] <= 6, iops
    assert step["ratio"] < 0.2, iops  # far below: from loop-device speed to the limit
    # Every job after the step ran at the limit; every one before it well above it.
    assert all(v <= THROTTLE_IOPS * 1.3 for v in iops[step["at"] + 1 :]), iops
    assert all(v > THROTTLE_IOPS * 5 for v in iops[: step["at"] - 1]), iops
    assert line["p99_step"] is not None and line["p99_step"]["ratio"] > 2
    markdown = (out / "report.md").read_text()
    assert "burst (write) on throttled / node1: IOPS steps from" in markdown


def test_baseline_comparison_and_geometric_mean(report) -> None:
    _, data = report
    (comparison,) = [c for c in data["comparisons"] if c["id"] == "cmp-read-p99"]
    assert comparison["baseline"] == "hostdisk"
    loop = comparison["candidates"]["loop"]
    table = data["tables"]["read-p99"]["rows"]
    ratios = []
    for row, values in loop["rows"].items():
        base, cand = table[row]["hostdisk"]["value"], table[row]["loop"]["value"]
        assert values == {"baseline": base, "candidate": cand, "ratio": cand / base}
        ratios.append(cand / base)
    assert len(ratios) == len(QUEUE_DEPTHS)
    geomean = math.exp(statistics.fmean(math.log(r) for r in ratios))
    assert math.isclose(loop["geomean"], geomean, rel_tol=1e-12)


def test_battery_charts_and_html(report, tmp_path: Path) -> None:
    out, data = report
    kinds = {Path(c).name.split("-", 1)[1].split("-")[0] for c in data["charts"]}
    assert {"sync", "read", "write", "cmp", "curve", "timeline"} <= kinds, kinds
    for chart in data["charts"]:
        check_png(out / chart)
    check_html_in_chromium(out / "report.html", tmp_path)


def test_battery_as_tar_gz_gives_the_same_numbers(battery, report, tmp_path: Path) -> None:
    root, _ = battery
    _, folder_data = report
    archive = tmp_path / "battery.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(root, arcname=root.name)
    out = tmp_path / "out"
    result = fioprobe("report", str(archive), "-o", str(out), "--baseline", "hostdisk",
                      "--quiet")  # fmt: skip
    assert result.returncode == 0, result.stderr.decode()
    data = json.loads((out / "report.json").read_text())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["battery.tar.gz", "out"]

    def values(d: dict) -> dict:
        return {
            tid: {r: {g: c["values"] for g, c in cells.items()} for r, cells in t["rows"].items()}
            for tid, t in d["tables"].items()
        }

    assert values(data) == values(folder_data)
    assert all(e["source"].startswith(f"{archive}/{root.name}/bat1_") for e in data["entries"])
