"""fioprobe.processes against the real /proc: gone, alive, a zombie, and a /proc that cannot
be read at all (no file descriptor left), which must say nothing rather than "gone"."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from conftest import REPO
from fioprobe.processes import alive, start_ticks
from fioprobe.target.stuck import Stuck


def test_a_live_process_a_zombie_and_a_reaped_one() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert alive(child.pid)
        ticks = start_ticks(child.pid)
        assert ticks is not None and ticks > 0
        assert Stuck(child.pid, ticks, 0.0, "waiting").still_there()
        assert not Stuck(child.pid, ticks + 1, 0.0, "waiting").still_there()  # a reused pid
        child.kill()
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: a zombie
        assert not alive(child.pid)
        assert start_ticks(child.pid) is None
        assert not Stuck(child.pid, ticks, 0.0, "waiting").still_there()
    finally:
        child.kill()
        child.wait(timeout=30)
    assert not alive(child.pid) or start_ticks(child.pid) != ticks  # reaped (or reused)


def test_a_proc_that_cannot_be_read_says_nothing() -> None:
    """With no file descriptor left, /proc/<pid>/stat cannot be opened (EMFILE): the process
    is not "gone" (its files would be removed, a second child started behind a stuck one)."""
    script = textwrap.dedent(
        """
        import os, resource
        from fioprobe.processes import alive, start_ticks
        from fioprobe.target.stuck import Stuck
        me = os.getpid()
        ticks = start_ticks(me)
        used = len(os.listdir("/proc/self/fd"))
        resource.setrlimit(resource.RLIMIT_NOFILE, (used, used))
        held = []
        try:
            while True:
                held.append(os.open("/dev/null", os.O_RDONLY))
        except OSError:
            pass
        try:
            start_ticks(me)
            raised = "nothing"
        except OSError as exc:
            raised = type(exc).__name__
        print(alive(me), Stuck(me, ticks, 0.0, "waiting").still_there(), raised)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "exporter")}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True", "OSError"], result.stdout
