"""The `fioprobe` command line.

Exit status (the same for every subcommand):
  0  success
  1  the probe ran and failed; the failure was pushed (fioprobe_success 0)
  2  usage, configuration or state-file error: a bad argument, config or state file (nothing
     was run or pushed), or a state file that could not be saved (the run was pushed)
  3  the fio output could not be read; nothing was pushed
  4  the Pushgateway could not be reached or refused the push; the run's counts are kept in
     the state file and go out with the next successful push
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import NoReturn

from fioprobe import __version__, bounds
from fioprobe.cli.argtypes import number, seconds, whole
from fioprobe.errors import ExitCode, FioprobeError, Interrupted, UsageError
from fioprobe.gateway import defaults as push_defaults
from fioprobe.text import printable
from fioprobe.thresholds import ETCD_FSYNC_P99_SECONDS, LATENCY_YELLOW_SECONDS


def _read_input(source: str) -> tuple[str, str]:
    """(text, name) of a file argument; '-' is standard input."""
    if source == "-":
        data, name = sys.stdin.buffer.read(), "<stdin>"
    else:
        try:
            data, name = Path(source).read_bytes(), source
        except OSError as exc:
            raise UsageError(f"{source}: cannot read: {exc.strerror}") from None
    return data.decode("utf-8", errors="replace").removeprefix("\ufeff"), name


def _grouping_key(args: argparse.Namespace) -> dict[str, str]:
    key = {"storageclass": args.storageclass, "profile": args.profile}
    if args.node:
        key["node"] = args.node
    for name, value in key.items():
        if not value or "/" in value or not value.isprintable() or len(value) > 253:
            raise UsageError(
                f"--{name} must be a printable name without '/', at most 253 characters: "
                f"{value!r:.80}"
            )
    return key


# --- subcommands --------------------------------------------------------------------------


def cmd_convert(args: argparse.Namespace) -> int:
    from fioprobe.offline.convert import convert_text

    text, name = _read_input(args.file)
    labels = {
        k: v
        for k, v in (
            ("storageclass", args.storageclass),
            ("profile", args.profile),
            ("node", args.node),
        )
        if v
    }
    sys.stdout.buffer.write(convert_text(text, name, labels))
    return ExitCode.OK


def cmd_push(args: argparse.Namespace) -> int:
    from fioprobe.fio.parse import parse_text
    from fioprobe.gateway.pushgateway import PushError
    from fioprobe.offline.convert import file_outcome
    from fioprobe.publish.outcome import publish
    from fioprobe.publish.statefile import default_state_file

    key = _grouping_key(args)
    transport = _transport(args)
    text, name = _read_input(args.file)
    run = parse_text(text, source=name)  # raises before anything is merged or pushed
    outcome = replace(file_outcome(run), owner=_owner(args), etcd_disk=args.etcd_disk)
    state_file = _state_file(args.state) if args.state else default_state_file(key)
    # The run's time is this machine's clock at the push: a fio file's own timestamp can be
    # years off, and last_success_timestamp must not jump back or forward with it.
    try:
        publish(outcome, key, transport, state_file, finished_at=time.time(),
                lease_seconds=args.writer_lease)  # fmt: skip
    except PushError as exc:
        raise PushError(
            f"{exc}; the run is kept in the state file {state_file.path} and goes with the "
            "next push"
        ) from None
    _say(args, f"pushed {name} to {transport.url} for {key}")
    return ExitCode.OK if outcome.success else ExitCode.PROBE_FAILED


def cmd_probe(args: argparse.Namespace) -> int:
    from fioprobe.probe.config import VolumeConfig, paths_overlap
    from fioprobe.probe.prober import ProbeTarget
    from fioprobe.probe.runner import probe_once

    _grouping_key(args)
    transport = _transport(args)
    directory = os.path.abspath(args.dir)
    state_dir = os.path.abspath(args.state_dir) if args.state_dir else None
    if state_dir and paths_overlap(state_dir, directory):
        raise UsageError(
            f"--state-dir {state_dir!r:.200} must be beside --dir {directory!r:.200}, neither "
            "inside it nor holding it: tenants of the probe volume could write the state there"
        )
    target = ProbeTarget(
        storageclass=args.storageclass,
        node=args.node,
        directory=Path(args.dir),
        profile=args.profile,
        timeout_seconds=args.probe_timeout,
        require_mount_point=args.require_mount_point,
        volume=VolumeConfig(dedicated=args.dedicated),
        state_dir=Path(state_dir) if state_dir else None,
        state_path=Path(args.state) if args.state else None,
        lease_seconds=args.writer_lease,
        owner=_owner(args),
        etcd_disk=args.etcd_disk,
    )
    return probe_once(target, transport, _jobs_dir(args), quiet=args.quiet)


def cmd_continuous(args: argparse.Namespace) -> int:
    from fioprobe.continuous.command import run

    return run(args)


def cmd_run(args: argparse.Namespace) -> int:
    from fioprobe.probe.config import load_config
    from fioprobe.probe.runner import run_config

    config = load_config(Path(args.config), _jobs_dir(args))
    if args.every is not None:
        from fioprobe.probe.schedule import run_every

        return run_every(config, args.every, only_node=args.node, jobs_dir=_jobs_dir(args),
                         quiet=args.quiet, cycles=args.cycles)  # fmt: skip
    return run_config(config, only_node=args.node, jobs_dir=_jobs_dir(args), quiet=args.quiet)


def cmd_demo(args: argparse.Namespace) -> int:
    from fioprobe.demo.chain import run_demo

    return run_demo(
        interval=args.interval,
        iterations=args.iterations,
        workdir=args.workdir,
        previews=args.previews,
        preview_every=args.preview_every,
    )


def cmd_gc(args: argparse.Namespace) -> int:
    from fioprobe.gateway.gc import collect, transport_for
    from fioprobe.gateway.pushgateway import redact
    from fioprobe.probe.config import load_config

    def shown(labels: dict[str, str]) -> str:
        """Labels read from the gateway, inert on one line (a label value may hold a line
        break or an escape sequence); a plain grouping key shows as its dict."""
        return printable(str(labels), 1000)

    configs = [load_config(Path(path), _jobs_dir(args)) for path in dict.fromkeys(args.config)]
    result = collect(
        transport_for(configs),
        configs,
        nodes=args.node,
        dry_run=args.dry_run,
        unowned=args.unowned,
    )
    verb = "would delete" if args.dry_run else "deleted"
    for key in result.deleted:
        print(f"{verb} {shown(key)}")
    for key, replica in result.misplaced:
        print(f"{verb} {shown(key)} on {redact(replica)} (old copy of a group that moved)")
    for key, replicas in result.unordered:
        where = ", ".join(redact(replica) for replica in replicas)
        _say(args, f"kept every copy of {shown(key)} on {where}: none is older and behind another")
    for labels in result.foreign:
        _say(args, f"left alone (not a fioprobe grouping key): {shown(labels)}")
    owners = sorted({owner for _, owner in result.others})
    _say(
        args,
        f"{verb} {len(result.deleted)} groups, kept {len(result.kept)}; left alone "
        f"{len(result.others)} of other owners ({printable(', '.join(owners), 400) or 'none'}), "
        f"{len(result.unowned)} without an owner (see --unowned)",
    )
    return ExitCode.OK


def cmd_report(args: argparse.Namespace) -> int:
    # Options are checked before matplotlib is imported: a typo costs no font cache.
    if not args.warn_ms <= args.crit_ms:
        raise UsageError("--warn-ms must be at or below --crit-ms")
    grouping = _grouping(args)
    grouping.validate()
    try:
        from fioprobe.report.build import ReportOptions, build_report
    except ImportError as exc:
        raise UsageError(
            f"fioprobe report needs matplotlib ({exc}): pip install 'fioprobe[report]'"
        ) from None

    options = ReportOptions(
        grouping=grouping,
        baseline=args.baseline,
        warn_ms=args.warn_ms,
        crit_ms=args.crit_ms,
        title=args.title,
    )
    result = build_report(args.paths, args.output, options)
    _say(
        args,
        f"report of {result.files_parsed} of {result.files_read} files "
        f"({len(result.unreadable)} unreadable) in {result.html}",
    )
    return ExitCode.OK if result.files_parsed else ExitCode.BAD_INPUT


def cmd_backfill(args: argparse.Namespace) -> int:
    from fioprobe.offline.backfill import backfill, parse_labels

    grouping = _grouping(args)
    grouping.validate()
    labels = parse_labels(args.label or [])
    result = backfill(
        args.paths,
        args.output,
        grouping,
        labels,
        promtool=args.promtool,
        announce=None if args.quiet else (lambda message: _say(args, message)),
    )
    for item in result.unreadable:
        # File and archive member names are the archive's, not ours: printed inert.
        _say(args, f"skipped {printable(item.name, 300)}: {printable(item.reason, 300)}")
    _say(
        args,
        f"{result.pushes} pushes of {result.series_keys} series keys from "
        f"{result.files_parsed} files, {len(result.blocks)} blocks in {args.output}",
    )
    return ExitCode.OK if result.files_parsed else ExitCode.BAD_INPUT


def _state_file(path: str) -> object:
    from fioprobe.publish.statefile import StateDir

    file = Path(path)
    return StateDir(file.parent, create_parents=True).file(file.name)


def _owner(args: argparse.Namespace) -> str | None:
    from fioprobe.probe.config import valid_owner

    if args.owner is not None and not valid_owner(args.owner):
        raise UsageError(
            f"--owner must be a name (letters, digits, .-_; at most 253): {args.owner!r:.80}"
        )
    return args.owner


def _say(args: argparse.Namespace, message: str) -> None:
    if not getattr(args, "quiet", False):
        print(f"fioprobe: {message}", file=sys.stderr)


def _jobs_dir(args: argparse.Namespace) -> Path | None:
    return Path(args.jobs_dir) if getattr(args, "jobs_dir", None) else None


def _transport(args: argparse.Namespace) -> object:
    from fioprobe.gateway.pushgateway import Transport

    if not args.gateway:
        raise UsageError("no Pushgateway: give --gateway URL or set FIOPROBE_PUSHGATEWAY_URL")
    return Transport.from_sources(
        args.gateway,
        username_file=args.username_file,
        password_file=args.password_file,
        ca_file=args.ca_file,
        cert_file=args.cert_file,
        key_file=args.key_file,
        timeout_seconds=args.timeout,
        attempts=args.attempts,
    )


# --- argument parsing ---------------------------------------------------------------------

# The bounds of every numeric option (fioprobe.cli.argtypes has the types and their messages).
#: `run --every`, the demo's `--interval`: below a second `run --every` runs fio back to back
#: (with an unreachable gateway, for as long as it runs); above a day nothing is meant.
_interval_seconds = seconds(1, 86400)
#: `--writer-lease`, `--timeout`, `--attempts`, `--probe-timeout`: the ranges the
#: configuration file takes too (fioprobe.bounds says why each).
_lease_seconds = seconds(*bounds.LEASE_SECONDS)
_request_seconds = seconds(*bounds.REQUEST_SECONDS)
_attempts = whole(*bounds.ATTEMPTS)
_probe_seconds = seconds(*bounds.PROBE_SECONDS)
#: `run --cycles`, the demo's `--iterations` (0: until stopped) and `--preview-every`.
_cycles = whole(1, 1_000_000)
_iterations = whole(0, 1_000_000)
_preview_every = whole(1, 1000)
#: `report --warn-ms/--crit-ms`: latency thresholds, a microsecond to a minute.
_threshold_ms = number(0.001, 60_000, "milliseconds")


def _add_gateway_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "Pushgateway",
        "Credentials are never taken from the command line itself: the username and password "
        "come from files (--username-file/--password-file, e.g. a mounted Secret) or from "
        "FIOPROBE_PUSHGATEWAY_USERNAME and FIOPROBE_PUSHGATEWAY_PASSWORD.",
    )
    group.add_argument(
        "--gateway",
        default=os.environ.get("FIOPROBE_PUSHGATEWAY_URL"),
        metavar="URL",
        help="Pushgateway base URL, http:// or https:// (env FIOPROBE_PUSHGATEWAY_URL)",
    )
    group.add_argument("--username-file", metavar="FILE", help="file holding the basic-auth user")
    group.add_argument(
        "--password-file", metavar="FILE", help="file holding the basic-auth password"
    )
    group.add_argument("--ca-file", metavar="FILE", help="CA bundle to verify an https Pushgateway")
    group.add_argument("--cert-file", metavar="FILE", help="client certificate for mutual TLS")
    group.add_argument("--key-file", metavar="FILE", help="private key of --cert-file")
    group.add_argument(
        "--timeout",
        type=_request_seconds,
        default=push_defaults.TIMEOUT_SECONDS,
        metavar="S",
        help="deadline of each whole request: connect, send, answer; 0.1 to 600 "
        f"(default {push_defaults.TIMEOUT_SECONDS:g})",
    )
    group.add_argument(
        "--attempts",
        type=_attempts,
        default=push_defaults.ATTEMPTS,
        metavar="N",
        help=f"tries per request, 1 to 10, with exponential backoff from "
        f"{push_defaults.BACKOFF_SECONDS:g} s, on network errors and HTTP 5xx only "
        f"(default {push_defaults.ATTEMPTS})",
    )
    group.add_argument(
        "--writer-lease",
        type=_lease_seconds,
        default=push_defaults.WRITER_LEASE_SECONDS,
        metavar="S",
        help="how long a writer's pushes make a group its own, 1 to 604800 "
        f"(default {push_defaults.WRITER_LEASE_SECONDS:g}); see docs/FAULTS.md",
    )


def _add_group_options(parser: argparse.ArgumentParser, *, required: bool) -> None:
    parser.add_argument(
        "--storageclass", required=required, help="StorageClass name (or a node-local name)"
    )
    parser.add_argument("--profile", required=required, help="probe profile name (jobs/<name>.fio)")
    parser.add_argument("--node", help="node name, for node-local probes only (e.g. etcd disks)")


def _add_etcd_disk_option(parser: argparse.ArgumentParser, default_text: str) -> None:
    parser.add_argument(
        "--etcd-disk",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="whether the probed disk holds etcd's data, published as fioprobe_info{etcd_disk}: "
        f"the mixin's etcd alerts select disks by it (default: {default_text})",
    )


def _add_owner_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--owner",
        metavar="NAME",
        help="the configuration this group belongs to, as `owner:` in a configuration "
        "(fioprobe_owner_info); `fioprobe gc` deletes only groups of the owners it is given. "
        "Default: none (gc leaves the group alone unless --unowned)",
    )


class _Parser(argparse.ArgumentParser):
    """argparse with its errors on one line, like every other fioprobe error: a CronJob's
    log shows the problem, not a usage screen (`--help` has that)."""

    def error(self, message: str) -> NoReturn:
        line = " ".join(message.split())
        command = self.prog.removeprefix("fioprobe").strip()
        where = f"{command}: " if command else ""
        self.exit(ExitCode.USAGE, f"fioprobe: error: {where}{line} (see {self.prog} --help)\n")


# Adding a subcommand: a cmd_<name> function above and its subparser below, each a small,
# self-contained edit (see CONTRIBUTING.md); heavy imports go inside the cmd_ function so
# that `fioprobe push` stays fast.
def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="fioprobe",
        description="fio probes of Kubernetes storage, exported to Prometheus.",
        epilog=__doc__.split("\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"fioprobe {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    convert = sub.add_parser(
        "convert",
        help="print the Prometheus text exposition of one fio output (no push)",
        description="Print the metrics of one fio output on stdout, e.g. for node_exporter's "
        "textfile collector. Counters cover this one run only.",
    )
    convert.add_argument("file", metavar="FILE|-", help="fio output (json or json+), - for stdin")
    _add_group_options(convert, required=False)
    convert.set_defaults(func=cmd_convert)

    push = sub.add_parser(
        "push",
        help="merge one fio output into its group's totals and push them",
        description="Merge one fio output into the cumulative totals of its Pushgateway group "
        "(job=fioprobe, storageclass, profile[, node]) and PUT them.",
    )
    push.add_argument("file", metavar="FILE|-", help="fio output (json or json+), - for stdin")
    _add_group_options(push, required=True)
    _add_etcd_disk_option(push, "not published, unknown")
    push.add_argument(
        "--state",
        metavar="FILE",
        help="cumulative state file (default: $FIOPROBE_STATE_DIR or ~/.local/state/fioprobe, "
        "one file per group); without one, totals are read back from the Pushgateway",
    )
    push.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    _add_owner_option(push)
    _add_gateway_options(push)
    push.set_defaults(func=cmd_push)

    probe = sub.add_parser(
        "probe",
        help="run one fio profile in a directory and push the result",
        description="Run jobs/<profile>.fio inside DIR (safely: own subdirectory, lock, "
        "free-space check, timeout, cleanup) and push the result or the failure.",
    )
    _add_group_options(probe, required=True)
    _add_etcd_disk_option(probe, "not published, unknown")
    probe.add_argument("--dir", required=True, help="probe directory (fio writes only inside it)")
    probe.add_argument(
        "--require-mount-point",
        action="store_true",
        help="fail (no_directory) unless DIR is a mount point: an unmounted volume is never "
        "probed in its place",
    )
    where = probe.add_mutually_exclusive_group()
    where.add_argument(
        "--state",
        metavar="FILE",
        help="cumulative state file (default: one per group in the state directory)",
    )
    where.add_argument(
        "--state-dir",
        metavar="SDIR",
        help="the probe's own state directory, beside DIR, never inside it (default: "
        "DIR/.fioprobe-state/ with --dedicated, else $FIOPROBE_STATE_DIR or "
        "~/.local/state/fioprobe); checked on every open: owned by this user, writable by "
        "no one else",
    )
    probe.add_argument(
        "--dedicated",
        action="store_true",
        help="DIR is the probe's own volume, which no tenant writes: keep the state on it "
        "(default: shared, the state never lives where tenants write)",
    )
    probe.add_argument(
        "--probe-timeout",
        type=_probe_seconds,
        metavar="S",
        help="wall-clock limit around fio, 1 to 86400 (default: the profile's budgeted seconds "
        "plus a margin)",
    )
    probe.add_argument("--jobs-dir", metavar="DIR", help="where profiles live (default: jobs/)")
    probe.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    _add_owner_option(probe)
    _add_gateway_options(probe)
    probe.set_defaults(func=cmd_probe)

    run = sub.add_parser(
        "run",
        help="run every configured probe of this host once (the CronJob entrypoint)",
        description="Run every target and profile of a YAML configuration once, in order, "
        "pushing each result.",
    )
    run.add_argument("--config", required=True, metavar="FILE", help="YAML configuration")
    run.add_argument(
        "--node",
        default=os.environ.get("NODE_NAME"),
        help="run only node-local targets of this node (env NODE_NAME); shared targets always",
    )
    run.add_argument("--jobs-dir", metavar="DIR", help="where profiles live (default: jobs/)")
    run.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    run.add_argument(
        "--every",
        type=_interval_seconds,
        metavar="SECONDS",
        help="run again every SECONDS, 1 to 86400, at this node's own offset in the interval "
        "(the per-node DaemonSet's mode); without it, run once",
    )
    run.add_argument(
        "--cycles",
        type=_cycles,
        metavar="N",
        help="with --every: stop after N runs, 1 to 1000000 (default: never)",
    )
    run.set_defaults(func=cmd_run)

    from fioprobe.continuous import options as co

    continuous = sub.add_parser(
        "continuous",
        help="a low-rate write + fdatasync stream per target, served on /metrics for Prometheus",
        description="Write etcd's WAL pattern (a small write, then fdatasync) about once a "
        "second on every target, each in a child process of its own, and serve the latency, "
        "the age of an operation still outstanding and stall time on /metrics (scraped, not "
        "pushed). SIGTERM stops it within 2 s. See docs/CONTINUOUS.md.",
    )
    continuous.add_argument("--config", help="the targets of this YAML file (as `run`)")
    continuous.add_argument("--dir", help="one target: its directory (must exist)")
    continuous.add_argument("--storageclass", help="one target: its storageclass label")
    continuous.add_argument(
        "--node",
        help="node label: of the --dir target, or of the configuration's node-local targets "
        "(for those, env NODE_NAME by default)",
    )
    _add_etcd_disk_option(continuous, "no")
    continuous.add_argument(
        "--listen", type=co.listen_address, default=("0.0.0.0", 9436), metavar="[HOST]:PORT",
        help="where /metrics is served (default :9436)",
    )  # fmt: skip
    continuous.add_argument(
        "--interval", type=co.interval_seconds, default=1.0, metavar="S",
        help="seconds between two operations per target, 0.1 to 3600 (default 1)",
    )  # fmt: skip
    continuous.add_argument(
        "--write-size", type=co.write_size_bytes, default=2300, metavar="BYTES",
        help="bytes per write, 512 to 1Mi (default 2300, as fio's etcd check)",
    )  # fmt: skip
    continuous.add_argument(
        "--file-size", type=co.file_size_bytes, default=4 * 1024 * 1024, metavar="BYTES",
        help="the one preallocated file per target, 64Ki to 1Gi: its bytes on disk "
        "(default 4Mi)",
    )  # fmt: skip
    continuous.add_argument(
        "--stall-threshold", type=co.stall_threshold_seconds, default=0.01, metavar="S",
        help="an operation outstanding longer counts into fioprobe_continuous_stall_seconds_total "
        "(default 0.01)",
    )  # fmt: skip
    continuous.set_defaults(func=cmd_continuous)

    demo = sub.add_parser(
        "demo",
        help="local Pushgateway, Prometheus with the mixin's rules and Alertmanager; etcd-fsync "
        "probes of a local, a memory and a slow disk every round; alert states and dashboards",
        description="Ctrl-C, SIGTERM and SIGHUP stop everything the demo started and remove its "
        "files. With GRAFANA_URL (and GRAFANA_TOKEN) set, the dashboards and a datasource are "
        "also provisioned into that Grafana.",
    )
    demo.add_argument(
        "--interval", type=_interval_seconds, default=10.0,
        help="seconds between probe rounds, 1 to 86400; the rules' windows follow from it "
        "(default 10)",
    )  # fmt: skip
    demo.add_argument(
        "--iterations",
        type=_iterations,
        default=0,
        help="stop after N rounds, up to 1000000 (default 0: until Ctrl-C)",
    )
    demo.add_argument(
        "--workdir", help="make the demo's temporary directory here (removed at the end)"
    )
    demo.add_argument(
        "--previews", help="draw the dashboards here (kept) instead of the temporary directory"
    )
    demo.add_argument(
        "--preview-every",
        type=_preview_every,
        default=3,
        metavar="N",
        help="draw them every N rounds, 1 to 1000 (default 3)",
    )
    demo.set_defaults(func=cmd_demo)

    gc = sub.add_parser(
        "gc",
        help="delete Pushgateway groups of probes no longer in the configuration",
        description="The Pushgateway never forgets a group. Delete every job=fioprobe group "
        "of the configurations' owners (fioprobe_owner_info, `owner:` in each configuration) "
        "whose (storageclass, profile) no given configuration has, and their writer conflict "
        "groups once older than the writer lease. Groups of other owners, groups without an "
        "owner (unless --unowned) and groups with other labels are never touched. Node-local "
        "groups match on any node unless --node lists the nodes that still exist. See "
        "docs/GC.md.",
    )
    gc.add_argument(
        "--config",
        required=True,
        action="append",
        metavar="FILE",
        help="YAML configuration (repeat for every configuration of one owner or Pushgateway)",
    )
    gc.add_argument(
        "--node",
        action="append",
        metavar="NAME",
        help="a node that still exists (repeat); node-local groups of other nodes are deleted",
    )
    gc.add_argument(
        "--unowned",
        action="store_true",
        help="also delete groups without an owner (pushed before owners existed) that no "
        "given configuration has; only safe when every configuration of the Pushgateway is "
        "given or has pushed since it named its owner",
    )
    gc.add_argument("--jobs-dir", metavar="DIR", help="where profiles live (default: jobs/)")
    gc.add_argument("--dry-run", action="store_true", help="only print what would be deleted")
    gc.add_argument("--quiet", action="store_true", help="no summary on stderr")
    gc.set_defaults(func=cmd_gc)

    report = sub.add_parser(
        "report",
        help="comparison report (Markdown, HTML, PNG charts) over folders/archives of fio results",
        description="Read fio results (files, nested folders such as "
        "<battery>_<cluster>-fio-<host>/.../*.json, .tar.gz archives read in place), group "
        "them and write report.md, report.html (self-contained), report.json and charts/ "
        "into OUTDIR. Unreadable files are listed in the report and do not stop it.",
    )
    _add_results_options(report, "OUTDIR", "output folder")
    report.add_argument("--baseline", metavar="GROUP", help="compare every group to this one")
    warn_ms, crit_ms = LATENCY_YELLOW_SECONDS * 1e3, ETCD_FSYNC_P99_SECONDS * 1e3
    report.add_argument(
        "--warn-ms",
        type=_threshold_ms,
        default=warn_ms,
        help=f"yellow from, 0.001 to 60000 (default {warn_ms:g})",
    )
    report.add_argument(
        "--crit-ms",
        type=_threshold_ms,
        default=crit_ms,
        help=f"red from, 0.001 to 60000 (default {crit_ms:g})",
    )
    report.add_argument("--title", default="fio results", help="report title")
    report.add_argument("--quiet", action="store_true", help="no summary line on stderr")
    report.set_defaults(func=cmd_report)

    backfill = sub.add_parser(
        "backfill",
        help="fio results -> OpenMetrics with each run's time -> TSDB blocks (promtool)",
        description="Turn fio results into the series the live exporter would have pushed "
        "(cumulative histograms per group, storageclass=GROUP, profile=JOB), each run at its "
        "own timestamp, and run `promtool tsdb create-blocks-from openmetrics` into DIR. Copy "
        "the blocks into a Prometheus data directory whose --storage.tsdb.retention.time "
        "reaches back to the oldest run.",
    )
    _add_results_options(backfill, "DIR", "block folder")
    backfill.add_argument(
        "--label", action="append", metavar="NAME=VALUE", help="extra label on every series"
    )
    backfill.add_argument("--promtool", default="promtool", help="promtool binary")
    backfill.add_argument("--quiet", action="store_true", help="no summary lines on stderr")
    backfill.set_defaults(func=cmd_backfill)
    return parser


def _grouping(args: argparse.Namespace) -> object:
    from fioprobe.report.load import DEFAULT_FOLDER_PATTERN, Grouping

    return Grouping(args.group_by, args.folder_pattern or DEFAULT_FOLDER_PATTERN)


def _add_results_options(parser: argparse.ArgumentParser, output: str, output_help: str) -> None:
    """What report and backfill share: their inputs, output folder, and grouping."""
    parser.add_argument("paths", nargs="+", metavar="PATH", help="fio results, folders, archives")
    parser.add_argument("-o", "--output", required=True, metavar=output, help=output_help)
    parser.add_argument(
        "--group-by",
        default="folder",
        metavar="folder|job|option:NAME",
        help="columns: the folder naming pattern's group (default), the fio job name, or the "
        "value of a fio option (e.g. option:iodepth)",
    )
    parser.add_argument(
        "--folder-pattern",
        default=None,  # report.load.DEFAULT_FOLDER_PATTERN, resolved in the command: every
        metavar="REGEX",  # other command would pay for importing the report package here
        help="matched against each folder name; named groups group (or cluster), node (or "
        "host), battery (default: <battery>_<group>-fio-<node>)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; every error fioprobe reports carries its own exit status."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return _fail("interrupted", 128 + signal.SIGINT)
    except Interrupted as exc:
        return _fail(f"interrupted by {exc}; {exc.what_happened}", exc.exit_code)
    except FioprobeError as exc:
        return _fail(str(exc), exc.exit_code)


def _fail(message: str, code: int) -> int:
    print(f"fioprobe: error: {message}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
