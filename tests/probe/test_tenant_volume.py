"""A root probe on a volume its tenants write: forged state is never pushed, never blocks.

The probe runs as root; the tenant is `nobody` (setpriv), with write access to the probe
volume and, where a case says so, to a state directory through a group. Every case runs
`fioprobe run` over two targets: the attacked one (`victim`) must end in its own failure
reason (or, where its state never lives on the volume, in a success with its own counts),
within a bounded time and without a traceback, and the next target (`next`) must still push
success. The forged totals (987654321 runs, plus any of the probe's own) must appear nowhere
on the Pushgateway. Real
fio, a real Pushgateway; the tenant's files are made by the tenant's own process.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import gateway_group, gauge
from support import services

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv: the probe is root, the tenant is nobody",
)

NOBODY, NOGROUP = 65534, 65534
FORGED_RUNS = 987654321
#: Every forged count, the probe's own runs added or not, as the exposition writes it
#: (plain, or with an exponent: 9.87654322e+08).
FORGED_MARKS = (str(FORGED_RUNS)[:7], f"{str(FORGED_RUNS)[0]}.{str(FORGED_RUNS)[1:7]}")
GROUP_FILE = "storageclass-victim_profile-etcd-fsync.json"
#: A run of two etcd-fsync probes takes a few seconds; a blocked one never ends.
RUN_DEADLINE_SECONDS = 120
DEEP = 1200


def forged_state() -> str:
    """A well-formed state (the format fioprobe writes) whose pending runs are the
    tenant's: pushed, it would claim 987654321 runs and fsyncs."""
    now = time.time()
    counts = [FORGED_RUNS] + [0] * 20
    return json.dumps({
        "claimed": False, "last_push_at": None, "push_id": None, "shard": None,
        "totals": None, "version": 2, "writer": "f0f0f0f0f0f0f0f0",
        "pending": {
            "failures_total": 0, "last_success_timestamp": now, "read_bytes_total": 0,
            "runs_total": FORGED_RUNS, "written_bytes_total": FORGED_RUNS * 4096,
            "histograms": {
                "sync": {"counts": counts, "sum_seconds": 1.0},
                "write": {"counts": counts, "sum_seconds": 1.0},
            },
        },
    })  # fmt: skip


def as_tenant(code: str, **values: object) -> None:
    """Run Python code as the tenant, nobody:nogroup with no other group."""
    script = textwrap.dedent(code)
    for name, value in values.items():
        script = f"{name} = {value!r}\n" + script
    done = subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOGROUP}", "--clear-groups",
         sys.executable, "-I", "-c", script],
        check=False, capture_output=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()[-2000:]


#: The tenant's tools, as code run in its own process.
MAKE_DEEP_TREE = """
import os
os.mkdir(path)
os.chdir(path)
for _ in range(depth):
    os.mkdir("d")
    os.chdir("d")
"""
WRITE_FILE = """
import os
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, body.encode())
os.close(fd)
"""
MAKE_DIR_WITH_FORGED_STATE = """
import os
os.mkdir(path, 0o755)
with open(os.path.join(path, name), "w") as handle:
    handle.write(body)
"""
REPLACE_DIR_WITH_FORGED_STATE = (
    """
import os
os.rename(path, path + ".moved-by-tenant")
"""
    + MAKE_DIR_WITH_FORGED_STATE
)
MAKE_FIFO = "import os\nos.mkfifo(path, 0o666)\n"
MAKE_SOCKET = "import socket\nsocket.socket(socket.AF_UNIX).bind(path)\n"
MAKE_SYMLINK = "import os\nos.symlink(to, path)\n"


@dataclass
class Arena:
    """A tree the tenant can reach (pytest's tmp_path is root's alone, 0700)."""

    root: Path
    victim: Path
    next: Path
    victim_target: dict[str, object] = field(default_factory=dict)
    #: Supplementary groups of the probe process (the pod's fsGroup): none by default.
    probe_groups: tuple[int, ...] = ()

    @property
    def dedicated_state(self) -> Path:
        return self.victim / ".fioprobe-state"


@pytest.fixture
def arena() -> Iterator[Arena]:
    root = Path(tempfile.mkdtemp(prefix="fioprobe-tenant-", dir="/tmp"))
    root.chmod(0o755)
    victim, after = root / "victim", root / "next"
    for directory in (victim, after):
        directory.mkdir()
        directory.chmod(0o777)  # the tenant writes the volume root
    yield Arena(root, victim, after)
    # rm copes with the tenant's deep trees (shutil.rmtree would recurse 1,200 levels).
    subprocess.run(["rm", "-rf", "--one-file-system", str(root)], check=False, timeout=120)


def own_state_dir(path: Path, *, group: int = 0, mode: int = 0o700) -> None:
    """A state directory as the probe makes it (0700, root's), or as the kubelet leaves
    it for an fsGroup (root:<group>, 2770)."""
    path.mkdir(mode=0o700)
    os.chown(path, 0, group)
    path.chmod(mode)


# --- the cases: each sets the stage, lets the tenant act, and says what the victim ends in ---


def shared_volume_forged_in_place(a: Arena) -> str:
    """A shared volume (the default): the tenant writes a `.fioprobe-state` with its totals.
    The probe's state does not live there: it is never read, and the run succeeds."""
    as_tenant(MAKE_DIR_WITH_FORGED_STATE, path=str(a.dedicated_state), name=GROUP_FILE,
              body=forged_state())  # fmt: skip
    return "success"


def shared_state_dir_made_first(a: Arena) -> str:
    """The configured state directory sits in a sticky, world-writable directory and the
    tenant makes it before the probe's first run."""
    parent = a.root / "states"
    parent.mkdir()
    parent.chmod(0o1777)
    a.victim_target = {"state_dir": str(parent / "victim")}
    as_tenant(MAKE_DIR_WITH_FORGED_STATE, path=str(parent / "victim"), name=GROUP_FILE,
              body=forged_state())  # fmt: skip
    return "state_error"


def shared_state_dir_replaced(a: Arena) -> str:
    """The probe's state directory is in a directory the tenant can write (not sticky):
    the tenant renames it away and puts its own, with its totals, in its place."""
    parent = a.root / "states"
    parent.mkdir()
    parent.chmod(0o777)
    own_state_dir(parent / "victim")
    a.victim_target = {"state_dir": str(parent / "victim")}
    as_tenant(REPLACE_DIR_WITH_FORGED_STATE, path=str(parent / "victim"), name=GROUP_FILE,
              body=forged_state())  # fmt: skip
    return "state_error"


def dedicated_state_dir_replaced(a: Arena) -> str:
    """A volume declared dedicated that a tenant can write after all: the probe's
    `.fioprobe-state` is renamed away and the tenant's stands in its place."""
    a.victim_target = {"volume": {"dedicated": True}}
    own_state_dir(a.dedicated_state)
    as_tenant(REPLACE_DIR_WITH_FORGED_STATE, path=str(a.dedicated_state), name=GROUP_FILE,
              body=forged_state())  # fmt: skip
    return "state_error"


def dedicated_state_dir_deep_tree(a: Arena) -> str:
    """The tenant's `.fioprobe-state` is 1,200 directories deep: refused, never walked."""
    a.victim_target = {"volume": {"dedicated": True}}
    as_tenant(MAKE_DEEP_TREE, path=str(a.dedicated_state), depth=DEEP)
    return "state_error"


def run_dir_deep_tree(a: Arena) -> str:
    """The tenant's `.fioprobe-run` is 1,200 directories deep: refused, never walked."""
    as_tenant(MAKE_DEEP_TREE, path=str(a.victim / ".fioprobe-run"), depth=DEEP)
    return "unsafe_target"


def _fsgroup_state_dir(a: Arena) -> Path:
    """`.fioprobe-state` as the kubelet leaves it for the pod's fsGroup (root:nogroup,
    2770), the probe in that group: the group is the probe's own, so this directory is
    trusted, and a tenant in the group is exactly what the checks of each file face."""
    a.victim_target = {"volume": {"dedicated": True}}
    a.probe_groups = (NOGROUP,)
    own_state_dir(a.dedicated_state, group=NOGROUP, mode=0o2770)
    return a.dedicated_state / GROUP_FILE


def state_file_of_a_foreign_owner(a: Arena) -> str:
    """The tenant writes the state file itself: its owner is not the probe's."""
    as_tenant(WRITE_FILE, path=str(_fsgroup_state_dir(a)), body=forged_state())
    return "state_error"


def state_file_is_a_fifo(a: Arena) -> str:
    """A FIFO as the state file: opening it to read would wait for a writer forever."""
    as_tenant(MAKE_FIFO, path=str(_fsgroup_state_dir(a)))
    return "state_error"


def lock_file_is_a_fifo(a: Arena) -> str:
    as_tenant(MAKE_FIFO, path=str(_fsgroup_state_dir(a)) + ".lock")
    return "state_error"


def state_file_is_a_socket(a: Arena) -> str:
    as_tenant(MAKE_SOCKET, path=str(_fsgroup_state_dir(a)))
    return "state_error"


def state_file_is_a_symlink(a: Arena) -> str:
    """A symlink to a forged file of the tenant's: never followed."""
    forged = a.victim / "forged.json"
    as_tenant(WRITE_FILE, path=str(forged), body=forged_state())
    as_tenant(MAKE_SYMLINK, path=str(_fsgroup_state_dir(a)), to=str(forged))
    return "state_error"


def state_dir_of_a_foreign_group(a: Arena) -> str:
    """`.fioprobe-state` group-writable by a group that is not the probe's (another pod's
    fsGroup, a chmod by hand): the tenant, in that group, wrote its totals there."""
    a.victim_target = {"volume": {"dedicated": True}}
    own_state_dir(a.dedicated_state, group=NOGROUP, mode=0o2770)
    as_tenant(WRITE_FILE, path=str(a.dedicated_state / GROUP_FILE), body=forged_state())
    return "state_error"


def state_file_of_a_foreign_group(a: Arena) -> str:
    """The probe's own state file, made group-writable by a foreign group: the tenant
    rewrote its content (the file's owner is still the probe's)."""
    a.victim_target = {"volume": {"dedicated": True}}
    own_state_dir(a.dedicated_state, mode=0o711)
    state = a.dedicated_state / GROUP_FILE
    state.write_text("{}")
    os.chown(state, 0, NOGROUP)
    state.chmod(0o660)
    as_tenant(WRITE_FILE, path=str(state), body=forged_state())
    return "state_error"


CASES: list[Callable[[Arena], str]] = [
    shared_volume_forged_in_place,
    shared_state_dir_made_first,
    shared_state_dir_replaced,
    dedicated_state_dir_replaced,
    dedicated_state_dir_deep_tree,
    run_dir_deep_tree,
    state_file_of_a_foreign_owner,
    state_file_is_a_fifo,
    lock_file_is_a_fifo,
    state_file_is_a_socket,
    state_file_is_a_symlink,
    state_dir_of_a_foreign_group,
    state_file_of_a_foreign_group,
]


def run_two_targets(a: Arena, gateway: services.Service) -> subprocess.CompletedProcess[bytes]:
    victim = {"name": "victim", "directory": str(a.victim), "profiles": ["etcd-fsync"],
              **a.victim_target}  # fmt: skip
    after = {"name": "next", "directory": str(a.next), "profiles": ["etcd-fsync"]}
    config = a.root / "config.yaml"
    config.write_text(json.dumps({"pushgateway": {"url": gateway.url}, "targets": [victim, after]}))
    groups = [f"--groups={','.join(map(str, a.probe_groups))}"] if a.probe_groups else []
    command = [sys.executable, "-m", "fioprobe", "run", "--config", str(config)]
    return subprocess.run(
        ["setpriv", *groups, "--", *command] if groups else command,
        capture_output=True,
        timeout=RUN_DEADLINE_SECONDS,  # a blocked run fails the test here
        check=False,
    )


def pushed_text(gateway: services.Service) -> str:
    with urllib.request.urlopen(gateway.url + "/metrics", timeout=10) as response:
        return response.read().decode()


@pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
def test_forged_state_is_never_pushed_and_never_blocks(
    arena: Arena, pushgateway: services.Service, case: Callable[[Arena], str]
) -> None:
    expected = case(arena)
    started = time.monotonic()
    result = run_two_targets(arena, pushgateway)
    elapsed = time.monotonic() - started
    stderr = result.stderr.decode()
    assert "Traceback" not in stderr, stderr
    pushed = pushed_text(pushgateway)
    assert not [m for m in FORGED_MARKS if m in pushed], "the tenant's totals were pushed"

    victim = gateway_group(pushgateway, storageclass="victim", profile="etcd-fsync")
    assert victim is not None, f"nothing pushed for the victim: {stderr}"
    if expected == "success":
        assert result.returncode == 0, stderr
        assert gauge(victim, "fioprobe_success") == 1
        assert gauge(victim, "fioprobe_runs_total") == 1
    else:
        assert result.returncode in (1, 2), stderr
        assert gauge(victim, "fioprobe_success") == 0, stderr
        reasons = [m["labels"]["reason"] for m in victim["fioprobe_failure_reason_info"]]
        assert reasons == [expected], stderr
        (line,) = [x for x in stderr.splitlines() if "'victim'" in x]
        assert f"FAILED ({expected})" in line, line

    after = gateway_group(pushgateway, storageclass="next", profile="etcd-fsync")
    assert after is not None, f"the next target did not run: {stderr}"
    assert gauge(after, "fioprobe_success") == 1, stderr
    assert elapsed < RUN_DEADLINE_SECONDS


def test_the_tenant_cannot_write_what_the_probe_made(
    arena: Arena, pushgateway: services.Service, state_dir: Path
) -> None:
    """What the probe creates is its own: 0700 directories and 0600 files, which the tenant
    can neither read nor replace, and a configured state directory stays outside the volume."""
    states = arena.root / "states"
    states.mkdir(mode=0o755)
    arena.victim_target = {"state_dir": str(states / "victim")}
    result = run_two_targets(arena, pushgateway)
    assert result.returncode == 0, result.stderr.decode()
    assert sorted(p.name for p in arena.victim.iterdir()) == []
    directory = states / "victim"
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    for path in directory.iterdir():
        assert path.stat().st_uid == 0 and stat.S_IMODE(path.stat().st_mode) == 0o600, path
    # The next target (shared, no state_dir): the per-user state directory.
    assert [p.name for p in state_dir.iterdir() if p.suffix == ".json"] == [
        "storageclass-next_profile-etcd-fsync.json"
    ]


def test_state_left_on_a_shared_volume_is_never_read(
    arena: Arena, pushgateway: services.Service, state_dir: Path
) -> None:
    """A state an earlier run kept on the volume (`.fioprobe-state`) is not read once the
    target is shared, not even one that passes every check of the probe's own: the volume is
    the tenants', and it may hang while the pushing process reads it. The target starts a
    state of its own; the group's earlier writer keeps it (writer_conflict, one line, nothing
    pushed over it) until its lease ends or the group is deleted (docs/SAFETY.md)."""

    def probe(*extra: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-m", "fioprobe", "probe", "--profile", "etcd-fsync",
             "--dir", str(arena.victim), "--storageclass", "victim", "--gateway",
             pushgateway.url, "--quiet", *extra],
            capture_output=True, timeout=RUN_DEADLINE_SECONDS, check=False,
        )  # fmt: skip

    for _ in range(2):  # the earlier placement, on the volume; the second run claims the group
        before = probe("--dedicated")
        assert before.returncode == 0, before.stderr.decode()
    on_volume = (arena.dedicated_state / GROUP_FILE).read_bytes()
    after = probe()  # shared: the per-user state directory, a new writer
    assert after.returncode != 0
    assert b"writer_conflict" in after.stderr or b"another writer" in after.stderr, after.stderr
    victim = gateway_group(pushgateway, storageclass="victim", profile="etcd-fsync")
    assert gauge(victim, "fioprobe_runs_total") == 2
    assert (arena.dedicated_state / GROUP_FILE).read_bytes() == on_volume
