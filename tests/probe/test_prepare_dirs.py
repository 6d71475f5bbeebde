"""`fioprobe prepare-dirs` on real directories behind real bind mounts, as the init container
sees them.

Each case builds a node's directory under the test's own tmp folder (`node/...`), bind-mounts
it where the init container would see its hostPath volume (`container/...`; `mount --bind`
follows a symlink as the kubelet's runtime does), runs the real command in a subprocess and
checks its exit status, its lines and the node's directory afterwards: owner, mode, ctime
(any chmod or chown moves it) and every entry inside. Every mount a test makes is unmounted
in its fixture's teardown, in reverse order.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import fioprobe

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0,
    reason="needs root: bind mounts, tmpfs and chown are what the init container does as uid 0",
)

OWNER = 65532
OTHER_UID = 1234
#: The init container's capabilities, all others dropped: for setpriv's bounding set (uid 0
#: gets exactly the bounding set on exec).
INIT_CAPS = "-all,+chown,+fowner"


class Mounts:
    """The mounts one test makes, unmounted in reverse order by the fixture."""

    def __init__(self) -> None:
        self.made: list[Path] = []

    def _mount(self, *args: str) -> None:
        subprocess.run(["mount", *args], check=True, capture_output=True, timeout=30)
        self.made.append(Path(args[-1]))

    def bind(self, source: Path, target: Path) -> None:
        target.mkdir(parents=True, exist_ok=True)
        self._mount("--bind", str(source), str(target))

    def tmpfs(self, target: Path) -> None:
        target.mkdir(parents=True, exist_ok=True)
        self._mount("-t", "tmpfs", "-o", "size=1m,mode=0755", "tmpfs", str(target))


@pytest.fixture
def mounts() -> Iterator[Mounts]:
    made = Mounts()
    yield made
    failed = []
    for target in reversed(made.made):
        result = subprocess.run(["umount", str(target)], capture_output=True, timeout=30)
        if result.returncode != 0:
            subprocess.run(["umount", "-l", str(target)], capture_output=True, timeout=30)
            failed.append((str(target), result.stderr.decode()))
    assert not failed, f"unmounted lazily, as a plain umount failed: {failed}"


@dataclass(frozen=True)
class Snapshot:
    """A directory as the node sees it, and everything inside (lstat, not followed)."""

    owner: tuple[int, int]
    mode: int
    ctime_ns: int
    entries: tuple[tuple[str, int, int, int, int, int, int], ...]


def snapshot(path: Path) -> Snapshot:
    info = os.lstat(path)
    entries = []
    for entry in sorted(os.scandir(path), key=lambda e: e.name):
        e = entry.stat(follow_symlinks=False)
        entries.append(
            (entry.name, e.st_ino, e.st_mode, e.st_uid, e.st_size, e.st_mtime_ns, e.st_ctime_ns)
        )
    return Snapshot(
        (info.st_uid, info.st_gid), stat.S_IMODE(info.st_mode), info.st_ctime_ns, tuple(entries)
    )


def owner_and_mode(path: Path) -> tuple[int, int, int, int, int]:
    """What a chown or chmod would change (the ctime moves with either)."""
    info = os.stat(path)
    return info.st_ino, info.st_uid, info.st_gid, info.st_mode, info.st_ctime_ns


def directory(path: Path, uid: int = 0, gid: int | None = None, mode: int = 0o755) -> Path:
    """A real directory on the "node", owned and moded as given (mode set after the chown,
    which leaves it as it is for a directory)."""
    path.mkdir(parents=True)
    os.chown(path, uid, uid if gid is None else gid)
    os.chmod(path, mode)
    return path


def prepare(
    *paths: str, owner: int = OWNER, caps: str | None = None
) -> subprocess.CompletedProcess[bytes]:
    """The real command; with `caps`, run with only those capabilities (setpriv)."""
    args = ["prepare-dirs", "--owner", str(owner)]
    for path in paths:
        args += ["--path", path]
    if caps is None:
        return fioprobe(*args, timeout=60)
    return subprocess.run(
        ["setpriv", f"--bounding-set={caps}", "--inh-caps=-all", sys.executable, "-m", "fioprobe",
         *args],
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip


def lines(result: subprocess.CompletedProcess[bytes]) -> tuple[list[str], list[str]]:
    stderr = result.stderr.decode()
    assert "Traceback" not in stderr
    return result.stdout.decode().splitlines(), stderr.splitlines()


def mounted(tmp: Path, mounts: Mounts, node: Path, name: str = "probe") -> str:
    """Bind-mount the node's `node` (followed if a symlink) at container/prepare/<name>;
    the MOUNT=HOSTPATH argument with `node` as given."""
    at = tmp / "container" / "prepare" / name
    mounts.bind(node, at)
    return f"{at}={node}"


def refused(stderr: list[str], mount: str, reason: str) -> None:
    """Exactly one line about `mount`: refused, with `reason`, and nothing changed."""
    about = [line for line in stderr if f"refused {mount} " in line]
    assert len(about) == 1, stderr
    assert about[0].startswith("fioprobe: error: prepare-dirs: refused "), about
    assert reason in about[0], about
    assert about[0].endswith("; nothing was changed"), about


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    """The test's folder by its real path: mountinfo lists mount points with every symlink
    resolved, so a MOUNT under a symlinked tmp folder would never be found."""
    return Path(os.path.realpath(tmp_path))


@pytest.fixture
def node(tmp: Path) -> Path:
    """The node's /var/lib."""
    path = tmp / "node" / "var" / "lib"
    path.mkdir(parents=True)
    return path


def test_fresh_directory_is_prepared_then_already_prepared(
    tmp: Path, mounts: Mounts, node: Path
) -> None:
    """What DirectoryOrCreate makes (root:root 0755, empty) becomes the probe's; a second run
    (every later pod start) changes nothing, not even the ctime."""
    etcd = directory(node / "etcd-fioprobe")
    path = mounted(tmp, mounts, etcd)
    mount = path.partition("=")[0]
    result = prepare(path)
    out, err = lines(result)
    assert result.returncode == 0, err
    assert err == []
    assert out == [
        f"prepared {mount} (node {etcd}): owner 0:0 mode 0755 -> owner {OWNER}:{OWNER} mode 0700"
    ]
    after = snapshot(etcd)
    assert (after.owner, after.mode, after.entries) == ((OWNER, OWNER), 0o700, ())
    again = prepare(path)
    out, err = lines(again)
    assert again.returncode == 0, err
    assert out == [f"already prepared {mount} (node {etcd}): owner {OWNER}:{OWNER} mode 0700"]
    assert snapshot(etcd) == after


def test_paths_with_spaces_and_a_separately_mounted_var(
    tmp: Path, mounts: Mounts, node: Path
) -> None:
    """A node that mounts /var as a filesystem of its own: mountinfo lists the mount's root
    without /var (and a space as \\040), and the host path, which ends with it, matches."""
    var = node.parent
    mounts.tmpfs(var)
    state = directory(var / "lib" / "fioprobe state")
    at = tmp / "container" / "prepare dir" / "state"
    mounts.bind(state, at)
    fields = [
        line.split()
        for line in Path("/proc/self/mountinfo").read_text().splitlines()
        if line.split()[4] == str(at).replace(" ", "\\040")
    ]
    assert fields[-1][3] == "/lib/fioprobe\\040state"
    result = prepare(f"{at}={state}")
    out, err = lines(result)
    assert result.returncode == 0, err
    assert out == [
        f"prepared {at} (node {state}): owner 0:0 mode 0755 -> owner {OWNER}:{OWNER} mode 0700"
    ]
    assert snapshot(state).owner == (OWNER, OWNER)


@pytest.mark.parametrize(
    ("gid", "mode"),
    [(OWNER, 0o755), (0, 0o700), (OWNER, 0o2777)],
    ids=["mode-0755", "group-root", "setgid-world-writable"],
)
def test_probe_owned_directory_gets_its_group_and_mode_fixed(
    tmp: Path, mounts: Mounts, node: Path, gid: int, mode: int
) -> None:
    """Already the probe's (a state directory with its files): only group and mode change,
    and nothing inside."""
    state = directory(node / "state", uid=OWNER, gid=gid, mode=mode)
    (state / "etcd").mkdir()
    (state / "etcd" / "state.json").write_text("{}")
    before = snapshot(state)
    inner = snapshot(state / "etcd")
    path = mounted(tmp, mounts, state)
    result = prepare(path)
    out, err = lines(result)
    assert result.returncode == 0, err
    assert out == [
        f"prepared {path.partition('=')[0]} (node {state}): owner {OWNER}:{gid} mode "
        f"{mode:04o} -> owner {OWNER}:{OWNER} mode 0700"
    ]
    after = snapshot(state)
    assert (after.owner, after.mode) == ((OWNER, OWNER), 0o700)
    assert after.entries == before.entries
    assert snapshot(state / "etcd") == inner


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv to drop capabilities")
def test_chown_and_fowner_are_all_it_needs(tmp: Path, mounts: Mounts, node: Path) -> None:
    """With the init container's capabilities only, a fresh directory, a probe-owned one of
    the wrong mode, and a second run over a prepared (0700, not readable by uid 0 without
    CAP_DAC_READ_SEARCH) directory all work; without CAP_FOWNER the mode of the probe's own
    directory cannot be fixed, and the line says which capability is missing."""
    fresh = directory(node / "etcd-fioprobe")
    owned = directory(node / "state", uid=OWNER)
    paths = [mounted(tmp, mounts, fresh), mounted(tmp, mounts, owned, "state")]
    result = prepare(*paths, caps=INIT_CAPS)
    out, err = lines(result)
    assert result.returncode == 0, err
    assert [line.split()[0] for line in out] == ["prepared", "prepared"]
    again = prepare(*paths, caps=INIT_CAPS)
    out, err = lines(again)
    assert again.returncode == 0, err
    assert [" ".join(line.split()[:2]) for line in out] == ["already prepared"] * 2

    lacking = directory(node / "other-state", uid=OWNER)
    path = mounted(tmp, mounts, lacking, "other")
    before = snapshot(lacking)
    result = prepare(path, caps="-all,+chown")
    out, err = lines(result)
    assert result.returncode == 2
    assert out == []
    assert err == [
        f"fioprobe: error: prepare-dirs: {path.partition('=')[0]} (node {lacking}): cannot "
        "change its mode: Operation not permitted (the container needs CAP_FOWNER); before "
        "it: nothing"
    ]
    assert snapshot(lacking) == before


def test_host_path_that_is_a_symlink_is_refused(tmp: Path, mounts: Mounts, node: Path) -> None:
    """/var/lib/etcd-fioprobe -> a directory with files (standing for /etc) on the node: the
    kubelet mounts the target, and the refusal names the target's path it saw."""
    target = directory(node / "etc")
    (target / "passwd").write_text("root:x:0:0::/root:/bin/sh\n")
    link = node / "etcd-fioprobe"
    link.symlink_to(target)
    before = snapshot(target)
    path = mounted(tmp, mounts, link)
    result = prepare(path)
    out, err = lines(result)
    assert result.returncode == 2
    assert out == []
    assert len(err) == 1
    refused(err, path.partition("=")[0], "symlink on the node (the kubelet followed it)")
    shown = re.search(
        r"the node's directory mounted here is '([^']*)' within its filesystem", err[0]
    )
    assert shown is not None, err
    assert shown[1].endswith("/lib/etc") and str(target).endswith(shown[1]), "the target's path"
    assert snapshot(target) == before


def test_host_path_with_a_symlink_parent_is_refused(tmp: Path, mounts: Mounts, node: Path) -> None:
    """/var/lib/fioprobe -> /var/lib/data on the node, and the state directory under it: an
    empty root-owned directory that the probe would otherwise take."""
    data = node / "data"
    real = directory(data / "state")
    link = node / "fioprobe"
    link.symlink_to(data)
    before = snapshot(real)
    path = mounted(tmp, mounts, link / "state")
    result = prepare(path)
    out, err = lines(result)
    assert result.returncode == 2
    assert out == []
    refused(err, path.partition("=")[0], "symlink on the node")
    assert snapshot(real) == before


@pytest.mark.parametrize(
    ("uid", "mode", "content", "reason"),
    [
        (0, 0o755, True, "owned by root and not empty: someone else's directory"),
        (0, 0o777, False, "owned by root with mode 0777, writable by others"),
        (0, 0o1777, False, "owned by root with mode 1777, writable by others"),
        (OTHER_UID, 0o755, False, f"owned by uid {OTHER_UID}, not by root or {OWNER}: another "
         "program's directory"),
        (OTHER_UID, 0o700, True, f"owned by uid {OTHER_UID}, not by root or {OWNER}"),
    ],
    ids=["root-not-empty", "root-world-writable", "root-sticky", "other-uid-empty",
         "other-uid-not-empty"],
)  # fmt: skip
def test_someone_elses_directory_is_refused(
    tmp: Path, mounts: Mounts, node: Path, uid: int, mode: int, content: bool, reason: str
) -> None:
    target = directory(node / "etcd-fioprobe", uid=uid, mode=mode)
    if content:
        (target / "member").mkdir()
    before = snapshot(target)
    path = mounted(tmp, mounts, target)
    result = prepare(path)
    out, err = lines(result)
    assert result.returncode == 2
    assert out == []
    assert len(err) == 1
    refused(err, path.partition("=")[0], reason)
    assert snapshot(target) == before


@pytest.mark.parametrize("bad_first", [False, True], ids=["bad-second", "bad-first"])
def test_one_refusal_leaves_every_path_untouched(
    tmp: Path, mounts: Mounts, node: Path, bad_first: bool
) -> None:
    good = directory(node / "etcd-fioprobe")
    bad = directory(node / "state", uid=OTHER_UID)
    good_path = mounted(tmp, mounts, good)
    bad_path = mounted(tmp, mounts, bad, "state")
    before = snapshot(good), snapshot(bad)
    paths = [bad_path, good_path] if bad_first else [good_path, bad_path]
    result = prepare(*paths)
    out, err = lines(result)
    assert result.returncode == 2
    assert out == [
        f"not changed {good_path.partition('=')[0]} (node {good}): it passed, but another "
        "path was refused"
    ]
    assert len(err) == 1
    refused(err, bad_path.partition("=")[0], f"owned by uid {OTHER_UID}")
    assert (snapshot(good), snapshot(bad)) == before


def test_filesystem_root_only_when_already_prepared(tmp: Path, mounts: Mounts, node: Path) -> None:
    """A disk mounted at the host path: its mount's root is `/`, which says nothing about
    the path, so it is never changed; as prepared by hand it is accepted."""
    disk = node / "etcd-fioprobe"
    mounts.tmpfs(disk)
    path = mounted(tmp, mounts, disk)
    mount = path.partition("=")[0]
    for owner, mode in [(0, 0o755), (OWNER, 0o755), (OWNER, 0o1777)]:
        os.chown(disk, owner, owner)
        os.chmod(disk, mode)
        before = snapshot(disk)
        result = prepare(path)
        out, err = lines(result)
        assert result.returncode == 2, (owner, mode)
        assert out == []
        refused(err, mount, f"is the root of a filesystem on the node (owner {owner}:{owner} "
                f"mode {mode:04o})")  # fmt: skip
        assert f"install -d -o {OWNER} -g {OWNER} -m 0700 {disk}; nothing" in err[0]
        assert snapshot(disk) == before
    os.chown(disk, OWNER, OWNER)
    os.chmod(disk, 0o700)
    before = snapshot(disk)
    result = prepare(path)
    out, err = lines(result)
    assert result.returncode == 0, err
    assert out == [
        f"already prepared {mount} (node {disk}): owner {OWNER}:{OWNER} mode 0700 (the root of "
        "a filesystem: owner and mode checked; which directory it is cannot be)"
    ]
    assert snapshot(disk) == before


def test_a_mount_hidden_by_another_is_refused(tmp: Path, mounts: Mounts, node: Path) -> None:
    """mountinfo still lists a mount at MOUNT, but a later mount over its parent hides it:
    the directory found there is another one, and is refused."""
    target = directory(node / "etcd-fioprobe")
    path = mounted(tmp, mounts, target)
    mount = Path(path.partition("=")[0])
    cover = directory(tmp / "cover" / "probe").parent
    mounts.bind(cover, mount.parent)
    covered = snapshot(cover / "probe")
    result = prepare(path)
    out, err = lines(result)
    assert result.returncode == 2
    assert out == []
    refused(err, str(mount), "is hidden by another mount")
    assert snapshot(cover / "probe") == covered
    assert snapshot(target).owner == (0, 0)


def test_a_read_only_mount_is_refused(tmp: Path, mounts: Mounts, node: Path) -> None:
    target = directory(node / "etcd-fioprobe")
    path = mounted(tmp, mounts, target)
    mount = path.partition("=")[0]
    subprocess.run(["mount", "-o", "remount,bind,ro", mount], check=True, timeout=30)
    before = snapshot(target)
    result = prepare(path)
    out, err = lines(result)
    assert result.returncode == 2
    assert out == []
    refused(err, mount, "mounted read-only in this container")
    assert snapshot(target) == before


#: (id, --path arguments with {tmp}, {mounted} (a bind mount of a fresh directory) and
#: {file}; what the one line says).
USAGE = [
    ("not-a-mount-point", ["{tmp}/plain={tmp}/plain"], "is not a mount point in this container"),
    ("not-a-directory", ["{file}={file}"], "is not a directory"),
    ("missing", ["{tmp}/none=/var/lib/x"], "does not exist in this container"),
    ("mount-is-a-symlink", ["{tmp}/link=/var/lib/x"], "is a symlink in this container"),
    ("no-equals", ["{mounted}"], "must be MOUNT=HOSTPATH"),
    ("relative-mount", ["prepare/probe=/var/lib/x"], "MOUNT 'prepare/probe' must be an absolute"),
    ("relative-host", ["{mounted}=var/lib/x"], "HOSTPATH 'var/lib/x' must be an absolute"),
    ("host-is-root", ["{mounted}=/"], "HOSTPATH must not be /"),
    ("trailing-slash", ["{mounted}/=/var/lib/x"], "is not a normalised path"),
    ("dot-dot", ["{mounted}=/var/lib/../x"], "HOSTPATH '/var/lib/../x' is not a normalised"),
    ("double-slash", ["{mounted}=//var/lib/x"], "is not a normalised path"),
    ("mount-twice", ["{mounted}=/a", "{mounted}=/b"], "is given twice"),
    ("host-twice", ["{mounted}=/a", "{tmp}/plain=/a"], "HOSTPATH '/a' is given twice"),
]


@pytest.mark.parametrize(("paths", "expect"), [c[1:] for c in USAGE], ids=[c[0] for c in USAGE])
def test_usage_error_is_one_line_and_changes_nothing(
    tmp: Path, mounts: Mounts, node: Path, paths: list[str], expect: str
) -> None:
    fresh = directory(node / "etcd-fioprobe")
    mounted_at = tmp / "container" / "prepare" / "probe"
    mounts.bind(fresh, mounted_at)
    (tmp / "plain").mkdir()
    (tmp / "file").write_text("x")
    (tmp / "link").symlink_to(mounted_at)
    before = snapshot(fresh), snapshot(tmp / "plain")
    args = [
        p.replace("{mounted}", str(mounted_at))
        .replace("{tmp}", str(tmp))
        .replace("{file}", str(tmp / "file"))
        for p in paths
    ]
    result = prepare(*args)
    out, err = lines(result)
    assert result.returncode == 2
    assert out == []
    assert len(err) == 1, err
    assert err[0].startswith("fioprobe: error: prepare-dirs: "), err
    assert expect in err[0], err
    assert (snapshot(fresh), snapshot(tmp / "plain")) == before


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (["--owner", str(OWNER)], "the following arguments are required: --path"),
        (["--path", "/a=/b"], "the following arguments are required: --owner"),
        (["--path", "/a=/b", "--owner", "0"], "--owner: must be a whole number from 1 to "),
        (["--path", "/a=/b", "--owner", "nobody"], "--owner: not a whole number: 'nobody'"),
    ],
    ids=["no-path", "no-owner", "owner-root", "owner-a-name"],
)
def test_argument_errors(args: list[str], expect: str) -> None:
    result = fioprobe("prepare-dirs", *args, timeout=60)
    out, err = lines(result)
    assert result.returncode == 2
    assert out == []
    assert len(err) == 1 and err[0].startswith("fioprobe: error: prepare-dirs: ")
    assert expect in err[0]


def test_never_writes_inside(tmp: Path, mounts: Mounts, node: Path) -> None:
    """Whatever each directory holds, and whatever becomes of it, its entries stay exactly as
    they were (names, inodes, modes, owners, sizes, times): only the directory's own owner
    and mode may change."""
    fresh = directory(node / "etcd-fioprobe")
    state = directory(node / "state", uid=OWNER, mode=0o750)
    (state / "etcd").mkdir(mode=0o700)
    (state / "etcd" / "state.json").write_text('{"version": 2}')
    (state / "lock").symlink_to("/etc/passwd")
    paths = [mounted(tmp, mounts, fresh), mounted(tmp, mounts, state, "state")]
    passwd = owner_and_mode(Path("/etc/passwd"))
    for _ in range(2):
        before = snapshot(fresh).entries, snapshot(state).entries, snapshot(state / "etcd")
        result = prepare(*paths)
        assert result.returncode == 0, result.stderr
        assert (snapshot(fresh).entries, snapshot(state).entries) == before[:2]
        assert snapshot(state / "etcd") == before[2]
    assert os.listdir(fresh) == []
    assert sorted(os.listdir(state)) == ["etcd", "lock"]
    assert owner_and_mode(Path("/etc/passwd")) == passwd, "the symlink inside was not followed"
