"""`fioprobe run`: every configured probe of this host once, in order.

One target's trouble never stops the next one: each probe ends in one published outcome
(see `probe`), and what could not be published is reported here, on one line, with the exit
status it leads to. Only a signal ends the loop early, after its failure was published.
"""

from __future__ import annotations

import sys
from pathlib import Path

from fioprobe.errors import ExitCode, FailureReason, FioprobeError, Interrupted
from fioprobe.gateway.shards import Shards
from fioprobe.gateway.transport import PushError, Transport
from fioprobe.probe.model import ProbeTarget
from fioprobe.probe.prober import run_and_publish
from fioprobe.publish.outcome import StateNotKept, WriterConflict
from fioprobe.target.config import Config, TargetConfig


def run_config(
    config: Config,
    *,
    only_node: str | None,
    jobs_dir: Path | None,
    quiet: bool,
    deadline: float | None = None,
) -> int:
    """Run every configured probe once; exit 0 only if all succeeded and were pushed.

    `deadline` (a time.time() value) ends this pass's slot: a schedule that gives each
    etcd member a slot of its own needs every member's IO over by its slot's end. Each
    profile's fio timeout is clamped so that fio is stopped by then: the timeout fires at
    least `slot.FIO_STOP_SECONDS` (15 s) before it, which is how long fio's IO can go on
    after its timeout (5 s from SIGTERM to SIGKILL of its process group, then up to 10 s
    for a job still in a slow fsync to return). A profile with less than its budgeted
    seconds (`fioprobe-budget-seconds`) left before that is not started: its `timeout`
    failure is pushed, one outcome per profile as always. Not bounded by it: pushing the
    outcomes, the removal of fio's files after it stops, and a volume that hangs (its child
    is abandoned on the run's own deadline, fio's timeout + 25 s).
    """
    transport = Shards.from_config(config.pushgateway)
    status: int = ExitCode.OK
    for target_config in config.targets:
        if target_config.node_local and not only_node:
            say(f"skipping node-local target {target_config.name}: no --node/NODE_NAME")
            status = max(status, ExitCode.USAGE)
            continue
        for profile in target_config.profiles:
            target = probe_target(target_config, profile.name, profile.overrides, only_node,
                                  config.pushgateway.writer_lease_seconds,
                                  owner=config.owner)  # fmt: skip
            code = probe_once(target, transport, jobs_dir, quiet=quiet, deadline=deadline)
            status = max(status, code)
    return int(status)


def probe_once(
    target: ProbeTarget,
    transport: Transport | Shards,
    jobs_dir: Path | None,
    *,
    quiet: bool,
    deadline: float | None = None,
) -> int:
    """One probe with its report line; the exit status it stands for. Raises only
    Interrupted (its failure already published), which ends the whole command. `deadline`:
    see `run_config`."""
    key = target.grouping_key
    try:
        result = run_and_publish(target, transport, jobs_dir, deadline=deadline)
    except Interrupted:
        raise
    except PushError as exc:
        say(f"{key}: error: {exc}; the run is kept in {target.state_file().path} and goes "
            "with the next push")  # fmt: skip
        return ExitCode.PUSH_FAILED
    except WriterConflict as exc:
        say(f"{key}: FAILED (writer_conflict): {exc}")
        return ExitCode.PROBE_FAILED
    except StateNotKept as exc:
        say(f"{key}: FAILED ({exc.reason}): {exc}")
        return exit_for(exc.reason)
    except FioprobeError as exc:  # a state newer than this fioprobe, and its kin
        say(f"{key}: error: {exc}")
        return exc.exit_code
    outcome = result.outcome
    if outcome.failure_reason == FailureReason.BUSY:
        say(
            f"{key}: FAILED (busy): {result.message}; the failure was pushed, and that run "
            "pushes its own result if it is alive"
        )
        return ExitCode.PROBE_FAILED
    seconds = outcome.pushed_duration_seconds  # the run and its publish
    if outcome.success:
        if result.message:  # what went wrong beside a good run (a clean-up) is always said
            say(f"{key}: ok in {seconds:.1f}s; {result.message}")
        elif not quiet:
            say(f"{key}: ok in {seconds:.1f}s")
        return ExitCode.OK
    say(f"{key}: FAILED ({outcome.failure_reason}) in {seconds:.1f}s: "
        f"{result.message}; the failure was pushed")  # fmt: skip
    return exit_for(outcome.failure_reason)


def exit_for(reason: FailureReason | None) -> int:
    """A refused profile or target is a configuration error (2); any other failure is 1."""
    return ExitCode.USAGE if reason == FailureReason.UNSAFE_TARGET else ExitCode.PROBE_FAILED


def probe_target(
    target: TargetConfig,
    profile: str,
    overrides: dict[str, str],
    node: str | None,
    lease_seconds: float,
    *,
    owner: str | None = None,
) -> ProbeTarget:
    """The probe of one profile of a configured target (node-local ones on `node`)."""
    return ProbeTarget(
        storageclass=target.name,
        directory=target.directory,
        profile=profile,
        node=node if target.node_local else None,
        overrides=overrides,
        volume=target.volume,
        timeout_seconds=target.timeout_seconds,
        require_mount_point=target.require_mount_point,
        state_dir=target.state_dir,
        lease_seconds=lease_seconds,
        owner=owner,
        etcd_disk=target.etcd_disk,
        etcd_data_dir=target.etcd_data_dir,
    )


def say(message: str) -> None:
    """One line on stderr, where a CronJob's log and a terminal both show it."""
    print(f"fioprobe: {message}", file=sys.stderr)
