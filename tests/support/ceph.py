"""A real single-host Ceph cluster for the Ceph scenarios (`make ceph`), and volumes on it.

One monitor, one manager and three file-backed BlueStore OSDs, every daemon a child of this
process started in the foreground (`-f`) and stopped by its PID; everything (configuration,
monitor and OSD data, sockets, logs, mounts) lives under one work directory. Messages go over
127.0.0.1 only: the monitor on a free port, the other daemons on ports of their own range.
No authentication (`auth none`): nothing outside the work directory can reach the cluster.

The pool is replicated three times with `min_size` 2, and CRUSH places replicas on OSDs
(`osd crush chooseleaf type = 0`), so one OSD down leaves the pool writable (degraded) and two
down stop every write: the faults the scenarios need. This kernel has no rbd or nbd module, so
a volume reaches the probe as ODF's filesystem-mode PVCs do, through a block device with ext4
on it: `rbd-fuse` shows the image as a file, `losetup` makes it a block device, `mkfs.ext4`
and `mount` put a filesystem on it. The layers differ from ODF's krbd path, so absolute
latencies are not production figures; behaviour under faults is what the tests use.

Teardown undoes every step in reverse and always runs to its end: a write held by a pool
below `min_size` ends when the OSDs are back (teardown starts them if they were stopped) or,
if they cannot come back, when the FUSE connection is aborted, which fails every held
request; then the filesystem is unmounted (lazily if it must), the loop device detached,
rbd-fuse and the daemons stopped by PID. `leftovers(root)` lists whatever is still there, so
`make ceph` can check after the test process has exited.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fioprobe.services.servers import LOCALHOST, free_port

from support import procs

#: The pool the scenarios' images live in.
POOL = "rbd"
#: Placement groups of the pool: enough that the three OSDs each hold primaries.
PG_COUNT = 32
#: RBD's default object size (order 22): image byte N lives in object N // OBJECT_BYTES.
OBJECT_BYTES = 4 * 1024**2
#: OSDs, each a sparse 2 GiB file (BlueStore creates it).
OSD_COUNT = 3
OSD_BYTES = 2 * 1024**3
#: Bounds of every wait (seconds), with margins for a loaded 2-core machine.
CLUSTER_UP_S = 240
DAEMON_STOP_S = 30
CLI_S = 60
#: The OSD fullness ratios: Ceph's defaults, and low enough that the OSDs' own metadata
#: (about 15 % of each 2 GiB file) makes the cluster full.
DEFAULT_RATIOS = (("nearfull", 0.85), ("backfillfull", 0.9), ("full", 0.95))
FULL_RATIOS = (("nearfull", 0.005), ("backfillfull", 0.008), ("full", 0.01))
#: The Debian packages the cluster needs (scripts/ceph/setup.sh installs them).
PACKAGES = ("ceph-mon", "ceph-mgr", "ceph-osd", "ceph-common", "rbd-fuse")
DAEMONS = ("ceph-mon", "ceph-mgr", "ceph-osd", "rbd-fuse")


class CephError(RuntimeError):
    """The cluster could not be brought up, changed or inspected as asked."""


def _config(work: Path, fsid: str, mon_port: int, port_min: int) -> str:
    """ceph.conf of the cluster under `work`. Small caches keep the three OSDs well under a
    gigabyte together; `osd fast fail on connection refused` (the default, spelled out) marks
    a killed OSD down at once, so the peering stall comes when the test kills it.

    `bluestore debug enforce settings = ssd`: BlueStore cannot tell what is under a file and
    takes it for a rotating disk, whose settings defer every write below 64 KiB through
    RocksDB's WAL (about 400 MiB per OSD per minute of etcd-like writes) and put fsyncs in
    bursts of 10-50 ms while three OSDs work that off on two cores. The files are in
    memory, and ODF's OSDs are on flash: the SSD settings are the ones that
    apply (docs/CEPH.md, "The cluster")."""
    return f"""[global]
fsid = {fsid}
mon host = [v2:{LOCALHOST}:{mon_port}]
public network = 127.0.0.0/8
ms bind ipv6 = false
ms bind msgr1 = false
ms bind port min = {port_min}
ms bind port max = {port_min + 99}
auth cluster required = none
auth service required = none
auth client required = none
run dir = {work}/run
pid file = {work}/run/$name.pid
log file = {work}/log/$name.log
crash dir = {work}/crash
keyring = {work}/keyring
osd crush chooseleaf type = 0
osd pool default size = 3
osd pool default min size = 2
osd pool default pg autoscale mode = off
mon allow pool delete = true
mon warn on pool no redundancy = false
mon warn on insecure global id reclaim allowed = false
mon data avail warn = 1
osd fast fail on connection refused = true
osd objectstore = bluestore
bluestore debug enforce settings = ssd
bluestore block create = true
bluestore block size = {OSD_BYTES}
bluestore cache autotune = false
bluestore cache size = 67108864
osd memory target = 939524096
mgr initial modules = status
mon data = {work}/mon/$name
mgr data = {work}/mgr/$name
osd data = {work}/osd/$name

# Daemons only: the CLI, run several at a time, would fight over one socket name.
[mon]
admin socket = {work}/run/$name.asok
[mgr]
admin socket = {work}/run/$name.asok
[osd]
admin socket = {work}/run/$name.asok
"""


@dataclass
class Daemon:
    """A Ceph daemon this process started, in the foreground, with its command line kept so
    that a stopped OSD can be started again."""

    name: str
    command: list[str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                self.command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop by PID: `sig` first, SIGKILL after DAEMON_STOP_S."""
        if not self.running():
            return
        assert self.proc is not None
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=DAEMON_STOP_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=DAEMON_STOP_S)


@dataclass
class Cluster:
    """A running cluster under `work`; `ceph()` and `rbd()` ask it things with its own CLI."""

    work: Path
    conf: Path
    daemons: dict[str, Daemon] = field(default_factory=dict)

    def tool(self, tool: str, *args: str, timeout: float = CLI_S) -> str:
        """Output of `ceph` or `rbd` against this cluster; a failure, or no answer within
        `timeout` (a pool below min_size holds `rbd` for good), raises CephError with what
        the tool said."""
        command = [tool, "-c", str(self.conf), *args]
        if tool == "ceph":
            command[3:3] = ["--connect-timeout", str(int(timeout))]
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired as exc:
            raise CephError(f"{' '.join(command)}: no answer within {timeout:.0f} s") from exc
        if done.returncode != 0:
            raise CephError(f"{' '.join(command)}: exit {done.returncode}: {done.stderr.strip()}")
        return done.stdout

    def ceph(self, *args: str, timeout: float = CLI_S) -> Any:
        """`ceph <args>` as JSON."""
        return json.loads(self.tool("ceph", *args, "--format", "json", timeout=timeout) or "null")

    def rbd(self, *args: str, timeout: float = CLI_S) -> str:
        return self.tool("rbd", *args, timeout=timeout)

    def osd(self, osd_id: int) -> Daemon:
        return self.daemons[f"osd.{osd_id}"]

    def osd_ids(self) -> list[int]:
        return sorted(int(n.split(".")[1]) for n in self.daemons if n.startswith("osd."))

    def kill_osd(self, osd_id: int) -> None:
        """SIGKILL, as a crashed OSD or a lost node: the peers find out from refused
        connections and the monitor marks it down within seconds."""
        self.osd(osd_id).stop(signal.SIGKILL)

    def start_osd(self, osd_id: int) -> None:
        daemon = self.osd(osd_id)
        if not daemon.running():
            daemon.start()

    def up_osds(self) -> set[int]:
        return {osd["osd"] for osd in self.ceph("osd", "dump")["osds"] if osd["up"]}

    def primary_of(self, object_name: str) -> int:
        """The primary OSD of the placement group that holds `object_name` (`ceph osd map`):
        every write to the object goes through it, so killing it stalls them until the
        group has peered again."""
        return int(self.ceph("osd", "map", POOL, object_name)["acting_primary"])

    def image_prefix(self, image: str) -> str:
        """The prefix of `image`'s data objects (`rbd_data.<id>`): object N of the image is
        `<prefix>.<N as 16 hex digits>`, each `2^order` bytes of it."""
        return str(
            json.loads(self.rbd("info", f"{POOL}/{image}", "--format", "json"))["block_name_prefix"]
        )

    def pgs_active_clean(self) -> bool:
        """Every placement group active+clean (the manager's view; none until it reports)."""
        stat = self.ceph("pg", "stat")
        summary = stat.get("pg_summary", stat)
        states = {s["name"]: s["num"] for s in summary.get("num_pg_by_state", [])}
        total = int(summary.get("num_pgs", 0))
        return total > 0 and states.get("active+clean", 0) == total

    def health(self) -> tuple[str, list[str]]:
        """HEALTH_OK/WARN/ERR and the names of the checks that are not OK."""
        health = self.ceph("health")
        return str(health["status"]), sorted(health.get("checks", {}))

    def wait_until(self, what: str, check: Any, timeout: float = CLUSTER_UP_S) -> None:
        """Poll `check()` every second until it is true; CephError after `timeout`."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            try:
                if check():
                    return
            except CephError as exc:
                last = f" (last: {exc})"
            time.sleep(1)
        raise CephError(f"ceph: not {what} within {timeout:.0f} s{last}")

    def set_full(self, full: bool) -> None:
        """Full: the three ratios lowered (in their order: nearfull < backfillfull < full, or
        the monitor reports them out of order and marks nothing full) under what the OSDs
        hold, so every client write is held, never refused, until they are back up."""
        ratios = FULL_RATIOS if full else DEFAULT_RATIOS
        order = ratios if full else reversed(ratios)
        for name, ratio in order:
            self.tool("ceph", "osd", f"set-{name}-ratio", str(ratio))

    def stop(self) -> None:
        """Every daemon by PID: OSDs and the manager first, the monitor last."""
        for name in sorted(self.daemons, key=lambda n: (n.startswith("mon."), n)):
            self.daemons[name].stop()


def _run(*command: str, timeout: float = CLI_S) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise CephError(f"{' '.join(command)}: no answer within {timeout:.0f} s") from exc
    if done.returncode != 0:
        raise CephError(f"{' '.join(command)}: exit {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def missing_tools() -> list[str]:
    """The programs the cluster needs that are not installed (scripts/ceph/setup.sh)."""
    need = ("ceph", "ceph-mon", "ceph-mgr", "ceph-osd", "ceph-authtool", "monmaptool", "rbd",
            "rbd-fuse", "losetup", "mkfs.ext4", "fusermount")  # fmt: skip
    return [tool for tool in need if shutil.which(tool) is None]


def start_cluster(work: Path) -> Cluster:
    """Create and start the cluster under `work` (which must be empty or absent), its pool
    `rbd` ready for images, every placement group active+clean. On any failure, whatever was
    started is stopped before the error is raised."""
    for sub in ("run", "log", "crash", "mon/mon.a", "mgr/mgr.x", "osd"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    fsid = str(uuid.uuid4())
    mon_port = free_port()
    conf = work / "ceph.conf"
    conf.write_text(_config(work, fsid, mon_port, port_min=_free_port_block(100)))
    cluster = Cluster(work=work, conf=conf)
    try:
        _create(cluster, fsid, mon_port)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _free_port_block(size: int) -> int:
    """The first port of `size` consecutive ports on 127.0.0.1 that are free now, for the
    manager and OSDs (each binds a few of them); a bounded search from a random start."""
    for _ in range(50):
        first = random.randrange(20000, 60000 - size)
        try:
            socks = []
            for port in range(first, first + size):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(sock)
                sock.bind((LOCALHOST, port))
            return first
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    raise CephError(f"no {size} consecutive free ports on {LOCALHOST}")


def _create(cluster: Cluster, fsid: str, mon_port: int) -> None:
    work, conf = cluster.work, str(cluster.conf)
    keyring = work / "keyring"
    _run("ceph-authtool", "--create-keyring", str(keyring), "--gen-key", "-n", "mon.",
         "--cap", "mon", "allow *")  # fmt: skip
    _run("monmaptool", "--create", "--clobber", "--fsid", fsid, "--addv", "a",
         f"[v2:{LOCALHOST}:{mon_port}]", str(work / "monmap"))  # fmt: skip
    _run("ceph-mon", "-c", conf, "--mkfs", "-i", "a", "--monmap", str(work / "monmap"),
         "--keyring", str(keyring))  # fmt: skip
    _daemon(cluster, "mon.a", ["ceph-mon", "-c", conf, "-f", "-i", "a"])
    cluster.wait_until("answering", lambda: cluster.ceph("mon", "stat") is not None, 60)
    _daemon(cluster, "mgr.x", ["ceph-mgr", "-c", conf, "-f", "-i", "x"])
    for _ in range(OSD_COUNT):
        osd_uuid = str(uuid.uuid4())
        osd_id = int(cluster.tool("ceph", "osd", "new", osd_uuid).strip())
        (work / "osd" / f"osd.{osd_id}").mkdir()
        _run("ceph-osd", "-c", conf, "-i", str(osd_id), "--mkfs", "--osd-uuid", osd_uuid,
             timeout=120)  # fmt: skip
        _daemon(cluster, f"osd.{osd_id}", ["ceph-osd", "-c", conf, "-f", "-i", str(osd_id)])
    cluster.wait_until(f"{OSD_COUNT} OSDs up", lambda: len(cluster.up_osds()) == OSD_COUNT)
    cluster.tool("ceph", "osd", "pool", "create", POOL, str(PG_COUNT), str(PG_COUNT))
    cluster.tool("ceph", "osd", "pool", "set", POOL, "size", "3")
    cluster.tool("ceph", "osd", "pool", "set", POOL, "min_size", "2")
    cluster.tool("ceph", "osd", "pool", "application", "enable", POOL, "rbd")
    cluster.wait_until("active+clean", cluster.pgs_active_clean)
    checks: list[str] = []

    def healthy() -> bool:
        status, checks[:] = cluster.health()
        return status == "HEALTH_OK"

    try:
        cluster.wait_until("HEALTH_OK", healthy, 120)
    except CephError as exc:
        raise CephError(f"{exc}; failing checks: {', '.join(checks) or 'none'}") from None


def _daemon(cluster: Cluster, name: str, command: list[str]) -> None:
    daemon = Daemon(name, command, cluster.work / "log" / f"{name}.stdout")
    cluster.daemons[name] = daemon
    daemon.start()


@dataclass
class Volume:
    """An RBD image as ODF's filesystem-mode PVC would be used: ext4 on a block device,
    mounted at `mountpoint`, here through rbd-fuse (the image as a file) and a loop device."""

    cluster: Cluster
    image: str
    fuse_dir: Path
    mountpoint: Path
    fuse: Daemon
    loop: str | None = None
    mounted: bool = False

    def object_of(self, path: Path) -> str:
        """The RADOS object holding the first block of the file at `path`: its physical
        offset on the device (FIBMAP via `filefrag`) inside the image's 4 MiB objects."""
        out = _run("filefrag", "-e", "-b4096", str(path))
        for line in out.splitlines():
            fields = line.replace(":", " ").replace("..", " ").split()
            if fields and fields[0] == "0" and len(fields) >= 5:
                block = int(fields[3])
                prefix = self.cluster.image_prefix(self.image)
                return f"{prefix}.{block * 4096 // OBJECT_BYTES:016x}"
        raise CephError(f"filefrag: no extent of {path}: {out.strip()}")

    def close(self) -> list[str]:
        """Undo every step, in reverse, each bounded; returns what could not be undone (empty
        when all went). A write held by the cluster must have ended first: `Cluster`'s
        `release_held_io` does that."""
        problems: list[str] = []
        if self.mounted:
            try:
                _run("umount", str(self.mountpoint), timeout=30)
            except CephError:
                try:
                    _run("umount", "-l", str(self.mountpoint), timeout=30)
                except CephError as exc:
                    problems.append(str(exc))
            self.mounted = False
        if self.loop is not None:
            try:
                _run("losetup", "-d", self.loop, timeout=30)
                self.loop = None
            except CephError as exc:
                problems.append(str(exc))
        if _is_mounted(self.fuse_dir):
            try:
                _run("fusermount", "-u", str(self.fuse_dir), timeout=30)
            except CephError:
                self.fuse.stop(signal.SIGKILL)
                try:
                    _run("fusermount", "-u", "-z", str(self.fuse_dir), timeout=30)
                except CephError as exc:
                    problems.append(str(exc))
        self.fuse.stop()
        return problems


def _is_mounted(path: Path) -> bool:
    target = os.path.realpath(path)
    with open("/proc/self/mountinfo", encoding="utf-8") as mountinfo:
        return any(
            line.split()[4].replace("\\040", " ") == target for line in mountinfo if line.strip()
        )


def make_volume(cluster: Cluster, image: str, size_mib: int = 1024) -> Volume:
    """A new image `image` of `size_mib` MiB with ext4 on it, mounted under the work
    directory. On a failure, the steps already made are undone before the error is raised."""
    cluster.rbd("create", f"{POOL}/{image}", "--size", str(size_mib))
    fuse_dir = cluster.work / "fuse" / image
    mountpoint = cluster.work / "mnt" / image
    fuse_dir.mkdir(parents=True)
    mountpoint.mkdir(parents=True)
    fuse = Daemon(
        f"rbd-fuse.{image}",
        ["rbd-fuse", "-c", str(cluster.conf), "-p", POOL, "-r", image, str(fuse_dir), "-f"],
        cluster.work / "log" / f"rbd-fuse.{image}.log",
    )
    volume = Volume(cluster, image, fuse_dir, mountpoint, fuse)
    try:
        fuse.start()
        backing = fuse_dir / image
        deadline = time.monotonic() + 60
        while not backing.exists():
            if not fuse.running() or time.monotonic() > deadline:
                raise CephError(f"rbd-fuse did not show {image} (log: {fuse.log})")
            time.sleep(0.2)
        volume.loop = _run("losetup", "--find", "--show", str(backing)).strip()
        # Inode tables written now, not by ext4's lazy-init thread in the background of the
        # first minutes' measurements; the journal written whole, so its RADOS objects exist
        # before its first lap.
        _run("mkfs.ext4", "-q", "-F", "-E", "nodiscard,lazy_itable_init=0,lazy_journal_init=0",
             volume.loop, timeout=120)  # fmt: skip
        _run("mount", "-o", "noatime", volume.loop, str(mountpoint))
        volume.mounted = True
    except BaseException:
        volume.close()
        raise
    return volume


def release_held_io(cluster: Cluster, volumes: list[Volume]) -> list[str]:
    """End every write the cluster holds before teardown: the OSDs are started again and
    the ratio restored, so held writes complete; if the placement groups are not active
    within a minute, rbd-fuse is killed, which aborts its FUSE connection and fails every
    request still held (the processes waiting on them get an error and end)."""
    problems: list[str] = []
    try:
        cluster.set_full(False)
        for osd_id in cluster.osd_ids():
            cluster.start_osd(osd_id)
        cluster.wait_until("active after the OSDs' restart", cluster.pgs_active_clean, 120)
    except CephError as exc:
        problems.append(f"held writes ended by aborting FUSE: {exc}")
        for volume in volumes:
            volume.fuse.stop(signal.SIGKILL)
    return problems


def teardown(
    cluster: Cluster, volumes: list[Volume], stop_users: Callable[[], None] = lambda: None
) -> list[str]:
    """Everything the cluster and its volumes made, undone: held writes released, then
    `stop_users` (what uses the volumes: a stream, its Prometheus), volumes closed, daemons
    stopped by PID, also when `stop_users` fails. Returns what could not be undone."""
    problems = release_held_io(cluster, volumes)
    try:
        stop_users()
    finally:
        for volume in reversed(volumes):
            problems += volume.close()
        cluster.stop()
    return problems


def leftovers(root: Path) -> list[str]:
    """What the Ceph scenarios left under `root`: Ceph or rbd-fuse processes whose command
    line names it, mounts under it, loop devices backed by a file under it. Read from /proc
    and /sys, so it also works after the test process has died."""
    root_text = os.path.realpath(root)
    found: list[str] = []
    for pid, argv in procs.command_lines():
        args = [a.decode(errors="replace") for a in argv if a]
        if args and os.path.basename(args[0]) in DAEMONS and any(root_text in a for a in args):
            found.append(f"process {pid}: {' '.join(args)}")
    with open("/proc/self/mountinfo", encoding="utf-8") as mountinfo:
        for line in mountinfo:
            point = line.split()[4].replace("\\040", " ")
            if point == root_text or point.startswith(root_text + "/"):
                found.append(f"mount {point}")
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        try:
            path = backing.read_text().strip()
        except OSError:
            continue
        if path.startswith(root_text + "/"):
            found.append(f"loop device /dev/{backing.parts[3]} backed by {path}")
    return found


def main(argv: list[str]) -> int:
    """`python -m support.ceph leftovers ROOT`: what `make ceph` checks after its tests."""
    if len(argv) != 3 or argv[1] != "leftovers":
        print("usage: python -m support.ceph leftovers ROOT")
        return 2
    left = leftovers(Path(argv[2]))
    for line in left:
        print(f"ceph: left behind: {line}")
    return 1 if left else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
