"""Run real fio with a bounded wall-clock time and return its parsed JSON.

Why a helper: fault-tool tests and benchmarks all need "run fio here, maybe inside a cgroup,
never hang, give me jobs[0]"; fio is killed with its process group if it overruns.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def run_fio(
    args: Sequence[str],
    directory: str | os.PathLike[str],
    timeout_s: float,
    prefix: Sequence[str] = (),
) -> dict[str, Any]:
    """Run ``fio --name=probe --directory=DIR ARGS --output-format=json`` and parse it.

    ``prefix`` is prepended to the command (e.g. :meth:`BlkioCgroup.wrap`-style wrappers).
    Raises with fio's stderr when fio fails, and kills fio's process group on timeout.
    """
    cmd = [
        *prefix,
        "fio",
        "--name=probe",
        f"--directory={Path(directory)}",
        *args,
        "--output-format=json",
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=10)
        raise
    if proc.returncode != 0:
        raise RuntimeError(f"fio failed ({proc.returncode}): {err.decode(errors='replace')}")
    text = out.decode(errors="replace")
    # fio may print notes before the JSON document; it starts at the first "{" line.
    start = text.find("{\n")
    result: dict[str, Any] = json.loads(text[start if start >= 0 else 0 :])
    return result


def job(result: dict[str, Any]) -> dict[str, Any]:
    """The first (only) job of a fio JSON result."""
    first: dict[str, Any] = result["jobs"][0]
    return first
