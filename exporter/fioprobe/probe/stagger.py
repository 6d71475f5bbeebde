"""Slots that never overlap: the etcd members' probes run one member at a time.

A probe adds IO to the disk of the node it runs on. On the etcd members that disk holds
etcd's write-ahead log, and a write commits only once a majority of the members have synced
it: probes on two of three members at once could slow the quorum itself. So every interval
is cut into one slot per member, and a member's probe runs only inside its own slot.

Every node computes the same slots from its own clock, with nothing exchanged: the interval
T is aligned to the Unix epoch (interval k is [k*T, (k+1)*T)), the members are sorted by
name, and with N of them the member at index i owns [k*T + i*T/N, k*T + (i+1)*T/N). Its run
starts at the slot's start and is given the slot's end less `GUARD_SECONDS` as its deadline.

Pure computation (no clock, no files, no API): `probe.schedule` reads the members and the
time and runs what this says.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: How much earlier than its slot's end a run must be over. Each node reads its own clock:
#: node i ends by its clock, node i+1 starts by its own, so the two runs stay apart as long
#: as the two clocks differ by less than this. The control-plane nodes of a cluster are kept
#: in step by NTP (etcd itself warns at a 1 s drift between members, and kubeadm clusters
#: require synchronised clocks), where nodes differ by milliseconds; 2 s keeps the runs
#: apart through a node that fell a second behind, and costs a 60 s slot 3 % of its time.
GUARD_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class Slot:
    """The slot of one member in one interval."""

    #: The interval's length T, in seconds.
    every: float
    #: Which interval: k, counted from the Unix epoch.
    interval: int
    #: The member's index among the sorted members, and how many there are.
    index: int
    members: int
    start: float
    end: float
    guard: float = GUARD_SECONDS

    @property
    def interval_start(self) -> float:
        return self.interval * self.every

    @property
    def deadline(self) -> float:
        """When the run's IO must be over: the slot's end less the guard."""
        return self.end - self.guard

    @property
    def length(self) -> float:
        return self.end - self.start

    @property
    def usable(self) -> float:
        """The time a run has from the slot's start to its deadline."""
        return self.deadline - self.start

    def describe(self) -> str:
        """The slot for a log line: which of how many, where in the interval."""
        first = self.start - self.interval_start
        return (
            f"slot {self.index + 1} of {self.members}, {first:.0f}-{first + self.length:.0f}s "
            f"of every {self.every:g}s"
        )


def boundary(every: float, interval: int, index: int, members: int) -> float:
    """Where slot `index` of `interval` starts; with index == members, where the last one
    ends: the next interval's start, computed as such so that the last slot of one interval
    ends exactly where the first of the next begins."""
    if index >= members:
        return (interval + 1) * every
    return interval * every + index * every / members


def members_of(names: Iterable[str]) -> tuple[str, ...]:
    """The members in slot order: sorted by name, each once."""
    return tuple(sorted(set(names)))


def slot_of(
    every: float, interval: int, members: Sequence[str], node: str, guard: float = GUARD_SECONDS
) -> Slot | None:
    """The slot of `node` in `interval`, None when it is not one of `members`."""
    _check(every, guard)
    ordered = members_of(members)
    if node not in ordered:
        return None
    index, count = ordered.index(node), len(ordered)
    return Slot(
        every,
        interval,
        index,
        count,
        boundary(every, interval, index, count),
        boundary(every, interval, index + 1, count),
        guard,
    )


def next_slot(
    now: float, every: float, members: Sequence[str], node: str, guard: float = GUARD_SECONDS
) -> Slot | None:
    """The first slot of `node` that starts at `now` or later; None when it is no member.

    A slot that has started already is not joined late: its start was missed (a restart, a
    member set that changed), and the member waits for the same slot one interval later."""
    _check(every, guard)
    interval = math.floor(now / every)
    slot = slot_of(every, interval, members, node, guard)
    if slot is not None and slot.start < now:
        slot = slot_of(every, interval + 1, members, node, guard)
    return slot


def all_slots(
    every: float, interval: int, members: Sequence[str], guard: float = GUARD_SECONDS
) -> dict[str, Slot]:
    """Every member's slot in `interval`, by name."""
    slots = {name: slot_of(every, interval, members, name, guard) for name in members_of(members)}
    return {name: slot for name, slot in slots.items() if slot is not None}


def slot_seconds(every: float, members: int, guard: float = GUARD_SECONDS) -> float:
    """The time one run has in a slot of `members` slots: T/N less the guard."""
    return every / members - guard


def shortest_interval(needed: float, members: int, guard: float = GUARD_SECONDS) -> float:
    """The shortest interval in which a run of `needed` seconds fits every slot of
    `members`, in whole seconds."""
    return float(math.ceil(members * (needed + guard)))


def fit_problem(
    needed: float, every: float, members: int, what: str, guard: float = GUARD_SECONDS
) -> str | None:
    """Why a run of `needed` seconds (`what`: which profiles) does not fit a slot of
    `members` slots in `every`, or None when it fits."""
    have = slot_seconds(every, members, guard)
    if needed <= have:
        return None
    return (
        f"{what} needs {needed:g}s, but {members} members share every {every:g}s: a slot is "
        f"{every / members:.1f}s, {max(have, 0.0):.1f}s after the {guard:g}s guard; give "
        f"--every {shortest_interval(needed, members, guard):.0f} or more, or fewer profiles"
    )


def _check(every: float, guard: float) -> None:
    if not math.isfinite(every) or every <= 0:
        raise ValueError("the interval must be a positive number of seconds")
    if not math.isfinite(guard) or guard < 0:
        raise ValueError("the guard must be a non-negative number of seconds")
