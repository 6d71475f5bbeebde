"""The benchmark plan is strict, and no job file reaches a server without the probes' checks.

A fio server runs whatever a client sends, commands included. So a plan names no option of
its own choosing, every phase's job file is read back by the probes' allowlist and budget
check, and all of it happens before the first connection: the refusals below are checked
through the real command against a listening socket that counts connections, and none is
made.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest
from conftest import fioprobe
from fioprobe.distributed.jobs import checked_job, cleanup_job, phase_jobs
from fioprobe.distributed.plan import PHASES, PlanError, parse_plan

GOOD = """\
name: qualify-gp3
storageclass: gp3
servers: 2
budget:
  bytes_per_server: 1g
  seconds_per_server: 600
"""

#: (what, plan text, the exact message after "plan.yaml: ").
BAD = [
    ("unknown key", GOOD + "directory: /etc\n",
     "'directory': unknown key (expected one of: block_size, budget, direct, drop_caches, "
     "file_size, iodepth, iodepths, ioengine, jobs_per_server, loops, name, node_selector, "
     "phases, "
     "prepare_block_size, prepare_runtime, runtime, servers, storageclass, volume_size)"),
    ("unknown budget key", GOOD.replace("  seconds_per_server: 600\n",
                                        "  seconds_per_server: 600\n  iops: 5\n"),
     "budget.'iops': unknown key (expected one of: bytes_per_server, seconds_per_server)"),
    ("repeated key", GOOD + "name: other\n", "line 7: 'name' appears twice"),
    ("no name", GOOD.replace("name: qualify-gp3\n", ""),
     "name: is required (a lowercase name such as qualify-gp3)"),
    ("name with underscore", GOOD.replace("qualify-gp3", "qualify_gp3"),
     "name: 'qualify_gp3' is not a lowercase name such as qualify-gp3"),
    ("no budget", GOOD.split("budget:")[0],
     "budget: is required (bytes_per_server and seconds_per_server: what the whole "
     "benchmark may cost each server)"),
    ("budget without seconds", GOOD.replace("  seconds_per_server: 600\n", ""),
     "budget.seconds_per_server: is required"),
    ("engine that runs commands", GOOD + "ioengine: exec\n",
     "ioengine: 'exec' must be one of sync, psync, vsync, pvsync, pvsync2, libaio, io_uring, "
     "posixaio"),
    ("size with a path", GOOD + "file_size: /dev/sda\n",
     "file_size: '/dev/sda' is not a size such as 4k, 64m or 1g"),
    ("size as a list", GOOD + "block_size: [4k, 8k]\n",
     "block_size: must be a size such as 4k, 64m or 1g, got ['4k', '8k']"),
    ("too many jobs", GOOD + "jobs_per_server: 17\n",
     "jobs_per_server: must be a whole number from 1 to 16, got 17"),
    ("a boolean for a number", GOOD + "iodepth: true\n",
     "iodepth: must be a whole number from 1 to 256, got True"),
    ("unknown phase", GOOD + "phases: [prepare, seqread]\n",
     "phases: 'seqread' is not a phase (phases: prepare, randread, randwrite)"),
    ("repeated phase", GOOD + "phases: [randread, randread]\n",
     "phases: each phase at most once"),
    ("flag as text", GOOD + "direct: 'yes'\n", "direct: must be true or false, got 'yes'"),
    ("iodepth and iodepths", GOOD + "iodepth: 4\niodepths: [1, 8]\n",
     "iodepths: give iodepth or iodepths, not both"),
    ("iodepths repeated", GOOD + "iodepths: [1, 8, 1]\n", "iodepths: each IO depth at most once"),
    ("iodepths too deep", GOOD + "iodepths: [1, 512]\n",
     "iodepths: 512 is not a whole number from 1 to 256"),
    ("iodepths not a list", GOOD + "iodepths: 8\n",
     "iodepths: must be a list of 1 to 16 IO depths, got 8"),
    ("node selector value", GOOD + "node_selector: {disk: [a]}\n",
     "node_selector.disk: ['a'] is not a label value"),
    ("volume size not a quantity", GOOD + "volume_size: 40 gigs\n",
     "volume_size: must be a size such as 40Gi or 500Mi (each server's volume), got '40 gigs'"),
    ("volume size fractional", GOOD + "volume_size: 1.5\n",
     "volume_size: must be a size such as 40Gi or 500Mi (each server's volume), got 1.5"),
    # 4 files of 8g are 32 GiB; a 32Gi volume surely leaves 85 % of it to files.
    ("data set larger than the volume",
     GOOD.replace("1g", "200g") + "jobs_per_server: 4\nfile_size: 8g\nvolume_size: 32Gi\n",
     "the data set, jobs_per_server (4) files of file_size (8g), is 34359738368 bytes per "
     "server: more than a filesystem leaves to files on volume_size (34359738368 bytes, about "
     "85%: 29205777612); lower file_size or jobs_per_server, or give the servers larger "
     "volumes"),
    ("not a mapping", "- a\n- b\n",
     "a plan is a mapping of keys such as name, storageclass, budget"),
]  # fmt: skip


@pytest.mark.parametrize(("what", "text", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_plans(what: str, text: str, message: str) -> None:
    with pytest.raises(PlanError) as caught:
        parse_plan(text, "plan.yaml")
    assert str(caught.value) == f"plan.yaml: {message}", what


def test_defaults_and_phase_order() -> None:
    plan = parse_plan(GOOD + "phases: [randwrite, prepare]\n", "plan.yaml")
    assert plan.phases == ("prepare", "randwrite")  # always in their own order
    assert parse_plan(GOOD, "plan.yaml").phases == PHASES
    assert plan.budget.bytes_per_server == 1 << 30
    assert plan.volume_size is None  # unknown unless the plan says: nothing to check then


def test_a_data_set_that_fits_its_volume_is_accepted() -> None:
    """Two files of 32m on 76Mi: 64 MiB within the 85 % a filesystem surely leaves."""
    fits = parse_plan(GOOD + "volume_size: 76Mi\n", "plan.yaml")
    assert fits.volume_size == 76 << 20
    with pytest.raises(PlanError, match="more than a filesystem leaves to files"):
        parse_plan(GOOD + "volume_size: 75Mi\n", "plan.yaml")


#: (what, plan text additions, the message's start after "plan.yaml: ").
OVER_BUDGET = [
    # A read phase's bound counts laying its files out (fio does, when prepare was skipped).
    ("bytes", "file_size: 600m\njobs_per_server: 1\n",
     "phase randread: qualify-gp3-randread: up to 1258291200 bytes of IO per run exceeds the "
     "profile's budget of 1073741824 bytes"),
    ("bytes of all phases together", "file_size: 300m\njobs_per_server: 1\n",
     "the phases together can do up to 1258291200 bytes of IO per server, more than "
     "budget.bytes_per_server (1073741824)"),
    ("seconds", "runtime: 700\n", "phase randread: qualify-gp3-randread: runtime 700s must"),
    ("seconds of all phases together", "runtime: 300\nprepare_runtime: 10\n",
     "the phases together run up to 610s per server, more than budget.seconds_per_server"),
    ("memory", "block_size: 16m\niodepth: 8\n",
     "phase randread: qualify-gp3-randread: bs x iodepth x numjobs is 268435456 bytes"),
]  # fmt: skip


@pytest.mark.parametrize(("what", "extra", "message"), OVER_BUDGET, ids=[b[0] for b in OVER_BUDGET])
def test_budget_is_checked_as_a_profiles(what: str, extra: str, message: str) -> None:
    plan = parse_plan(GOOD + extra, "plan.yaml")
    with pytest.raises(PlanError) as caught:
        phase_jobs(plan)
    assert str(caught.value).startswith(f"plan.yaml: {message}"), what


#: Job files a server must never get, whoever wrote them: each is refused by the allowlist.
HOSTILE = [
    "exec_prerun=touch /tmp/owned",
    "ioengine=exec",
    "include /etc/fio.conf",
    "filename=/dev/sda",
    "directory=/etc",
    "write_bw_log=/tmp/log",
    "size=${HOME}",
    "mem=mmaphuge:/hugetlbfs/x",
    "thread=0",
]


@pytest.mark.parametrize("line", HOSTILE)
def test_hostile_job_lines_are_refused(line: str) -> None:
    plan = parse_plan(GOOD, "plan.yaml")
    text = (
        "# fioprobe-budget-bytes: 1000000\n# fioprobe-budget-seconds: 10\n"
        f"[global]\nsize=1m\nruntime=5\n{line}\n[bench]\nrw=randread\n"
    )
    with pytest.raises(PlanError, match=r"plan.yaml: phase randread: plan.yaml:\d+: "):
        checked_job(plan, "randread", text)


def test_sent_job_files_name_no_path() -> None:
    plan = parse_plan(GOOD, "plan.yaml")
    texts = [job.text for job in phase_jobs(plan)] + [cleanup_job(plan)]
    for text in texts:
        assert "directory" not in text and "filename" not in text and "$" not in text
        assert text.startswith("[global]\nthread\ngroup_reporting\n")
    assert "unlink=1" in texts[-1] and all("unlink" not in t for t in texts[:-1])


class _Listener:
    """A TCP socket on 127.0.0.1 that counts the connections made to it."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.running = True
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while self.running:
            try:
                connection, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            connection.close()

    def close(self) -> None:
        self.running = False
        self.thread.join(timeout=5)
        self.sock.close()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("ioengine: exec\n", "ioengine: 'exec' must be one of"),
        ("directory: /etc\n", "'directory': unknown key"),
        ("file_size: 2g\n", "phase prepare: qualify-gp3-prepare: up to"),
    ],
)
def test_refused_before_any_server_is_contacted(tmp_path: Path, extra: str, message: str) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(GOOD + extra)
    one, two = _Listener(), _Listener()
    try:
        done = fioprobe(
            "distributed", "--plan", str(plan), "--servers",
            f"127.0.0.1:{one.port},127.0.0.1:{two.port}", "-o", str(tmp_path / "out"),
        )  # fmt: skip
    finally:
        one.close()
        two.close()
    assert done.returncode == 2, done.stderr
    assert f"{plan}: {message}" in done.stderr.decode()
    assert (one.accepted, two.accepted) == (0, 0)
    assert not (tmp_path / "out").exists()


def test_cache_drop_says_where_the_node_does_not_allow_it(tmp_path: Path) -> None:
    """A node that refuses the drop (here: the target is a directory, as a read-only
    /proc/sys refuses in a container) gets one clear line, and the benchmark goes on."""
    from fioprobe.distributed.benchmark import drop_caches

    line = drop_caches(tmp_path)
    assert line.startswith("cache drop: not allowed on this node (")
    assert line.endswith("each server still drops its job files' cached pages (fio's invalidate)")


def test_a_node_that_refuses_the_drop_is_never_synced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The drop is tried before the node-wide sync(): a pod that may not drop (the usual
    case) does not write back every dirty page of its node for nothing."""
    from fioprobe.distributed import benchmark

    synced: list[bool] = []
    monkeypatch.setattr(benchmark.os, "sync", lambda: synced.append(True))
    assert benchmark.drop_caches(tmp_path).startswith("cache drop: not allowed on this node (")
    assert synced == []


def test_a_sync_that_takes_too_long_skips_the_drop_within_its_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fioprobe.distributed import benchmark

    release = threading.Event()
    monkeypatch.setattr(benchmark.os, "sync", lambda: release.wait(10))
    target = tmp_path / "drop_caches"
    target.write_text("")
    started = time.monotonic()
    try:
        line = benchmark.drop_caches(target, sync_seconds=0.3)
    finally:
        release.set()
    assert time.monotonic() - started < 5
    assert line.startswith("cache drop: skipped, the node's sync() took longer than 0.3 s"), line
    assert target.read_text() == ""  # nothing dropped
    assert benchmark.drop_caches(target, sync_seconds=5) == (
        "cache drop: this node's page cache dropped before the phase"
    )
    assert target.read_text() == "3\n"
    # A node that takes the file but refuses the write (here: a full device) gets its line.
    line = benchmark.drop_caches(Path("/dev/full"), sync_seconds=5)
    assert line == "cache drop: refused by this node (No space left on device)", line


def test_a_sweep_runs_each_random_phase_per_iodepth_within_one_budget() -> None:
    plan = parse_plan(GOOD + "iodepths: [1, 8]\n", "plan.yaml")
    jobs = phase_jobs(plan)
    assert [job.phase for job in jobs] == [
        "prepare", "randread-qd1", "randread-qd8", "randwrite-qd1", "randwrite-qd8",
    ]  # fmt: skip
    assert [job.profile.option("iodepth") for job in jobs] == ["1", "1", "8", "1", "8"]
    # Five runs of 5 s (prepare: 60 s) must fit the seconds together.
    with pytest.raises(PlanError, match="the phases together run up to 80s per server"):
        phase_jobs(parse_plan(GOOD.replace("600", "70") + "iodepths: [1, 8]\n", "plan.yaml"))
