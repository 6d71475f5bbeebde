"""The probe image, checked statically (`make e2e` builds and runs it, tests/e2e; `make test`
has no container engine). What can be checked is that it agrees with the
manifests (user, entrypoint, profile directory) and with the package."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib

import yaml
from conftest import REPO

DOCKERFILE = REPO / "Dockerfile"


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def _cronjob() -> dict:
    return yaml.safe_load(
        (REPO / "manifests/generated/storageclasses-cronjob-gp2.yaml").read_text()
    )


def _final_stage() -> list[tuple[str, str]]:
    """The instructions of the last stage (the image that runs), from its FROM on."""
    steps = _instructions()
    last = max(i for i, (op, _) in enumerate(steps) if op == "FROM")
    return steps[last:]


def test_debian_slim_with_fio_and_a_numeric_non_root_user() -> None:
    steps = _final_stage()
    for op, args in _instructions():
        if op == "FROM":
            assert re.fullmatch(r"debian:\d+-slim( AS \w+)?", args), args
    runs = " ".join(args for op, args in steps if op == "RUN")
    assert re.search(r"apt-get install [^&]*\bfio\b", runs)
    (user,) = [args for op, args in steps if op == "USER"]
    uid, gid = (int(x) for x in user.split(":"))
    assert uid > 0 and gid > 0
    pod = _cronjob()["spec"]["jobTemplate"]["spec"]["template"]["spec"]["securityContext"]
    assert (uid, gid) == (pod["runAsUser"], pod["runAsGroup"])
    # The last instruction that changes the user is USER: nothing runs as root after it.
    assert [op for op, _ in steps].index("USER") > max(
        i for i, (op, _) in enumerate(steps) if op == "RUN"
    )


def test_jobs_directory_and_entrypoint_match_the_package() -> None:
    steps = _final_stage()
    copies = {
        args.split()[0]: args.split()[1]
        for op, args in steps
        if op == "COPY" and not args.startswith("--from=")
    }
    env = " ".join(args for op, args in steps if op == "ENV")
    jobs_dir = re.search(r"FIOPROBE_JOBS_DIR=(\S+)", env)
    assert jobs_dir and copies["jobs/"].rstrip("/") == jobs_dir.group(1)
    # The runner honours the variable (and falls back to the same path outside a checkout).
    found = subprocess.run(
        [
            sys.executable,
            "-c",
            "from fioprobe.fio.profiles import default_jobs_dir as d; print(d())",
        ],
        env={"FIOPROBE_JOBS_DIR": jobs_dir.group(1), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=True, timeout=30,
    )  # fmt: skip
    assert found.stdout.strip() == jobs_dir.group(1)
    assert "/usr/share/fioprobe/jobs" in (REPO / "exporter/fioprobe/fio/profiles.py").read_text()
    # The CronJob's command is the package's console script.
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    command = _cronjob()["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert command["command"][0] in scripts
    assert "/opt/fioprobe/bin" in env  # where the venv's console script lands


def test_runtime_stage_has_no_installer() -> None:
    """pip and setuptools are removed from the venv, and the runtime stage installs no venv
    tooling (python3-venv brings pip and setuptools wheels)."""
    runs = " ".join(args for op, args in _final_stage() if op == "RUN")
    assert "python3-venv" not in runs and "pip install" not in runs
    build = " ".join(args for op, args in _instructions() if op == "RUN")
    assert re.search(r"pip uninstall -y [^&]*\bpip\b[^&]*\bsetuptools\b", build)


def test_dockerignore_lets_in_what_the_dockerfile_copies() -> None:
    ignore = (REPO / ".dockerignore").read_text().splitlines()
    copied = [
        args.split()[0]
        for op, args in _instructions()
        if op == "COPY" and not args.startswith("--from=")
    ]
    for source in copied:
        assert f"!{source}" in ignore, source
        assert (REPO / source).exists(), source
