"""Probe profiles: safe by construction, and within their declared budget when run for real."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from fioprobe.fio.profiles import (
    ProfileError,
    default_jobs_dir,
    load_profile,
    parse_profile,
    parse_size,
)
from support import fixtures as fx

PROFILES = sorted(p.stem for p in default_jobs_dir().glob("*.fio"))
slow_dir_factory = fx.slow_dir_factory
throttled_loop_factory = fx.throttled_loop_factory


def test_the_designs_six_profiles_exist() -> None:
    """The design's six; a new profile is one more file in jobs/, tested below like these."""
    assert {
        "etcd-fsync", "randread-iops", "randwrite-iops", "seqread-bw", "seqwrite-bw",
        "burst-ceiling",
    } <= set(PROFILES)  # fmt: skip


@pytest.mark.parametrize("name", PROFILES)
def test_profile_header_states_purpose_budget_and_users(name: str) -> None:
    text = (default_jobs_dir() / f"{name}.fio").read_text()
    for heading in ("# Measures:", "# Budget:", "# Used by:", "# Run by hand:"):
        assert heading in text, heading
    profile = load_profile(name)
    assert profile.io_bytes_max <= profile.budget_bytes
    assert 0 < profile.runtime_seconds <= profile.budget_seconds


BAD_PROFILES = [
    ("filename=/dev/sda", "option 'filename' is not allowed"),
    ("directory=/etc", "option 'directory' is not allowed"),
    ("exec_prerun=rm -rf /", "option 'exec_prerun' is not allowed"),
    ("write_lat_log=/tmp/x", "option 'write_lat_log' is not allowed"),
    ("ioengine=sg", "ioengine=sg: must be one of"),
    ("size=${SIZE}", "'$' is not allowed"),
    ("size=64m", "exceeds the profile's budget"),
    ("runtime=600", "at most the budget of 10s"),
]


@pytest.mark.parametrize(("line", "message"), BAD_PROFILES, ids=[b[0] for b in BAD_PROFILES])
def test_unsafe_or_over_budget_profile_is_refused(line: str, message: str) -> None:
    text = (
        "# fioprobe-budget-bytes: 33554432\n# fioprobe-budget-seconds: 10\n"
        f"[p]\nrw=write\nbs=4k\nsize=16m\nruntime=5\n{line}\n"
    )
    with pytest.raises(ProfileError, match=message.replace("$", r"\$").replace("{", r"\{")):
        parse_profile("p", Path("p.fio"), text)


#: (job lines under a 4 MiB, 10 s budget, the exact message). Layout: fio lays out nrfiles x
#: filesize per job whatever `size` says, and fio's byte counts never show it. Memory: fio
#: allocates bs x iodepth x numjobs of buffers, which no byte budget bounds. `thread`: the
#: runner's own `thread` keeps every job in fio's process group; a profile cannot undo it.
BAD_LAYOUT_MEMORY_THREAD = [
    (
        "rw=read\nsize=4m\nnrfiles=64\nfilesize=8m",
        "p: up to 1073741824 bytes of IO per run exceeds the profile's budget of 4194304 bytes",
    ),
    (
        "rw=write\noverwrite=1\nsize=1m\nnrfiles=2\nfilesize=2m",
        "p: up to 8388608 bytes of IO per run exceeds the profile's budget of 4194304 bytes",
    ),
    (
        "rw=write\nsize=1m\nnrfiles=8\nfilesize=1m\nnumjobs=2",
        "p: up to 16777216 bytes of IO per run exceeds the profile's budget of 4194304 bytes",
    ),
    (
        "rw=write\nsize=4m\nio_size=1m\nbs=32m",
        "p: bs of 33554432 bytes exceeds the limit of 16777216 bytes",
    ),
    (
        "rw=write\nsize=4m\nio_size=1m\nbs=4m\niodepth=64\nnumjobs=4",
        "p: bs x iodepth x numjobs is 1073741824 bytes of IO buffers, over the limit of "
        "67108864 bytes",
    ),
    (
        "rw=write\nsize=1m\nbs=1m\niodepth=64\nnumjobs=2",
        "p: bs x iodepth x numjobs is 134217728 bytes of IO buffers, over the limit of "
        "67108864 bytes",
    ),
    (
        "rw=write\nsize=1m\nbs=16m\niodepth=5",
        "p: bs x iodepth x numjobs is 83886080 bytes of IO buffers, over the limit of "
        "67108864 bytes",
    ),
    (
        "rw=write\nsize=1m\nthread=0",
        "p.fio:7: option 'thread' is not allowed in a probe profile; allowed: see OPTIONS in "
        "fioprobe/fio/profiles.py (files, devices, logs, commands and includes never are: the "
        "runner supplies the directory)",
    ),
    (
        "rw=write\nsize=1m\nthread",
        "p.fio:7: option 'thread' is not allowed in a probe profile",
    ),
    ("rw=write\nsize=1m\nbsrange=4k-64m", "p.fio:7: option 'bsrange' is not allowed"),
    ("rw=write\nsize=1m\nbssplit=4k/50:64m/50", "p.fio:7: option 'bssplit' is not allowed"),
    ("rw=write\nsize=1m\nbs=4k,64m", "p.fio:7: bs=4k,64m: not a size: '4k,64m'"),
]


@pytest.mark.parametrize(
    ("lines", "message"),
    BAD_LAYOUT_MEMORY_THREAD,
    ids=[b[0].replace("\n", ",") for b in BAD_LAYOUT_MEMORY_THREAD],
)
def test_layout_memory_and_thread_are_bounded(lines: str, message: str) -> None:
    budget = "# fioprobe-budget-bytes: 4194304\n# fioprobe-budget-seconds: 10\n"
    text = f"{budget}[p]\nruntime=5\n{lines}\n"
    with pytest.raises(ProfileError) as refused:
        parse_profile("p", Path("p.fio"), text)
    assert str(refused.value).startswith(message), str(refused.value)


def test_the_limits_leave_every_shipped_profile_valid() -> None:
    """The largest shipped buffers are seqread-bw's 4 MiB; the limits are far above."""
    from fioprobe.fio.profiles import MAX_BLOCK_BYTES, MAX_BUFFER_BYTES

    for name in PROFILES:
        profile = load_profile(name)
        assert profile.block_bytes <= MAX_BLOCK_BYTES and profile.buffer_bytes <= MAX_BUFFER_BYTES
        assert profile.footprint_bytes <= profile.io_bytes_max


def test_the_rendered_job_keeps_every_job_a_thread() -> None:
    profile = load_profile("seqread-bw")
    rendered = profile.render("/probe/.fioprobe-run")
    lines = rendered.splitlines()
    assert lines[:3] == ["[global]", "directory=/probe/.fioprobe-run", "thread"]
    assert [line for line in lines if line.startswith("thread")] == ["thread"]


@pytest.mark.slow
def test_a_layout_profile_at_its_budget_lays_out_no_more(tmp_path: Path) -> None:
    """The bound is fio's: a read profile with nrfiles x filesize above size, run for real,
    puts exactly its computed footprint on disk (fio's byte counts show only the reads)."""
    text = (
        "# fioprobe-budget-bytes: 16777216\n# fioprobe-budget-seconds: 10\n"
        "[p]\nrw=read\nbs=4k\nsize=1m\nnrfiles=4\nfilesize=2m\nruntime=5\n"
    )
    profile = parse_profile("p", tmp_path / "p.fio", text)
    assert profile.io_bytes_max == 8 * 1024**2 + 8 * 1024**2  # laid out, then read at most
    directory = tmp_path / "run"
    directory.mkdir()
    (tmp_path / "probe.fio").write_text(profile.render(str(directory)))
    subprocess.run(
        ["fio", "--output-format=json", f"--output={tmp_path}/out.json", f"{tmp_path}/probe.fio"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    laid_out = sum(p.stat().st_size for p in directory.iterdir())
    assert laid_out == profile.footprint_bytes == 8 * 1024**2
    job = json.loads((tmp_path / "out.json").read_text())["jobs"][0]
    assert job["read"]["io_bytes"] + laid_out <= profile.io_bytes_max


def test_profile_without_budget_is_refused() -> None:
    with pytest.raises(ProfileError, match="fioprobe-budget-bytes"):
        parse_profile("p", Path("p.fio"), "[p]\nrw=write\nsize=1m\nruntime=1\n")


def test_overrides_stay_within_budget() -> None:
    profile = load_profile("etcd-fsync")
    assert profile.with_overrides({"size": "2m", "runtime": "10"}).size_bytes == 2 * 1024**2
    with pytest.raises(ProfileError, match="exceeds the profile's budget"):
        profile.with_overrides({"size": "5m"})
    with pytest.raises(ProfileError, match="cannot be overridden"):
        profile.with_overrides({"filename": "/dev/sda"})
    rendered = profile.with_overrides({"size": "2m"}).render("/probe/.fioprobe-run")
    assert rendered.startswith("[global]\ndirectory=/probe/.fioprobe-run\nthread\n")
    assert "size=2m" in rendered and "size=4m" not in rendered


def run_profile(
    name: str,
    directory: Path,
    prefix: list[str] | None = None,
    overrides: dict[str, str] | None = None,
) -> tuple[dict, float]:
    """Run the profile exactly as the runner renders it; returns fio's job and wall time."""
    profile = load_profile(name).with_overrides(overrides or {})
    directory = directory / "run"
    directory.mkdir()
    job_file = directory / "probe.fio"
    job_file.write_text(profile.render(str(directory)))
    output = directory / "out.json"
    started = time.monotonic()
    subprocess.run(
        [*(prefix or []), "fio", "--output-format=json+", f"--output={output}", str(job_file)],
        check=True, capture_output=True, timeout=profile.budget_seconds * 3 + 60,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    job = json.loads(output.read_text())["jobs"][0]
    shutil.rmtree(directory)
    return job, elapsed


def assert_within_budget(name: str, job: dict) -> None:
    profile = load_profile(name)
    io_bytes = sum(job[op]["io_bytes"] for op in ("read", "write", "trim"))
    assert io_bytes <= profile.budget_bytes, (name, io_bytes, profile.budget_bytes)
    # fio's job_runtime is in ms; allow fio's own scheduling slack of half a second.
    assert job["job_runtime"] <= profile.budget_seconds * 1000 + 500, (name, job["job_runtime"])


@pytest.mark.slow
@pytest.mark.parametrize("name", PROFILES)
def test_profile_within_budget_on_normal_disk(name: str, tmp_path: Path) -> None:
    job, _ = run_profile(name, tmp_path)
    assert_within_budget(name, job)
    assert job["error"] == 0


#: Overrides at the very limit each profile allows: its whole byte and time budget.
AT_THE_LIMIT = {
    "etcd-fsync": {"size": "4m", "runtime": "20"},
    "randwrite-iops": {"size": "32m", "io_size": "64m", "runtime": "10"},
    "seqread-bw": {"size": "64m", "io_size": "256m", "runtime": "10"},
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(AT_THE_LIMIT))
def test_overrides_at_the_limit_stay_within_budget(name: str, tmp_path: Path) -> None:
    profile = load_profile(name).with_overrides(AT_THE_LIMIT[name])
    assert profile.io_bytes_max == profile.budget_bytes  # really at the limit
    job, _ = run_profile(name, tmp_path, overrides=AT_THE_LIMIT[name])
    assert_within_budget(name, job)
    assert job["error"] == 0


@pytest.mark.slow
def test_etcd_fsync_ends_at_runtime_cap_on_slow_disk(slow_dir_factory) -> None:
    """15 ms per fdatasync: 4 MiB at bs=2300 would take ~27 s; the 15 s runtime cap ends it."""
    slow = slow_dir_factory(15)
    job, elapsed = run_profile("etcd-fsync", slow.mountpoint)
    assert_within_budget("etcd-fsync", job)
    assert job["write"]["io_bytes"] < load_profile("etcd-fsync").size_bytes  # cut by the cap
    assert job["sync"]["lat_ns"]["percentile"]["50.000000"] >= 15_000_000
    assert elapsed < 20 + 10  # the budget, plus fio start-up and file layout


@pytest.mark.slow
@pytest.mark.parametrize("name", [p for p in PROFILES if p != "etcd-fsync"])
def test_direct_io_profiles_end_at_runtime_cap_when_throttled(
    name: str, throttled_loop_factory
) -> None:
    """Throttled so that no profile can finish its bytes; each must stop at its runtime.

    The limit lets at most half of the profile's IO through within its runtime, even when
    every IO is a whole block: at a flat 50 IOPS, 1 MiB blocks (50 MiB/s) could finish
    seqwrite-bw's 128 MiB in under its 5 s, depending on how the kernel counts split bios.
    """
    profile = load_profile(name)
    block = parse_size(profile.option("bs") or "4k")
    io_size = parse_size(profile.option("io_size") or "0") or profile.size_bytes
    limit = min(50, int(io_size / block / profile.runtime_seconds / 2))
    slow = throttled_loop_factory(size_bytes=512 * 1024**2, read_iops=limit, write_iops=limit)
    job, _ = run_profile(name, slow.path, prefix=slow.cgroup.prefix)
    assert_within_budget(name, job)
    assert job["job_runtime"] >= profile.runtime_seconds * 1000 * 0.9  # ran to its cap
    iops = job["read"]["iops"] + job["write"]["iops"]
    assert iops < limit * 1.3, (iops, limit)


def test_every_job_runs_as_a_thread_of_the_one_fio_process(tmp_path: Path) -> None:
    """What a timeout kills is fio's process group: the rendered job keeps fio's jobs as its
    threads, so fio starts no process of its own (a forked job would call setsid())."""
    text = (
        "# fioprobe-budget-bytes: 67108864\n# fioprobe-budget-seconds: 10\n"
        "[p]\nrw=write\nbs=4k\nsize=1m\nnumjobs=4\nruntime=3\ntime_based\nrate=64k\n"
    )
    profile = parse_profile("p", tmp_path / "p.fio", text)
    directory = tmp_path / "run"
    directory.mkdir()
    job = tmp_path / "probe.fio"
    job.write_text(profile.render(str(directory)))
    fio = subprocess.Popen(
        ["fio", "--output=/dev/null", str(job)], start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        threads = 0
        while time.monotonic() < deadline and fio.poll() is None and threads < 5:
            threads = len(list(Path(f"/proc/{fio.pid}/task").iterdir()))
            time.sleep(0.1)
        children = [
            p for p in Path("/proc").iterdir()
            if p.name.isdigit() and _parent(p) == fio.pid
        ]  # fmt: skip
        assert threads >= 5, threads  # fio's main thread and the 4 jobs
        assert children == []
    finally:
        fio.kill()
        fio.wait(timeout=30)


def _parent(process: Path) -> int | None:
    try:
        status = (process / "status").read_text()
    except OSError:
        return None
    return next(
        (int(line.split()[1]) for line in status.splitlines() if line.startswith("PPid:")), None
    )
