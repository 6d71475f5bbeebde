"""The job file of each phase, checked as a probe profile is before any server sees it.

A fio server runs whatever job a client sends it, `exec_prerun` and `ioengine=exec`
included. So a phase's job file is written from the plan's values, then read back by the
probes' own checker (`fioprobe.fio.profiles.parse_profile`): every option must be on the
allowlist with a value of its form, and the phase's IO bound must fit the plan's declared
budget. Every phase is built and checked before the first one is sent, and the phases
together must fit the budget too: a plan whose randwrite would overrun is refused before
its prepare writes anything.

The checked options are sent under fioprobe's own `[global]`: `thread` (a server's jobs stay
threads of its one process, which a quit from the client ends), `group_reporting` (one entry
per server, whatever the jobs per server) and nothing that names a path: fio creates its files
(`bench.<job>.0`) in the server's working directory, the directory its owner gave it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fioprobe.distributed.plan import Plan, PlanError
from fioprobe.fio.profiles import Profile, ProfileError, parse_profile

#: The job section of every phase: one name, so every phase uses the files prepare laid out.
SECTION = "bench"
#: fioprobe's own lines, never the plan's: see the module's docstring.
_OWN_GLOBAL = ("thread", "group_reporting")
#: Wall-clock slack around a phase's runtime for connecting, laying files out and reporting.
PHASE_SLACK_SECONDS = 60.0
#: The clean-up sent last, whatever happened: each job opens its file without creating one
#: (`allow_file_create=0`), reads one block and removes it (`unlink`). Not a plan's option:
#: fioprobe writes it, and it names no file either.
CLEANUP = "cleanup"
_CLEANUP_GLOBAL = ("allow_file_create=0", "unlink=1")


@dataclass(frozen=True, slots=True)
class PhaseJob:
    """One phase's checked job: what is sent, and how long fio may take."""

    #: Its name: the phase (prepare, randread, randwrite), and `-qd<N>` in an IO depth sweep.
    phase: str
    profile: Profile
    text: str
    deadline_seconds: float


def phase_jobs(plan: Plan) -> list[PhaseJob]:
    """Every phase of the plan, each checked, all of them within the budget together."""
    jobs = [
        _phase_job(plan, phase, iodepth)
        for phase in plan.phases
        for iodepth in ((plan.iodepth,) if phase == "prepare" else plan.sweep)
    ]
    most = sum(int(job.profile.io_bytes_max) for job in jobs)
    if most > plan.budget.bytes_per_server:
        raise PlanError(
            f"{plan.source}: the phases together can do up to {most} bytes of IO per server, "
            f"more than budget.bytes_per_server ({plan.budget.bytes_per_server})"
        )
    seconds = sum(job.profile.runtime_seconds for job in jobs)
    if seconds > plan.budget.seconds_per_server:
        raise PlanError(
            f"{plan.source}: the phases together run up to {seconds:g}s per server, more than "
            f"budget.seconds_per_server ({plan.budget.seconds_per_server})"
        )
    return jobs


def cleanup_job(plan: Plan) -> str:
    """The job that removes every file the phases made, on every server (see CLEANUP).

    Its options pass the allowlist like every phase's; only fioprobe's own fixed lines
    (`allow_file_create=0`, `unlink=1`) are added after the check, as `thread` is.
    """
    text = "\n".join(
        [
            "# fioprobe-budget-bytes: " + str(4096 * plan.jobs_per_server * 2),
            "# fioprobe-budget-seconds: 30",
            "[global]",
            "ioengine=psync",
            "bs=4k",
            "size=4k",
            f"numjobs={plan.jobs_per_server}",
            "runtime=30",
            f"[{SECTION}]",
            "rw=read",
        ]
    )
    job = checked_job(plan, CLEANUP, text + "\n")
    return render(job.profile, extra=_CLEANUP_GLOBAL)


def _phase_job(plan: Plan, phase: str, iodepth: int) -> PhaseJob:
    name = phase if phase == "prepare" or not plan.iodepths else f"{phase}-qd{iodepth}"
    return checked_job(plan, name, _plan_text(plan, phase, iodepth))


def phase_kind(name: str) -> str:
    """prepare, randread or randwrite: a phase's name without its sweep suffix."""
    return name.split("-qd", 1)[0]


def checked_job(plan: Plan, phase: str, text: str) -> PhaseJob:
    """A phase's job file as a profile, checked (allowlist, budget), or PlanError.

    Every job file a server is sent goes through here, whatever wrote it.
    """
    try:
        profile = parse_profile(f"{plan.name}-{phase}", Path(plan.source), text)
    except ProfileError as exc:
        raise PlanError(f"{plan.source}: phase {phase}: {exc}") from None
    return PhaseJob(
        phase=phase,
        profile=profile,
        text=render(profile),
        deadline_seconds=profile.runtime_seconds + PHASE_SLACK_SECONDS,
    )


def _plan_text(plan: Plan, phase: str, iodepth: int) -> str:
    """The phase as a profile file: the plan's budget as its header, its options below."""
    prepare = phase == "prepare"
    rw = {"prepare": "write", "randread": "randread", "randwrite": "randwrite"}[phase]
    runtime = plan.prepare_runtime if prepare else plan.runtime
    lines = [
        f"# fioprobe-budget-bytes: {plan.budget.bytes_per_server}",
        f"# fioprobe-budget-seconds: {plan.budget.seconds_per_server}",
        "[global]",
        f"ioengine={plan.ioengine}",
        f"direct={int(plan.direct)}",
        f"bs={plan.prepare_block_size if prepare else plan.block_size}",
        f"iodepth={iodepth}",
        f"size={plan.file_size}",
        f"numjobs={plan.jobs_per_server}",
        f"runtime={runtime}",
    ]
    if not prepare and plan.loops > 1:
        lines.append(f"loops={plan.loops}")
    lines += [f"[{SECTION}]", f"rw={rw}"]
    return "\n".join(lines) + "\n"


def render(profile: Profile, extra: tuple[str, ...] = ()) -> str:
    """The text sent to the servers: fioprobe's [global] lines, then the checked options."""
    lines = ["[global]", *_OWN_GLOBAL, *extra]
    for section, options in profile.sections:
        if section != "global":
            lines.append(f"[{section}]")
        lines += [key if value is None else f"{key}={value}" for key, value in options]
    return "\n".join(lines) + "\n"
