"""The watch's step ends against the times the objects themselves carry.

The watch times every step: its clock is the probe's, read when the change arrived, with
sub-millisecond resolution. The objects carry their own times (a pod's PodScheduled
lastTransitionTime, a container's startedAt, a volume's lastPhaseTransitionTime, an event's
first occurrence), written by other machines' clocks and mostly cut to whole seconds. They
cannot replace the watch (a second's rounding is a large part of a step of one second, and the
clocks differ), but they can catch the watch being wrong: a delivery much later than the
change (an API server or a watch that lags) or a clock that is off. So each is compared, and a
difference beyond 1 s plus the field's rounding is reported, never used.

An end the watch did not see directly (shown by a later step) is only an upper bound: there,
only an object time after it is a disagreement.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from fioprobe.provision.events import Event
from fioprobe.provision.objects import ClaimState, Mode, PodState, Run, VolumeState
from fioprobe.provision.observations import State
from fioprobe.provision.steps import Step, StepTime
from fioprobe.provision.timestamps import KubeTime

#: How far the watch and an object's time may be apart, beyond the time field's rounding:
#: a watch delivers a change well within a second, and cluster clocks kept by NTP agree to
#: milliseconds. More is worth a line in the log.
ALLOWED_SECONDS = 1.0


@dataclass(frozen=True)
class Clock:
    """One reading of both clocks, taken together, to put monotonic times on the wall."""

    monotonic: float
    wall: float

    def wall_of(self, monotonic: float) -> float:
        return self.wall + (monotonic - self.monotonic)


@dataclass(frozen=True)
class Stamp:
    """An object's own time for the end of `step`."""

    step: Step
    at: KubeTime
    source: str


@dataclass(frozen=True)
class Disagreement:
    step: Step
    source: str
    #: The watch's end of the step on the wall clock, and the object's time (POSIX seconds).
    watch: float
    stamp: float
    what: str

    @property
    def difference(self) -> float:
        """Watch minus object: positive when the watch saw the change after the object's time."""
        return self.watch - self.stamp


def stamps_of(mode: Mode, state: State | Event) -> list[Stamp]:
    """The step ends `state` (a delivered object, or an event) carries a time for."""
    found: list[Stamp] = []
    if isinstance(state, ClaimState):
        if mode is Mode.IMMEDIATE and state.meta.created is not None:
            found.append(Stamp(Step.CREATED, state.meta.created, "claim creationTimestamp"))
    elif isinstance(state, PodState):
        if mode is Mode.WAIT_FOR_FIRST_CONSUMER and state.meta.created is not None:
            found.append(Stamp(Step.CREATED, state.meta.created, "pod creationTimestamp"))
        if mode is Mode.IMMEDIATE and state.scheduled_at is not None:
            found.append(
                Stamp(Step.SCHEDULED, state.scheduled_at, "pod PodScheduled lastTransitionTime")
            )
        writer = state.writer
        if writer is not None and writer.started is not None:
            found.append(Stamp(Step.RUNNING, writer.started, "writer startedAt"))
        written = writer is not None and writer.run is Run.TERMINATED and writer.exit_code == 0
        if written and writer is not None and writer.finished is not None:
            found.append(Stamp(Step.WRITTEN, writer.finished, "writer finishedAt"))
    elif isinstance(state, VolumeState):
        if state.phase == "Bound" and state.phase_changed is not None:
            found.append(Stamp(Step.BOUND, state.phase_changed, "volume lastPhaseTransitionTime"))
    elif isinstance(state, Event) and not state.warning and state.first is not None:
        if state.reason == "Scheduled" and mode is Mode.IMMEDIATE:
            found.append(Stamp(Step.SCHEDULED, state.first, "event Scheduled"))
        elif state.reason == "SuccessfulAttachVolume":
            found.append(Stamp(Step.ATTACHED, state.first, "event SuccessfulAttachVolume"))
    return found


def cross_check(
    steps: Sequence[StepTime],
    stamps: Iterable[Stamp],
    clock: Clock,
    allowed: float = ALLOWED_SECONDS,
) -> list[Disagreement]:
    """Every stamp whose step the watch ended more than `allowed` seconds (plus the stamp's
    rounding) away from it; steps not finished, or absent, are not compared."""
    ends = {t.step: t for t in steps}
    found: list[Disagreement] = []
    for stamp in sorted(set(stamps), key=lambda s: (s.at.posix, s.step, s.source)):
        timed = ends.get(stamp.step)
        if timed is None:
            continue
        watch = clock.wall_of(timed.end)
        difference = watch - stamp.at.posix
        # The true change lies in [stamp, stamp + resolution); the watch saw it after.
        late_limit = allowed + stamp.at.resolution if timed.direct else math.inf
        if difference < -allowed:
            what = (
                f"the watch ended {stamp.step} {-difference:.3f}s before the {stamp.source} "
                "says it happened: a clock is off"
            )
        elif difference > late_limit:
            what = (
                f"the watch ended {stamp.step} {difference:.3f}s after the {stamp.source}: "
                "a late delivery, or a clock that is off"
            )
        else:
            continue
        found.append(Disagreement(stamp.step, stamp.source, watch, stamp.at.posix, what))
    return found
