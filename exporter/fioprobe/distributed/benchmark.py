"""One benchmark from its plan to its push: checks first, phases, clean-up whatever happens.

The order is the safety argument. Every phase's job file is built and checked (allowlist,
budget) and the server list matched against the plan before fio is even looked for: a plan
that fails a check contacts no server. Then each phase is one `fio --client`; its output is
read strictly, every server must be in it without a job error, and fio's own byte counts
must stay within the budget, or the benchmark stops. Whatever ends it (success, a failed
phase, a timeout, SIGTERM), the clean-up job then removes the files the phases made on every
server, the result is pushed once (success or not), and an interruption ends the command
with 128 + the signal.

A failure names its servers: the ones fio's output shows failing, and, after a failed phase
or an interruption, the ones that do not answer fio's probe (`liveness.py`). The clean-up is
sent only to the servers that answer, within a deadline of its own that includes that
check: a silent server is waited on once, by the phase, not again by the clean-up.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from fioprobe.distributed.archive import (
    archive_phase,
    check_archive_free,
    check_archive_writable,
)
from fioprobe.distributed.client import STOP_GRACE_SECONDS, ClientOutput, complaint, run_client
from fioprobe.distributed.failures import PhaseTimedOut, ServersFailed, failed_servers
from fioprobe.distributed.jobs import PhaseJob, cleanup_job, phase_jobs, phase_kind
from fioprobe.distributed.liveness import NoAnswer, unanswered
from fioprobe.distributed.plan import Plan, PlanError, prepare_bytes
from fioprobe.distributed.servers import Server, reported_key, wait_until_listening
from fioprobe.distributed.silence import named
from fioprobe.distributed.summary import phase_table
from fioprobe.errors import FailureReason, FioprobeError, Interrupted, ProbeFailure
from fioprobe.fio.clientserver import ClientServerRun, ServerRun, parse_client_server
from fioprobe.fio.execute import fio_binary
from fioprobe.fio.parse import FioOutputError
from fioprobe.metrics.distributed import BenchmarkOutcome, PhaseResult

#: The signals that stop a benchmark (and end the command with 128 + the signal).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: The clean-up's wall-clock limit, from the check of which servers answer to its fio client
#: stopped: its job reads one block per job and removes the file, in about a second.
CLEANUP_SECONDS = 30.0
DROP_CACHES = Path("/proc/sys/vm/drop_caches")
#: How long the node-wide sync() before a cache drop may take before the drop is skipped.
SYNC_SECONDS = 30.0

Say = Callable[[str], None]


@dataclass
class _Running:
    """What the phases share: the signal received, each server's bytes so far."""

    received: int | None = None
    used_bytes: dict[str, int] = field(default_factory=dict)


def check_plan(plan: Plan, servers: Sequence[Server]) -> list[PhaseJob]:
    """Every phase's checked job, or PlanError: nothing has been sent anywhere yet."""
    jobs = phase_jobs(plan)
    if len(servers) != plan.servers:
        raise PlanError(
            f"{plan.source}: the plan is for {plan.servers} servers, --servers names {len(servers)}"
        )
    return jobs


def run_benchmark(
    plan: Plan,
    servers: Sequence[Server],
    archive_root: Path,
    say: Say,
    push: Callable[[BenchmarkOutcome], None] | None = None,
    wait_seconds: float = 0.0,
) -> BenchmarkOutcome:
    """Run the plan's phases against `servers`; the outcome, or the error that ended it
    (after the clean-up and the push). With `wait_seconds`, first wait that long at most
    for every server to listen."""
    jobs = check_plan(plan, servers)
    check_archive_writable(archive_root)
    check_archive_free(archive_root, plan.name, plan.storageclass)
    fio = fio_binary()
    running = _Running()
    phases: list[PhaseResult] = []
    error: FioprobeError | None = None
    sent = False
    with _stop_signals(running):
        try:
            if wait_seconds > 0:
                wait_until_listening(servers, wait_seconds, say)
            for index, job in enumerate(jobs):
                if index and plan.drop_caches:
                    say(drop_caches())
                say(f"phase {job.phase}: sending the checked job to {len(servers)} servers")
                sent = True
                result = _phase(fio, plan, servers, job, running, archive_root)
                phases.append(PhaseResult(job.phase, result))
                for line in [*phase_table(phases[-1]), ""]:
                    say(line)
        except FioprobeError as exc:
            error = exc
        finally:
            _ignore_signals()  # one interruption; then the clean-up runs to its end
            answers: dict[Server, NoAnswer] = {}
            if sent:
                until = time.monotonic() + CLEANUP_SECONDS
                if error is not None:  # whoever did not answer the phase: skipped, named
                    answers = unanswered(servers)
                cleaned, line = _cleanup(fio, plan, servers, answers, until)
            else:
                cleaned, line = True, "clean-up: no job was sent, so no server holds a file"
            say(line)
    if error is not None:
        error = named(error, servers, answers)
    if isinstance(error, Interrupted):
        error.what_happened = (
            "no job had been sent to any server"
            if not sent
            else "fio's client told the servers to stop; "
            + (
                "the benchmark's files were removed"
                if cleaned
                else "the clean-up did not reach every server (see the clean-up line)"
            )
        )
    outcome = BenchmarkOutcome(
        phases=tuple(phases),
        success=error is None,
        finished_at=time.time(),
        servers=len(servers),
        block_size=plan.block_size,
        iodepths=plan.sweep,
        jobs_per_server=plan.jobs_per_server,
        ioengine=plan.ioengine,
        server_labels=tuple(server.label for server in servers),
        failure_reason=None if error is None else error.reason,
        failed_servers=failed_servers(error),
    )
    if push is not None:
        _push(push, outcome, error)
    if error is not None:
        raise error
    return outcome


def _push(
    push: Callable[[BenchmarkOutcome], None],
    outcome: BenchmarkOutcome,
    error: FioprobeError | None,
) -> None:
    """Push the outcome; a refused push of a failed benchmark is one line on stderr.

    What ended the benchmark (a phase's error, SIGTERM) decides the message and the exit
    status: a push refused after it must not replace it, or a caller would read exit 4 and
    a gateway error where the storage failed or the benchmark was stopped.
    """
    try:
        push(outcome)
    except FioprobeError as exc:
        if error is None:
            raise
        print(f"fioprobe: push failed too: {exc}", file=sys.stderr, flush=True)


def _phase(
    fio: str,
    plan: Plan,
    servers: Sequence[Server],
    job: PhaseJob,
    running: _Running,
    archive_root: Path,
) -> ClientServerRun:
    try:
        output = run_client(fio, servers, job.text, job.deadline_seconds)
    except ProbeFailure as exc:
        if exc.reason is not FailureReason.TIMEOUT:
            raise
        raise PhaseTimedOut(exc.reason, f"phase {job.phase}: {exc}") from None
    try:
        result = parse_client_server(output.text, source=f"phase {job.phase}")
    except FioOutputError as exc:
        raise ProbeFailure(_failure_reason(output), f"{exc}{_said(output)}") from None
    _check_result(job, servers, output, result)
    _check_budget(plan, job, result, running.used_bytes)
    if phase_kind(job.phase) == "prepare":
        _check_laid_out(plan, job, result)
    archive_phase(archive_root, plan.name, plan.storageclass, job.phase, output.text, result)
    return result


def _check_result(
    job: PhaseJob, servers: Sequence[Server], output: ClientOutput, result: ClientServerRun
) -> None:
    reported = _reported(result)
    missing = [server for server in servers if server.key not in reported]
    if missing:
        raise ServersFailed(
            FailureReason.FIO_ERROR,
            f"phase {job.phase}: no result from {', '.join(s.name for s in missing)}"
            f"{_said(output)}",
            [server.label for server in missing],
        )
    failing = [server for server in result.servers if server.run.failed_jobs]
    failed = [
        f"{server.server}: error {entry.error}"
        for server in failing
        for entry in server.run.failed_jobs
    ]
    if failed or output.returncode != 0:
        raise ServersFailed(
            FailureReason.FIO_ERROR,
            f"phase {job.phase}: fio's client exited {output.returncode}"
            f"{': ' + ', '.join(failed) if failed else ''}{_said(output)}",
            [server.server for server in failing],
        )


def _reported(result: ClientServerRun) -> dict[tuple[str, int | None], ServerRun]:
    """Each server of fio's output by (host, port): what `Server.key` is compared with."""
    return {reported_key(server.hostname, server.port): server for server in result.servers}


def _check_budget(plan: Plan, job: PhaseJob, result: ClientServerRun, used: dict[str, int]) -> None:
    """fio's own byte counts of each server, every phase so far, within the budget."""
    for server in result.servers:
        done = _io_bytes(server, ("read", "write", "trim"))
        used[server.server] = used.get(server.server, 0) + done
        if used[server.server] > plan.budget.bytes_per_server:
            raise ServersFailed(
                FailureReason.BUDGET_EXCEEDED,
                f"phase {job.phase}: fio reports {used[server.server]} bytes of IO on "
                f"{server.server} so far, more than budget.bytes_per_server "
                f"({plan.budget.bytes_per_server}); the benchmark stops",
                [server.server],
            )


def _io_bytes(server: ServerRun, ops: tuple[str, ...]) -> int:
    """fio's own byte count of one server's jobs in these directions."""
    return sum(
        stats.io_bytes
        for entry in server.run.jobs
        for stats in entry.ops.values()
        if stats.op in ops
    )


def _check_laid_out(plan: Plan, job: PhaseJob, result: ClientServerRun) -> None:
    """Prepare wrote the whole data set on every server, or the benchmark stops.

    fio ends a job at its size or its runtime, whichever comes first, and reports success
    either way: a prepare that `prepare_runtime` cut short leaves part of each file never
    written (fio sizes the files first), and the random phases would then measure reads and
    writes where no data was laid out, without a word.
    """
    wanted = prepare_bytes(plan)
    short = {}
    for server in result.servers:
        written = _io_bytes(server, ("write",))
        if written < wanted:
            short[server.server] = f"{server.server} wrote {written} of {wanted} bytes"
    if short:
        raise ServersFailed(
            FailureReason.TIMEOUT,
            f"phase {job.phase}: the data set was not laid out within prepare_runtime "
            f"({plan.prepare_runtime}s): {', '.join(short.values())}; raise prepare_runtime "
            "or lower file_size, or the random phases would measure a smaller data set",
            list(short),
        )


def _cleanup(
    fio: str,
    plan: Plan,
    servers: Sequence[Server],
    answers: Mapping[Server, NoAnswer],
    until: float,
) -> tuple[bool, str]:
    """Remove the phases' files on every server that answers: whether all were reached, and
    one line.

    The servers in `answers` did not answer fio's probe: the clean-up is not sent to them,
    or fio's client would wait on them again until its deadline. fio's client exits 0 even
    when it could not connect to a server, so what each server did is read from its output:
    a server missing there was not reached, and its working directory may still hold the
    benchmark's files. A job error on a server is reported as such (fio 3.33 lays a missing
    file out before it removes it: nothing is left then). `until` (monotonic) bounds it all,
    the stop of its fio client included.
    """
    targets = [server for server in servers if server not in answers]
    absent = [server.name for server in servers if server in answers]
    reported: dict[tuple[str, int | None], ServerRun] = {}
    if targets:
        deadline = until - time.monotonic() - STOP_GRACE_SECONDS
        try:
            output = run_client(
                fio, targets, cleanup_job(plan), max(1.0, deadline), output_format="json"
            )
            result = parse_client_server(output.text, source="clean-up")
        except FioprobeError as exc:
            unreached = f"; no answer from {', '.join(absent)}" if absent else ""
            return (
                False,
                f"clean-up: {exc}{unreached}; the servers' working directories may still hold "
                "bench.* files",
            )
        reported = _reported(result)
    absent += [s.name for s in targets if s.key not in reported]
    failed = [
        f"{s.name} (error {reported[s.key].run.failed_jobs[0].error})"
        for s in targets
        if s.key in reported and reported[s.key].run.failed_jobs
    ]
    done = len(servers) - len(absent) - len(failed)
    if not absent and not failed:
        return True, f"clean-up: the benchmark's files removed on {len(servers)} servers"
    line = f"clean-up: the benchmark's files removed on {done} of {len(servers)} servers"
    if failed:
        line += f"; a job error on {', '.join(failed)}"
    if absent:
        whose = "its working directory" if len(absent) == 1 else "their working directories"
        line += f"; no answer from {', '.join(absent)}: {whose} may still hold bench.* files"
    return not absent, line


def drop_caches(path: Path = DROP_CACHES, sync_seconds: float = SYNC_SECONDS) -> str:
    """Drop this node's page cache where the node allows it; one line either way.

    fio's own `invalidate` (on by default) already drops each job file's cached pages on
    every server before a phase; this drops the whole page cache of the node the command
    runs on, which matters only for servers on that node. The drop is tried first: a pod
    that may not drop (the usual case) never calls the node-wide sync() before it, which
    writes back every dirty page of the node and can take minutes. Where it may, the sync
    gets `sync_seconds` (it runs on in the kernel if it needs longer; the drop is then
    skipped: dirty pages cannot be dropped anyway).
    """
    try:
        handle = path.open("wb", buffering=0)  # unbuffered: a refused write fails here, once
    except OSError as exc:
        return (
            f"cache drop: not allowed on this node ({exc.strerror or exc}); each server still "
            "drops its job files' cached pages (fio's invalidate)"
        )
    with handle:
        synced = threading.Thread(target=os.sync, name="sync before the cache drop", daemon=True)
        synced.start()
        synced.join(sync_seconds)
        if synced.is_alive():
            return (
                f"cache drop: skipped, the node's sync() took longer than {sync_seconds:g} s "
                "(it goes on in the kernel); each server still drops its job files' cached pages"
            )
        try:
            handle.write(b"3\n")
        except OSError as exc:
            return f"cache drop: refused by this node ({exc.strerror or exc})"
    return "cache drop: this node's page cache dropped before the phase"


def _said(output: ClientOutput) -> str:
    said = complaint(output)
    return "" if said == "(no message)" else f"; fio said: {said}"


def _failure_reason(output: ClientOutput) -> FailureReason:
    return FailureReason.FIO_ERROR if output.returncode != 0 else FailureReason.PARSE_ERROR


@contextmanager
def _stop_signals(running: _Running) -> Iterator[None]:
    """SIGTERM, SIGINT, SIGHUP raise Interrupted where the benchmark is: in a phase,
    `run_client` stops fio's client on its way out (and fio's client stops the servers)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        if running.received is not None:
            return
        running.received = signum
        raise Interrupted(signum, signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _ignore_signals() -> None:
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
