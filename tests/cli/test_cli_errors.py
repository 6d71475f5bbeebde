"""Every documented usage or configuration error of the CLI: exit 2 and one clean line.

`fioprobe --help` promises exit 2 for "a bad argument, config or state file (nothing was run
or pushed)". A CronJob's log shows stderr: one line that starts with `fioprobe:` and names
the problem, never a traceback or a usage screen, nothing on stdout, and nothing written
(no state file, no report folder). Each case runs the real CLI in a subprocess, in an empty
folder with HOME and the state folder inside it, so that anything written shows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import corpus_files

FIO_OUTPUT = str(corpus_files(negative=False)[0])
#: A URL nothing listens on: no case may get as far as a request.
GATEWAY = "http://127.0.0.1:9"
GROUP = ["--storageclass", "gp3", "--profile", "etcd-fsync"]
PUSH = ["push", FIO_OUTPUT, *GROUP, "--gateway", GATEWAY]
PROBE = ["probe", *GROUP, "--gateway", GATEWAY]


def target(**extra: object) -> dict[str, object]:
    return {"name": "gp3", "directory": "/probe", "profiles": ["etcd-fsync"], **extra}


def config(**top: object) -> dict[str, object]:
    """A valid configuration with `top` merged in (None removes a key)."""
    document: dict[str, object] = {"pushgateway": {"url": GATEWAY}, "targets": [target()]}
    document.update(top)
    return {k: v for k, v in document.items() if v is not None}


@dataclass(frozen=True)
class Case:
    id: str
    #: The arguments; "{dir}" is the case's folder, "{file}" the file `files` wrote first.
    args: list[str]
    #: What the one line must contain (the problem named).
    expect: str
    #: Files to create first: name -> bytes, text, or a JSON-able configuration.
    files: dict[str, object] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    #: What may be left behind (relative to the case's tmp folder).
    leaves: frozenset[str] = frozenset()


def alias_bomb(levels: int) -> str:
    """Each anchor a list of the previous one twice: `levels` lines, 2**levels leaves."""
    lines = ["a0: &a0 [x, x]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}]" for i in range(1, levels)]
    return "\n".join([*lines, f"pushgateway: {{url: *a{levels - 1}}}", "targets: []", ""])


#: A provisioning command valid but for what a case adds (it never reaches an API server).
PROVISION = ["provision", "--storageclass", "gp3", "--namespace", "probe", "--image", "img",
             "--gateway", GATEWAY]  # fmt: skip


def run_case(*args: str) -> list[str]:
    return ["run", "--config", *args]


CASES = [
    # --- the command line itself (argparse) ----------------------------------------------
    Case("no-command", [], "the following arguments are required: COMMAND"),
    Case("unknown-command", ["probes"], "invalid choice: 'probes'"),
    Case("unknown-option", ["convert", FIO_OUTPUT, "--bogus"], "unrecognized arguments: --bogus"),
    Case("push-missing-group", ["push", FIO_OUTPUT, "--gateway", GATEWAY], "--storageclass"),
    Case("attempts-not-a-number", [*PUSH, "--attempts", "two"], "--attempts: not a whole number"),
    Case("report-without-output", ["report", FIO_OUTPUT], "-o/--output"),
    # --- continuous: bounded options, and no target without a place and a name ------------
    Case(
        "continuous-interval-too-short",
        ["continuous", "--dir", "{dir}", "--storageclass", "x", "--interval", "0.01"],
        "--interval: must be from 0.1 to 3600 seconds",
    ),
    Case(
        "continuous-write-too-large",
        ["continuous", "--dir", "{dir}", "--storageclass", "x", "--write-size", "2Mi"],
        "--write-size: must be a whole number of bytes from 512 to 1048576",
    ),
    Case(
        "continuous-no-target",
        ["continuous", "--dir", "{dir}"],
        "continuous: give --config, or --dir and --storageclass",
    ),
    Case(
        "continuous-config-and-dir",
        ["continuous", "--config", "{file}", "--dir", "{dir}"],
        "continuous: give either --config or --dir/--storageclass, not both",
        files={"c.yaml": "pushgateway: {url: 'http://127.0.0.1:9'}\ntargets: []\n"},
    ),
    Case(
        "continuous-bad-config",
        ["continuous", "--config", "{file}"],
        "targets: at least one target is required",
        files={"c.yaml": "pushgateway: {url: 'http://127.0.0.1:9'}\ntargets: []\n"},
    ),
    Case("writer-lease-zero", [*PUSH, "--writer-lease", "0"], "--writer-lease: must be from 1"),
    Case(
        "every-too-short",
        ["run", "--config", "{dir}/c.yaml", "--every", "0.01"],
        "--every: must be from 1 to 86400 seconds: '0.01'",
    ),
    Case(
        "every-overflow",
        ["run", "--config", "{dir}/c.yaml", "--every", "1e300"],
        "--every: must be from 1 to 86400 seconds: '1e300'",
    ),
    Case("writer-lease-nan", [*PUSH, "--writer-lease", "nan"], "--writer-lease: must be from 1"),
    # --- Pushgateway options --------------------------------------------------------------
    Case("attempts-zero", [*PUSH, "--attempts", "0"], "--attempts: must be a whole number from 1"),
    Case("timeout-negative", [*PUSH, "--timeout", "-1"], "--timeout: must be from 0.1 to 600"),
    Case("timeout-infinite", [*PUSH, "--timeout", "inf"], "--timeout: must be from 0.1 to 600"),
    Case("timeout-nan", [*PUSH, "--timeout", "nan"], "--timeout: must be from 0.1 to 600"),
    Case(
        "settle-not-seconds",
        [*PUSH],
        "FIOPROBE_PUSH_SETTLE_SECONDS='soon': expected seconds from 0 to 60",
        env={"FIOPROBE_PUSH_SETTLE_SECONDS": "soon"},
    ),
    Case("no-gateway", ["push", FIO_OUTPUT, *GROUP], "no Pushgateway: give --gateway URL"),
    Case(
        "url-credentials",
        ["push", FIO_OUTPUT, *GROUP, "--gateway", "http://user:secret@127.0.0.1:9"],
        "never in the URL",
    ),
    Case(
        "url-scheme",
        ["push", FIO_OUTPUT, *GROUP, "--gateway", "ftp://127.0.0.1:9"],
        "ftp",
    ),
    Case(
        "password-not-utf8",
        [*PUSH, "--username-file", "{dir}/user", "--password-file", "{dir}/password"],
        "is not UTF-8 text",
        {"user": "probe", "password": b"\xff\xfe\x00secret"},
    ),
    Case(
        "password-missing",
        [*PUSH, "--username-file", "{dir}/user", "--password-file", "{dir}/nope"],
        "cannot read credential file",
        {"user": "probe"},
    ),
    Case(
        "password-without-username",
        [*PUSH, "--password-file", "{dir}/password"],
        "only the password was given",
        {"password": "secret"},
    ),
    Case("key-without-cert", [*PUSH, "--key-file", "{dir}/key"], "needs its certificate file"),
    Case(
        "password-file-huge",
        [*PUSH, "--username-file", "{dir}/user", "--password-file", "/dev/zero"],
        "not a username or password",
        {"user": "probe"},
    ),
    # --- grouping keys and owners ---------------------------------------------------------
    Case(
        "storageclass-slash",
        ["push", FIO_OUTPUT, "--storageclass", "a/b", "--profile", "p", "--gateway", GATEWAY],
        "--storageclass must be a printable name without '/'",
    ),
    Case(
        "profile-control-char",
        ["push", FIO_OUTPUT, "--storageclass", "a", "--profile", "p\tq", "--gateway", GATEWAY],
        "--profile must be a printable name",
    ),
    Case("owner-invalid", [*PUSH, "--owner", "team a"], "--owner must be a name"),
    Case(
        "probe-timeout-zero",
        [*PROBE, "--dir", "{dir}", "--probe-timeout", "0"],
        "--probe-timeout: must be from 1 to 86400 seconds: '0'",
    ),
    # --- input files ----------------------------------------------------------------------
    Case("convert-missing-file", ["convert", "{dir}/nope.json"], "nope.json: cannot read"),
    Case("push-missing-file", [*PUSH[:1], "{dir}/nope.json", *PUSH[2:]], "nope.json: cannot read"),
    Case(
        "state-corrupt",  # kept as it is for a person to look at; nothing merged into it
        [*PUSH, "--attempts", "1", "--state", "{file}"],
        "state.json: state is corrupt",
        {"state.json": "{corrupt"},
        leaves=frozenset({"work/state.json.lock"}),  # the state's lock file, empty, by design
    ),
    # --- configuration (run and gc read the same file) ------------------------------------
    Case("config-missing", run_case("{dir}/nope.yaml"), "nope.yaml: cannot read"),
    Case("config-is-folder", run_case("{dir}"), "cannot read"),
    Case("config-not-utf8", run_case("{file}"), "not UTF-8 text", {"c.yaml": b"targets: \xff\n"}),
    Case("config-empty", run_case("{file}"), "top level must be a mapping", {"c.yaml": ""}),
    Case("config-list", run_case("{file}"), "top level must be a mapping", {"c.yaml": "- a\n"}),
    Case("config-syntax", run_case("{file}"), "not valid YAML", {"c.yaml": "targets: [\n"}),
    Case(
        "config-deep-flow",
        run_case("{file}"),
        "levels deep",
        {"c.yaml": "targets: " + "[" * 5000 + "]" * 5000 + "\n"},
    ),
    Case(
        "config-deep-block",
        run_case("{file}"),
        "c.yaml:",
        {"c.yaml": "".join(f"{' ' * i}k{i}:\n" for i in range(3000)) + " " * 3000 + "v: 1\n"},
    ),
    Case(
        "config-deep-block-lists",
        run_case("{file}"),
        "c.yaml:",
        {"c.yaml": "targets:\n" + "".join(f"{' ' * (2 * i)}- \n" for i in range(3000))},
    ),
    Case(
        "config-alias-bomb",  # 1 kB of YAML aliases: a value of 2**30 nodes, never walked
        run_case("{file}"),
        "pushgateway.url: must be a string, got [[[...], [...]], [[...], [...]]]",
        {"c.yaml": alias_bomb(30)},
    ),
    Case(
        "config-unknown-key",
        run_case("{file}"),
        "targts: unknown key",
        {"c.yaml": config(targts=[])},
    ),
    Case(
        "config-bom-unknown-key",  # a BOM is read as UTF-8's; the problem named is the key
        run_case("{file}"),
        "c.yaml: bogus: unknown key",
        {"c.yaml": b"\xef\xbb\xbf" + json.dumps(config(bogus=1)).encode()},
    ),
    Case(
        "config-duplicate-key",
        run_case("{file}"),
        "duplicate key 'targets'",
        {"c.yaml": f"pushgateway: {{url: {GATEWAY}}}\ntargets: []\ntargets: []\n"},
    ),
    Case(
        "config-no-targets",
        run_case("{file}"),
        "targets: at least one",
        {"c.yaml": config(targets=[])},
    ),
    Case(
        "config-no-pushgateway",
        run_case("{file}"),
        "pushgateway: is required",
        {"c.yaml": config(pushgateway=None)},
    ),
    Case(
        "config-url-credentials",
        run_case("{file}"),
        "must not hold credentials",
        {"c.yaml": config(pushgateway={"url": "http://u:p@127.0.0.1:9"})},
    ),
    Case(
        "config-url-scheme",
        run_case("{file}"),
        "must start with http:// or https://",
        {"c.yaml": config(pushgateway={"url": "127.0.0.1:9"})},
    ),
    Case(
        "config-attempts-zero",
        run_case("{file}"),
        "pushgateway.attempts: must be a whole number from 1 to 10, got 0",
        {"c.yaml": config(pushgateway={"url": GATEWAY, "attempts": 0})},
    ),
    Case(
        "config-timeout-nan",
        run_case("{file}"),
        "must be a finite number",
        {"c.yaml": f"pushgateway: {{url: {GATEWAY}, timeout_seconds: .nan}}\ntargets: []\n"},
    ),
    Case(
        "config-password-not-utf8",
        run_case("{dir}/c.yaml"),
        "is not UTF-8 text",
        {
            "c.yaml": "pushgateway: {url: http://127.0.0.1:9, username_file: user, "
            "password_file: password}\ntargets: [{name: a, directory: /probe, "
            "profiles: [etcd-fsync]}]\n",
            "user": "probe",
            "password": b"\xff",
        },
    ),
    Case(
        "config-target-name",
        run_case("{file}"),
        "must be a StorageClass-like name",
        {"c.yaml": config(targets=[target(name="../etc")])},
    ),
    Case(
        "config-relative-directory",
        run_case("{file}"),
        "must be an absolute path",
        {"c.yaml": config(targets=[target(directory="probe")])},
    ),
    Case(
        "config-target-unknown-key",
        run_case("{file}"),
        "targets[0].dir: unknown key",
        {"c.yaml": config(targets=[target(dir="/x")])},
    ),
    Case(
        "config-name-twice",
        run_case("{file}"),
        "name 'gp3' is used twice",
        {"c.yaml": config(targets=[target(), target()])},
    ),
    Case(
        "config-volume-type",
        run_case("{file}"),
        "'floppy' is not one of",
        {"c.yaml": config(targets=[target(volume={"type": "floppy"})])},
    ),
    Case(
        "config-volume-size",
        run_case("{file}"),
        "is not a size",
        {"c.yaml": config(targets=[target(volume={"type": "gp2", "size": "10 apples"})])},
    ),
    Case(
        "config-unknown-profile",
        run_case("{file}"),
        "targets[0].profiles[0]:",
        {"c.yaml": config(targets=[target(profiles=["no-such-profile"])])},
    ),
    Case(
        "config-bad-override",
        run_case("{file}"),
        "targets[0].profiles[0].bs: unknown key",
        {"c.yaml": config(targets=[target(profiles=[{"name": "etcd-fsync", "bs": "4k"}])])},
    ),
    Case(
        "config-override-value",
        run_case("{file}"),
        "override runtime=",
        {"c.yaml": config(targets=[target(profiles=[{"name": "etcd-fsync", "runtime": "soon"}])])},
    ),
    Case(
        "config-override-over-budget",
        run_case("{file}"),
        "targets[0].profiles[0]:",
        {"c.yaml": config(targets=[target(profiles=[{"name": "etcd-fsync", "size": "100T"}])])},
    ),
    Case(
        "config-owner",
        run_case("{file}"),
        "owner: 'a b' must be a name",
        {"c.yaml": config(owner="a b")},
    ),
    Case(
        "provision-size",
        [*PROVISION, "--size", "1 Gi"],
        "provision: --size '1 Gi' is not a Kubernetes quantity of bytes",
    ),
    Case(
        "provision-deadline-step",
        [*PROVISION, "--deadline", "mounted=30"],
        "provision: --deadline 'mounted=30': 'mounted' is not a step",
    ),
    Case("gc-config-missing", ["gc", "--config", "{dir}/nope.yaml"], "nope.yaml: cannot read"),
    Case(
        "gc-jobs-dir-without-the-profile",  # gc reads the configuration as `run` does
        ["gc", "--config", "{file}", "--jobs-dir", "{dir}"],
        "targets[0].profiles[0]: no profile 'etcd-fsync' in",
        {"c.yaml": config()},
    ),
    Case(
        "gc-two-gateways",
        ["gc", "--config", "{dir}/a.yaml", "--config", "{dir}/b.yaml"],
        "name different Pushgateways",
        {
            "a.yaml": config(),
            "b.yaml": config(pushgateway={"url": "http://127.0.0.1:10"}),
        },
    ),
    # --- report and backfill --------------------------------------------------------------
    Case(
        "report-warn-zero",
        ["report", FIO_OUTPUT, "-o", "{dir}/out", "--warn-ms", "0"],
        "--warn-ms: must be from 0.001 to 60000 milliseconds: '0'",
    ),
    Case(
        "report-warn-above-crit",
        ["report", FIO_OUTPUT, "-o", "{dir}/out", "--warn-ms", "20"],
        "--warn-ms must be at or below --crit-ms",
    ),
    Case(
        "report-group-by",
        ["report", FIO_OUTPUT, "-o", "{dir}/out", "--group-by", "colour"],
        "--group-by must be folder, job or option:NAME",
    ),
    Case(
        "report-folder-pattern",
        ["report", FIO_OUTPUT, "-o", "{dir}/out", "--folder-pattern", "("],
        "--folder-pattern is not a regular expression",
    ),
    Case(
        "report-baseline",
        ["report", FIO_OUTPUT, "-o", "{dir}/out", "--baseline", "no-such-group"],
        "no-such-group",
    ),
    Case(
        "backfill-label",
        ["backfill", FIO_OUTPUT, "-o", "{dir}/out", "--label", "no-equals"],
        "--label wants NAME=VALUE",
    ),
    Case(
        "backfill-reserved-label",
        ["backfill", FIO_OUTPUT, "-o", "{dir}/out", "--label", "job=x"],
        "--label job is set by fioprobe itself",
    ),
    Case(
        "backfill-reserved-benchmark-label",
        ["backfill", FIO_OUTPUT, "-o", "{dir}/out", "--label", "benchmark=x"],
        "--label benchmark is set by fioprobe itself",
    ),
    Case(
        "backfill-group-by",
        ["backfill", FIO_OUTPUT, "-o", "{dir}/out", "--group-by", "colour"],
        "--group-by must be folder, job or option:NAME",
    ),
    # --- prepare-dirs: its paths, refused before anything is changed ----------------------
    Case(
        "prepare-dirs-no-path",
        ["prepare-dirs", "--owner", "65532"],
        "the following arguments are required: --path",
    ),
    Case(
        "prepare-dirs-not-mount-equals-host",
        ["prepare-dirs", "--owner", "65532", "--path", "{dir}"],
        "must be MOUNT=HOSTPATH",
    ),
    Case(
        "prepare-dirs-relative-host-path",
        ["prepare-dirs", "--owner", "65532", "--path", "{dir}=var/lib/etcd-fioprobe"],
        "HOSTPATH 'var/lib/etcd-fioprobe' must be an absolute path",
    ),
    Case(
        "prepare-dirs-not-a-mount-point",  # a plain folder: no volume is mounted there
        ["prepare-dirs", "--owner", "65532", "--path", "{dir}=/var/lib/etcd-fioprobe"],
        "is not a mount point in this container",
    ),
    # --- distributed: the plan and the servers, refused before any server is contacted ----
    Case("distributed-no-plan", ["distributed", "--servers", "127.0.0.1:9"], "--plan"),
    Case(
        "distributed-plan-missing",
        ["distributed", "--plan", "{dir}/none.yaml", "--servers", "127.0.0.1:9"],
        "none.yaml: cannot read the plan: No such file or directory",
    ),
    Case(
        "distributed-plan-unknown-key",
        ["distributed", "--plan", "{file}", "--servers", "127.0.0.1:9"],
        "'filename': unknown key (expected one of: ",
        files={"p.yaml": "name: a\nstorageclass: b\nfilename: /dev/sda\n"},
    ),
    Case(
        "distributed-servers-not-host-port",
        ["distributed", "--plan", "{file}", "--servers", "127.0.0.1:9,-oops"],
        "--servers: '-oops' is not host:port (a port from 1 to 65535)",
        files={
            "p.yaml": "name: a\nstorageclass: b\nservers: 2\n"
            "budget: {bytes_per_server: 1g, seconds_per_server: 600}\n"
        },
    ),
    Case(
        "distributed-servers-count",
        ["distributed", "--plan", "{file}", "--servers", "127.0.0.1:9"],
        "the plan is for 2 servers, --servers names 1",
        files={
            "p.yaml": "name: a\nstorageclass: b\nservers: 2\n"
            "budget: {bytes_per_server: 1g, seconds_per_server: 600}\n"
        },
    ),
]


def _write(folder: Path, files: dict[str, object]) -> Path | None:
    first = None
    for name, content in files.items():
        path = folder / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif isinstance(content, str):
            path.write_text(content)
        else:
            path.write_text(json.dumps(content))
        first = first or path
    return first


def _tree(root: Path) -> set[str]:
    """Every path under `root`, but the caches libraries keep in HOME (matplotlib's font
    list, for a report that needs the data loaded to know its baseline is missing)."""
    caches = ("home", "home/.cache", "home/.config")
    found = {str(p.relative_to(root)) for p in root.rglob("*")}
    return {
        p for p in found if p not in caches and not p.startswith(tuple(c + "/" for c in caches[1:]))
    }


def _cli(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FIOPROBE_")}
    clean.pop("NODE_NAME", None)
    return subprocess.run(
        [sys.executable, "-m", "fioprobe", *args],
        cwd=cwd,
        env={**clean, **env},
        capture_output=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_usage_error_is_one_clean_line(case: Case, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    first = _write(work, case.files)
    args = [a.replace("{dir}", str(work)).replace("{file}", str(first)) for a in case.args]
    env = {
        "HOME": str(tmp_path / "home"),
        "XDG_STATE_HOME": str(tmp_path / "xdg"),
        "FIOPROBE_STATE_DIR": str(tmp_path / "state"),
        **case.env,
    }
    before = _tree(tmp_path)
    result = _cli(args, work, env)
    stderr = result.stderr.decode("utf-8", errors="replace")
    assert result.returncode == 2, stderr
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("fioprobe:"), stderr
    assert case.expect in lines[0], stderr
    assert len(lines[0]) < 600, "a line for a log, not a dump"
    assert "secret" not in stderr
    assert result.stdout == b""
    assert _tree(tmp_path) == before | case.leaves, "nothing written"


def test_every_command_that_takes_input_has_cases() -> None:
    """A new subcommand with options gets its error cases here too."""
    from fioprobe.cli.main import build_parser

    parser = build_parser()
    commands = set(parser._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    covered = {case.args[0] for case in CASES if case.args}
    assert commands - covered == {"demo"}  # demo takes no input that can be wrong but numbers


# --- every numeric option: bounded by one argparse type, refused in one exact line ---------

#: Arguments that are valid up to the option under test, per subcommand ("{dir}": the case's
#: folder). Nothing runs: the bad value stops argparse first.
BEFORE = {
    "push": PUSH,
    "probe": [*PROBE, "--dir", "{dir}"],
    "run": ["run", "--config", "{dir}/c.yaml"],
    "continuous": ["continuous", "--dir", "{dir}", "--storageclass", "x"],
    "demo": ["demo"],
    "report": ["report", FIO_OUTPUT, "-o", "{dir}/out"],
    "distributed": ["distributed", "--plan", "{dir}/p.yaml", "--servers", "127.0.0.1:9"],
    "prepare-dirs": ["prepare-dirs", "--path", "{dir}=/var/lib/etcd-fioprobe"],
    "provision": PROVISION,
}
SECONDS, WHOLE, BYTES, MILLISECONDS, LISTEN = "seconds", "whole", "bytes", "milliseconds", "listen"
#: (subcommand, option, kind, low, high, too small, too large).
NUMERIC_OPTIONS = [
    ("push", "--timeout", SECONDS, "0.1", "600", "0.05", "601"),
    ("push", "--attempts", WHOLE, "1", "10", "0", "11"),
    ("push", "--writer-lease", SECONDS, "1", "604800", "0.5", "1e300"),
    ("probe", "--timeout", SECONDS, "0.1", "600", "0", "1e9"),
    ("probe", "--attempts", WHOLE, "1", "10", "-1", "1000000000000"),
    ("probe", "--writer-lease", SECONDS, "1", "604800", "0", "604801"),
    ("probe", "--probe-timeout", SECONDS, "1", "86400", "0.5", "86401"),
    ("run", "--every", SECONDS, "1", "86400", "0.01", "1e300"),
    ("run", "--cycles", WHOLE, "1", "1000000", "0", "1000001"),
    ("continuous", "--interval", SECONDS, "0.1", "3600", "0.01", "3601"),
    ("continuous", "--write-size", BYTES, "512", "1048576", "511", "2Mi"),
    ("continuous", "--file-size", BYTES, "65536", "1073741824", "64", "2Gi"),
    ("continuous", "--stall-threshold", SECONDS, "0.0001", "60", "0", "61"),
    ("continuous", "--listen", LISTEN, "0", "65535", ":-1", ":65536"),
    ("demo", "--interval", SECONDS, "1", "86400", "0.01", "1e300"),
    ("demo", "--iterations", WHOLE, "0", "1000000", "-1", "1000001"),
    ("demo", "--preview-every", WHOLE, "1", "1000", "0", "1001"),
    ("report", "--warn-ms", MILLISECONDS, "0.001", "60000", "0", "1e300"),
    ("report", "--crit-ms", MILLISECONDS, "0.001", "60000", "-5", "60001"),
    ("distributed", "--timeout", SECONDS, "0.1", "600", "0", "601"),
    ("distributed", "--attempts", WHOLE, "1", "10", "0", "11"),
    ("distributed", "--wait-for-servers", SECONDS, "0", "3600", "-1", "3601"),
    ("prepare-dirs", "--owner", WHOLE, "1", "2147483647", "0", "2147483648"),
    ("provision", "--timeout", SECONDS, "0.1", "600", "0", "601"),
    ("provision", "--attempts", WHOLE, "1", "10", "0", "11"),
    ("provision", "--writer-lease", SECONDS, "1", "604800", "0.5", "604801"),
    ("provision", "--max-parallel", WHOLE, "1", "64", "0", "65"),
]


def _refusal(kind: str, low: str, high: str, value: str, in_range: bool) -> str:
    """What argparse says after `argument OPTION: ` for `value`."""
    if kind in (SECONDS, MILLISECONDS):
        number = value not in ("soon",)
        return f"must be from {low} to {high} {kind}: {value!r}" if number else (
            f"not a number of {kind}: {value!r}"
        )  # fmt: skip
    if kind == WHOLE:
        return f"must be a whole number from {low} to {high}: {value!r}" if in_range else (
            f"not a whole number: {value!r}"
        )  # fmt: skip
    if kind == BYTES:
        return f"must be a whole number of bytes from {low} to {high}: {value!r}" if in_range else (
            f"not a size in bytes (a number, or a quantity like 4Mi): {value!r}"
        )  # fmt: skip
    return f"must be [HOST]:PORT, e.g. :9436 or 127.0.0.1:9436: {value!r}"


def _numeric_cases() -> list[tuple[str, list[str], str]]:
    cases = []
    for command, option, kind, low, high, small, large in NUMERIC_OPTIONS:
        prefix = ":" if kind == LISTEN else ""
        values = [
            ("too-small", small, True),
            ("too-large", large, True),
            ("not-a-number", prefix + "soon", False),
            ("nan", prefix + "nan", False),
            ("inf", prefix + "inf", False),
        ]
        for name, value, in_range in values:
            said = _refusal(kind, low, high, value, in_range)
            line = (
                f"fioprobe: error: {command}: argument {option}: {said} "
                f"(see fioprobe {command} --help)"
            )
            # A last unknown option: were the value accepted, argparse would still stop at it,
            # and nothing (a demo, a probe) would start.
            args = [*BEFORE[command], option, value, "--not-an-option"]
            cases.append((f"{command}{option}-{name}", args, line))
    return cases


NUMERIC_CASES = _numeric_cases()


@pytest.mark.parametrize(
    ("args", "line"), [c[1:] for c in NUMERIC_CASES], ids=[c[0] for c in NUMERIC_CASES]
)
def test_numeric_option_out_of_bounds_is_one_exact_line(
    args: list[str], line: str, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    env = {"HOME": str(tmp_path / "home"), "FIOPROBE_STATE_DIR": str(tmp_path / "state")}
    before = _tree(tmp_path)
    result = _cli([a.replace("{dir}", str(work)) for a in args], work, env)
    assert result.returncode == 2
    assert result.stderr.decode() == line + "\n"
    assert result.stdout == b""
    assert _tree(tmp_path) == before


def test_every_numeric_option_is_bounded_and_in_the_table() -> None:
    """A new numeric option gets a bounded type from fioprobe.cli.argtypes and a row above: no
    bare int or float reaches a command."""
    from fioprobe.cli.main import build_parser

    parser = build_parser()
    typed = set()
    for command, sub in parser._subparsers._group_actions[0].choices.items():  # type: ignore[union-attr]
        for action in sub._actions:
            assert action.type not in (int, float), (command, action.option_strings)
            if action.type is not None:
                typed.add((command, action.option_strings[-1]))
    assert typed == {(command, option) for command, option, *_ in NUMERIC_OPTIONS}
