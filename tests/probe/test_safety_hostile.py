"""Hostile profiles, overrides, configurations and planted files, against the real fio.

Every case runs the real CLI with a canary command and a decoy tree beside the probe
directory. What must hold each time: the canary never ran, nothing outside the probe
directory was created, changed or truncated (a before/after listing of the decoy tree), the
probe directory holds nothing but fioprobe's own state afterwards, the command refused with
the documented exit status and one line that says why, and nothing was pushed except the
documented failure.
"""

# ruff: noqa: E501 - the case tables read best one case per line
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import fioprobe, gateway_group, gauge
from support import services

BUDGET = "# fioprobe-budget-bytes: 4194304\n# fioprobe-budget-seconds: 20\n"
BASE = "ioengine=sync\nrw=write\nbs=4k\nsize=1m\nruntime=5\n"

#: (id, profile body after the budget header; {decoy} and {canary} are filled in, and the
#: expected words of the one-line error).
HOSTILE_PROFILES: list[tuple[str, str, str]] = [
    ("include-bare", "[p]\n" + BASE + "include {decoy}/evil.fio\n", "'include {decoy}/evil.fio' is not allowed"),
    ("include-eq", "[p]\n" + BASE + "include={decoy}/evil.fio\n", "'include' is not allowed"),
    ("exec-prerun", "[p]\n" + BASE + "exec_prerun={canary}\n", "'exec_prerun' is not allowed"),
    ("exec-postrun", "[p]\n" + BASE + "exec_postrun={canary}\n", "'exec_postrun' is not allowed"),
    ("filename-abs", "[p]\n" + BASE + "filename={decoy}/target\n", "'filename' is not allowed"),
    ("filename-rel", "[p]\n" + BASE + "filename=../../x\n", "'filename' is not allowed"),
    ("filename-dev", "[p]\n" + BASE + "filename=/dev/null\n", "'filename' is not allowed"),
    ("directory", "[p]\n" + BASE + "directory={decoy}\n", "'directory' is not allowed"),
    ("opendir", "[p]\n" + BASE + "opendir={decoy}\n", "'opendir' is not allowed"),
    ("filename-format", "[p]\n" + BASE + "filename_format=x.$jobnum\n", "'$' is not allowed"),
    ("iomem-mmap", "[p]\n" + BASE + "iomem=mmap:{decoy}/big\n", "'iomem' is not allowed"),
    ("mem-mmap", "[p]\n" + BASE + "mem=mmap:{decoy}/big\n", "'mem' is not allowed"),
    ("iomem-huge", "[p]\n" + BASE + "iomem=mmaphuge:{decoy}/big\n", "'iomem' is not allowed"),
    ("lat-log", "[p]\n" + BASE + "write_lat_log={decoy}/lat\n", "'write_lat_log' is not allowed"),
    ("bw-log", "[p]\n" + BASE + "write_bw_log=x\n", "'write_bw_log' is not allowed"),
    ("iops-log", "[p]\n" + BASE + "write_iops_log=x\n", "'write_iops_log' is not allowed"),
    ("hist-log", "[p]\n" + BASE + "write_hist_log=x\n", "'write_hist_log' is not allowed"),
    ("write-iolog", "[p]\n" + BASE + "write_iolog={decoy}/iolog\n", "'write_iolog' is not allowed"),
    ("read-iolog", "[p]\n" + BASE + "read_iolog={decoy}/iolog\n", "'read_iolog' is not allowed"),
    ("engine-external", "[p]\n" + BASE.replace("ioengine=sync", "ioengine=external:{decoy}/x.so"), "ioengine=external"),
    ("engine-exec", "[p]\n" + BASE.replace("ioengine=sync", "ioengine=exec"), "ioengine=exec"),
    ("engine-sg", "[p]\n" + BASE.replace("ioengine=sync", "ioengine=sg"), "ioengine=sg"),
    ("engine-net", "[p]\n" + BASE.replace("ioengine=sync", "ioengine=net"), "ioengine=net"),
    ("program", "[p]\n" + BASE + "program={canary}\n", "'program' is not allowed"),
    ("trigger", "[p]\n" + BASE + "trigger={canary}\n", "'trigger' is not allowed"),
    ("trigger-file", "[p]\n" + BASE + "trigger-file={decoy}/t\n", "'trigger-file' is not allowed"),
    ("trigger-remote", "[p]\n" + BASE + "trigger-remote={canary}\n", "'trigger-remote' is not allowed"),
    ("env-var", "[p]\n" + BASE.replace("size=1m", "size=${{SIZE}}"), "'$' is not allowed"),
    ("mb-memory", "[p]\n" + BASE.replace("size=1m", "size=$mb_memory"), "'$' is not allowed"),
    ("alias-readwrite", "[p]\n" + BASE.replace("rw=write", "readwrite=write"), "'readwrite' is not allowed"),
    ("alias-timeout", "[p]\n" + BASE.replace("runtime=5", "timeout=5"), "'timeout' is not allowed"),
    ("alias-blocksize", "[p]\n" + BASE.replace("bs=4k", "blocksize=4k"), "'blocksize' is not allowed"),
    ("uppercase-key", "[p]\n" + BASE + "FILENAME=/etc/passwd\n", "'FILENAME' is not allowed"),
    ("lockfile", "[p]\n" + BASE + "lockfile=exclusive\n", "'lockfile' is not allowed"),
    ("cgroup", "[p]\n" + BASE + "cgroup=evil\n", "'cgroup' is not allowed"),
    ("ioscheduler", "[p]\n" + BASE + "ioscheduler=none\n", "'ioscheduler' is not allowed"),
    ("replay-redirect", "[p]\n" + BASE + "replay_redirect=/dev/sda\n", "'replay_redirect' is not allowed"),
    ("fill-device", "[p]\n" + BASE + "fill_device=1\n", "'fill_device' is not allowed"),
    ("verify", "[p]\n" + BASE + "verify=md5\n", "'verify' is not allowed"),
    ("value-list", "[p]\n" + BASE.replace("bs=4k", "bs=4k,../x"), "bs=4k,../x"),
    ("rw-offset", "[p]\n" + BASE.replace("rw=write", "rw=write:../x"), "rw=write:../x"),
    ("numjobs", "[p]\n" + BASE + "numjobs=16\n", "exceeds the profile's budget"),
    ("numjobs-huge", "[p]\n" + BASE + "numjobs=1000\n", "numjobs=1000"),
    ("loops", "[p]\n" + BASE + "loops=10\n", "exceeds the profile's budget"),
    ("nrfiles-filesize", "[p]\n" + BASE.replace("size=1m", "nrfiles=8\nfilesize=1m"), "exceeds the profile's budget"),
    ("time-based", "[p]\n" + BASE + "time_based\n", "time_based without rate"),
    ("rate-too-high", "[p]\n" + BASE + "time_based\nrate=10m\n", "exceeds the profile's budget"),
    ("size-huge", "[p]\n" + BASE.replace("size=1m", "size=1t"), "exceeds the profile's budget"),
    ("global-second", "[p]\n" + BASE + "[global]\nbs=4k\n", "[global] may only come first"),
    ("two-jobs", "[p]\n" + BASE + "[q]\n" + BASE, "[q] is a second"),
    ("global-directory", "[global]\ndirectory={decoy}\n[p]\n" + BASE, "'directory' is not allowed"),
    ("bad-header", "[p\n" + BASE, "is not a [section] header"),
    ("section-path", "[../p]\n" + BASE, "is not a plain lowercase name"),
    ("no-job", "[global]\n" + BASE, "needs one job section"),
]  # fmt: skip


def test_there_are_at_least_forty_hostile_profiles() -> None:
    assert len(HOSTILE_PROFILES) >= 40


@pytest.fixture
def arena(tmp_path: Path) -> dict[str, Path]:
    """A probe directory, a decoy tree beside it, a canary command and a jobs directory."""
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    (decoy / "big").write_bytes(b"x" * 100_000)
    (decoy / "target").write_text("keep me\n")
    (decoy / "iolog").write_text("fio version 2 iolog\n")
    canary_marker = tmp_path / "canary-ran"
    canary = tmp_path / "canary.sh"
    canary.write_text(f"#!/bin/sh\ntouch {canary_marker}\n")
    canary.chmod(0o755)
    (decoy / "evil.fio").write_text(f"[evil]\nexec_prerun={canary}\nfilename={decoy}/target\n")
    probe = tmp_path / "probe"
    probe.mkdir()
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    return {"decoy": decoy, "canary": canary, "marker": canary_marker, "probe": probe,
            "jobs": jobs, "root": tmp_path}  # fmt: skip


def listing(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every entry under `root`: mode, size and a content hash (no symlink followed)."""
    result = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            info = path.lstat()
            digest = ""
            if path.is_file() and not path.is_symlink():
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            result[str(path.relative_to(root))] = (info.st_mode, info.st_size, digest)
    return result


def probe_leftovers(probe: Path) -> list[str]:
    """What is in the probe directory besides fioprobe's state directory and its files."""
    return sorted(str(p.relative_to(probe)) for p in probe.rglob("*")
                  if p.parts[len(probe.parts)] != ".fioprobe-state")  # fmt: skip


def one_line_error(stderr: bytes) -> str:
    lines = stderr.decode().strip().splitlines()
    assert len(lines) == 1, lines
    assert "Traceback" not in lines[0]
    return lines[0]


@pytest.mark.parametrize(("body", "expected"), [(b, e) for _, b, e in HOSTILE_PROFILES],
                         ids=[i for i, _, _ in HOSTILE_PROFILES])  # fmt: skip
def test_hostile_profile_is_refused_and_touches_nothing(
    arena: dict[str, Path], pushgateway: services.Service, body: str, expected: str
) -> None:
    fill = {"decoy": arena["decoy"], "canary": arena["canary"]}
    (arena["jobs"] / "hostile.fio").write_text(BUDGET + body.format(**fill))
    before = listing(arena["decoy"])
    result = fioprobe("probe", "--profile", "hostile", "--jobs-dir", str(arena["jobs"]),
                      "--dir", str(arena["probe"]), "--gateway", pushgateway.url,
                      "--storageclass", "hostile", "--quiet")  # fmt: skip
    assert result.returncode == 2, result.stderr
    line = one_line_error(result.stderr)
    assert "unsafe_target" in line and expected.format(**fill) in line, line
    assert not arena["marker"].exists(), "the canary command ran"
    assert listing(arena["decoy"]) == before
    assert probe_leftovers(arena["probe"]) == []
    group = gateway_group(pushgateway, storageclass="hostile", profile="hostile")
    assert group is not None, "the refusal was not pushed"
    assert gauge(group, "fioprobe_success") == 0
    assert [m["labels"]["reason"] for m in group["fioprobe_failure_reason_info"]] == [
        "unsafe_target"
    ]
    assert "fioprobe_sync_latency_seconds" not in group


HOSTILE_CONFIGS: list[tuple[str, str, str]] = [
    ("override-injection", "profiles: [{{name: etcd-fsync, size: '1m\\nexec_prerun={canary}'}}]",
     "override size="),
    ("override-dollar", "profiles: [{{name: etcd-fsync, size: '${{SIZE}}'}}]", "override size="),
    ("override-over-budget", "profiles: [{{name: etcd-fsync, size: 1g}}]", "exceeds the profile's budget"),
    ("override-unknown", "profiles: [{{name: etcd-fsync, filename: /etc/passwd}}]", "unknown key"),
    ("override-runtime", "profiles: [{{name: etcd-fsync, runtime: '1; exec'}}]", "override runtime="),
    ("profile-path", "profiles: ['../../decoy/evil']", "is not a plain name"),
    ("relative-directory", "profiles: [etcd-fsync]\n    directory: probe", "must be an absolute path"),
]  # fmt: skip


@pytest.mark.parametrize(("profiles", "expected"), [(p, e) for _, p, e in HOSTILE_CONFIGS],
                         ids=[i for i, _, _ in HOSTILE_CONFIGS])  # fmt: skip
def test_hostile_configuration_is_refused_before_anything_runs(
    arena: dict[str, Path], pushgateway: services.Service, profiles: str, expected: str
) -> None:
    fill = {"decoy": arena["decoy"], "canary": arena["canary"]}
    config = arena["root"] / "config.yaml"
    directory = "" if "directory:" in profiles else f"\n    directory: {arena['probe']}"
    config.write_text(
        f"pushgateway: {{url: '{pushgateway.url}'}}\ntargets:\n  - name: hostile"
        f"{directory}\n    {profiles.format(**fill)}\n"
    )
    before = listing(arena["decoy"])
    result = fioprobe("run", "--config", str(config), "--quiet")
    assert result.returncode == 2, result.stderr
    line = one_line_error(result.stderr)
    assert expected in line, line
    assert not arena["marker"].exists()
    assert listing(arena["decoy"]) == before
    assert probe_leftovers(arena["probe"]) == []
    assert not (arena["probe"] / ".fioprobe-state").exists()
    assert gateway_group(pushgateway, storageclass="hostile", profile="etcd-fsync") is None


def test_credentials_in_the_gateway_url_are_refused_and_never_echoed(
    arena: dict[str, Path],
) -> None:
    config = arena["root"] / "config.yaml"
    config.write_text(
        "pushgateway: {url: 'http://probe:s3cr3t-pw@127.0.0.1:9/'}\ntargets:\n"
        f"  - {{name: a, directory: {arena['probe']}, profiles: [etcd-fsync]}}\n"
    )
    result = fioprobe("run", "--config", str(config))
    assert result.returncode == 2
    assert "must not hold credentials" in one_line_error(result.stderr)
    cli = fioprobe("probe", "--profile", "etcd-fsync", "--dir", str(arena["probe"]),
                   "--storageclass", "a", "--gateway", "http://probe:s3cr3t-pw@127.0.0.1:9/")  # fmt: skip
    assert cli.returncode == 2
    for output in (result.stdout, result.stderr, cli.stdout, cli.stderr):
        assert b"s3cr3t" not in output


# --- planted files ------------------------------------------------------------------------


def plant_state_symlink(arena: dict[str, Path]) -> str:
    (arena["probe"] / ".fioprobe-state").symlink_to(arena["decoy"])
    return "state_error"


def plant_run_dir_symlink(arena: dict[str, Path]) -> str:
    (arena["probe"] / ".fioprobe-run").symlink_to(arena["decoy"])
    return "unsafe_target"


def plant_lock_symlink(arena: dict[str, Path]) -> str:
    state = arena["probe"] / ".fioprobe-state"
    state.mkdir()
    lock = state / "storageclass-planted_profile-etcd-fsync.json.lock"
    lock.symlink_to(arena["decoy"] / "target")
    return "state_error"


def plant_state_file_symlink(arena: dict[str, Path]) -> str:
    state = arena["probe"] / ".fioprobe-state"
    state.mkdir()
    (state / "storageclass-planted_profile-etcd-fsync.json").symlink_to(arena["decoy"] / "target")
    return "state_error"


PLANTS = [plant_state_symlink, plant_run_dir_symlink, plant_lock_symlink, plant_state_file_symlink]


@pytest.mark.parametrize("plant", PLANTS, ids=[p.__name__ for p in PLANTS])
def test_planted_symlinks_are_never_followed(
    arena: dict[str, Path], pushgateway: services.Service, plant: object
) -> None:
    """On a volume declared the probe's own (its state lives there), a planted link is
    refused and nothing is created where it points."""
    reason = plant(arena)
    before = listing(arena["decoy"])
    result = fioprobe("probe", "--profile", "etcd-fsync", "--dir", str(arena["probe"]),
                      "--dedicated", "--gateway", pushgateway.url, "--storageclass", "planted",
                      "--probe-timeout", "60")  # fmt: skip
    assert result.returncode in (1, 2), result.stderr
    assert reason in one_line_error(result.stderr)
    assert listing(arena["decoy"]) == before
    group = gateway_group(pushgateway, storageclass="planted", profile="etcd-fsync")
    assert group is not None and gauge(group, "fioprobe_success") == 0
    assert [m["labels"]["reason"] for m in group["fioprobe_failure_reason_info"]] == [reason]


STATE_PLANTS = [plant_state_symlink, plant_lock_symlink, plant_state_file_symlink]


@pytest.mark.parametrize("plant", STATE_PLANTS, ids=[p.__name__ for p in STATE_PLANTS])
def test_state_planted_on_a_shared_volume_is_never_read(
    arena: dict[str, Path], pushgateway: services.Service, state_dir: Path, plant: object
) -> None:
    """On a shared volume (the default) the state never lives in the probe directory: what
    a tenant put at `.fioprobe-state` is neither read, nor followed, nor removed."""
    plant(arena)
    before = listing(arena["decoy"])
    planted = listing(arena["probe"])
    result = fioprobe("probe", "--profile", "etcd-fsync", "--dir", str(arena["probe"]),
                      "--gateway", pushgateway.url, "--storageclass", "planted", "--quiet")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert listing(arena["decoy"]) == before
    assert listing(arena["probe"]) == planted
    assert sorted(p.name for p in state_dir.iterdir()) == [
        "storageclass-planted_profile-etcd-fsync.json",
        "storageclass-planted_profile-etcd-fsync.json.lock",
    ]
    group = gateway_group(pushgateway, storageclass="planted", profile="etcd-fsync")
    assert gauge(group, "fioprobe_success") == 1 and gauge(group, "fioprobe_runs_total") == 1


def test_missing_probe_directory_is_reported_and_never_created(
    arena: dict[str, Path], pushgateway: services.Service
) -> None:
    missing = arena["root"] / "unmounted" / "probe"
    result = fioprobe("probe", "--profile", "etcd-fsync", "--dir", str(missing),
                      "--gateway", pushgateway.url, "--storageclass", "gone")  # fmt: skip
    assert result.returncode == 1
    assert "no_directory" in one_line_error(result.stderr)
    assert not missing.exists() and not missing.parent.exists()
    group = gateway_group(pushgateway, storageclass="gone", profile="etcd-fsync")
    assert group is not None
    assert [m["labels"]["reason"] for m in group["fioprobe_failure_reason_info"]] == [
        "no_directory"
    ]


def test_unmounted_volume_is_not_probed_in_its_place(
    arena: dict[str, Path], pushgateway: services.Service
) -> None:
    result = fioprobe("probe", "--profile", "etcd-fsync", "--dir", str(arena["probe"]),
                      "--require-mount-point", "--gateway", pushgateway.url,
                      "--storageclass", "unmounted")  # fmt: skip
    assert result.returncode == 1
    assert "is not a mount point" in one_line_error(result.stderr)
    assert probe_leftovers(arena["probe"]) == []


# --- what fio gets ------------------------------------------------------------------------

SLOW_PROFILE = (
    BUDGET + "[slow]\nioengine=sync\nrw=write\nbs=4k\nsize=1m\nruntime=4\ntime_based\nrate=64k\n"
)


def test_fio_gets_no_credential_and_no_descriptor(
    arena: dict[str, Path], pushgateway: services.Service
) -> None:
    (arena["jobs"] / "slow.fio").write_text(SLOW_PROFILE)
    secret_file = arena["root"] / "password"
    secret_file.write_text("pw-in-a-file-0123\n")
    user_file = arena["root"] / "user"
    user_file.write_text("probe\n")
    env = {**os.environ, "FIOPROBE_PUSHGATEWAY_PASSWORD": "pw-in-env-4567",
           "FIOPROBE_PUSHGATEWAY_USERNAME": "probe", "HTTP_PROXY": "http://proxy.invalid:3128",
           "https_proxy": "http://proxy.invalid:3128", "NO_PROXY": "127.0.0.1",
           "no_proxy": "127.0.0.1", "AWS_SECRET_ACCESS_KEY": "aws-secret-89"}  # fmt: skip
    process = subprocess.Popen(
        [sys.executable, "-m", "fioprobe", "probe", "--profile", "slow", "--jobs-dir",
         str(arena["jobs"]), "--dir", str(arena["probe"]), "--gateway", pushgateway.url,
         "--storageclass", "env", "--username-file", str(user_file),
         "--password-file", str(secret_file)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    seen: dict[int, tuple[bytes, bytes, list[str]]] = {}
    deadline = time.monotonic() + 30
    while process.poll() is None and time.monotonic() < deadline:
        for pid in children(process.pid):
            try:
                environ = Path(f"/proc/{pid}/environ").read_bytes()
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                fds = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
            except OSError:
                continue
            if b"fio" in cmdline.split(b"\0")[0]:
                seen[pid] = (environ, cmdline, fds)
        time.sleep(0.1)
    stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    assert seen, "no fio child was observed during the run"
    for environ, cmdline, fds in seen.values():
        names = {entry.split(b"=", 1)[0] for entry in environ.split(b"\0") if entry}
        assert names <= {b"PATH", b"LC_ALL"}, names
        for secret in (b"pw-in-a-file-0123", b"pw-in-env-4567", b"aws-secret-89", b"proxy",
                       b"PROXY"):  # fmt: skip
            assert secret not in environ and secret not in cmdline
        assert not [fd for fd in fds if fd.startswith("socket:") or ".fioprobe-state" in fd], fds
    for output in (stdout, stderr):
        assert b"pw-in" not in output and b"aws-secret" not in output


def children(pid: int) -> list[int]:
    """Every descendant of `pid`, from /proc: fio may run under a worker process of the
    probe's (the one that does the volume's IO), not only as its direct child."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            parents.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    queue = [pid]
    while queue and len(found) < 10_000:
        for child in parents.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return found
