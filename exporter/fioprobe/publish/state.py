"""What one writer keeps about its probe groups between runs, on disk.

A Pushgateway keeps only the last push, so every push carries totals over all runs of its
group (docs/DESIGN.md, "Why cumulative"); the totals themselves, and how a run adds to them, are
`fioprobe.metrics.totals`. This module keeps them: they are saved *before* the push, so a push
that fails leaves them on disk and the next successful push carries them. No run is lost.
Who may push a group's totals, and when the Pushgateway is read again, is `publish`'s part.
The modelled gp2 credit balance of a volume is kept here too, beside the groups' files.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass, field

from fioprobe.metrics.totals import (
    COUNT_LIMIT,
    COUNT_LIMIT_SHOWN,
    PROBE_SCHEMA,
    GroupSchema,
    GroupTotals,
    optional_float,
)
from fioprobe.publish.statefile import StateError, StateFile

#: Bumped whenever the file layout changes; a newer file is refused, never overwritten.
#: Version 1 held the totals alone; version 2 adds the writer identity and pending runs.
STATE_VERSION = 2

#: What to do when a group's totals reach the limit.
_RESET_HINT = (
    "to start its counters again from 0, delete the group from the Pushgateway and remove "
    "this state file"
)


def totals_from_json(data: object, where: str, schema: GroupSchema = PROBE_SCHEMA) -> GroupTotals:
    """Totals of a group of `schema` from a state file, every number checked: a bad one, or
    one at or above COUNT_LIMIT, is a StateError (`where` names the file)."""
    try:
        totals = GroupTotals.from_json(data, schema)
    except ValueError as exc:
        raise StateError(f"{where}: state is corrupt ({exc})") from None
    problem = totals.beyond_limit()
    if problem is not None:
        raise StateError(
            f"{where}: {problem}, at or above {COUNT_LIMIT_SHOWN}, the limit of exact "
            f"counting; refusing to push it ({_RESET_HINT})"
        )
    return totals


@dataclass(slots=True)
class GroupState:
    """What one writer keeps about one group between runs.

    `writer` is this state's random identity, pushed as fioprobe_writer_info{writer}: a
    group's counters have one owner (a state that has outlived a run), so that two
    writers (a hand-run probe beside the
    CronJob, a pod rescheduled with a fresh volume while the old one still pushes) can never
    make them go backwards or count a run twice. `totals` are what this writer pushes as the
    owner (None until it owns the group); `pending` holds runs counted in no pushed totals
    yet: kept while the Pushgateway could not be read, or while another writer owns the
    group; they are added when this writer takes the group over. `last_push_at` is this
    writer's clock at its last successful push, which decides when to look at the group again.
    """

    writer: str = field(default_factory=lambda: secrets.token_hex(8))
    totals: GroupTotals | None = None
    pending: GroupTotals = field(default_factory=GroupTotals)
    last_push_at: float | None = None
    #: Whether this state's pushes carry its writer identity (it outlived a run).
    claimed: bool = False
    #: The Pushgateway replica that holds this group's last push (None: unknown, e.g. a state
    #: from before sharding). When the replicas change, the group moves from there.
    shard: str | None = None
    #: The fioprobe_push_id of this writer's last successful push (None: none yet).
    push_id: int | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "version": STATE_VERSION,
            "writer": self.writer,
            "totals": None if self.totals is None else self.totals.to_json(),
            "pending": self.pending.to_json(),
            "last_push_at": self.last_push_at,
            "claimed": self.claimed,
            "shard": self.shard,
            "push_id": self.push_id,
        }

    @classmethod
    def from_json(cls, data: object, where: str, schema: GroupSchema = PROBE_SCHEMA) -> GroupState:
        if not isinstance(data, dict):
            raise StateError(f"{where}: state is corrupt (not a JSON object)")
        version = data.get("version")
        if type(version) is not int:
            raise StateError(f"{where}: state is corrupt (no version)")
        if version > STATE_VERSION:
            raise StateError(
                f"{where}: written by a newer fioprobe (state version {version}, this one "
                f"reads {STATE_VERSION}); refusing to use or overwrite it"
            )
        if version == 1:  # the totals alone; runs never combined with the gateway's: pending
            totals = totals_from_json(data, where, schema)
            if data.get("needs_readback") is True:
                return cls(pending=totals)
            return cls(totals=totals)
        writer = data.get("writer")
        if not isinstance(writer, str) or not 1 <= len(writer) <= 64 or not writer.isalnum():
            raise StateError(f"{where}: state is corrupt (writer is not an identifier)")
        try:
            last_push_at = optional_float(data, "last_push_at")
        except ValueError as exc:
            raise StateError(f"{where}: state is corrupt ({exc})") from None
        raw_totals = data.get("totals")
        return cls(
            writer=writer,
            totals=None if raw_totals is None else totals_from_json(raw_totals, where, schema),
            pending=totals_from_json(data.get("pending", {}), where, schema),
            last_push_at=last_push_at,
            claimed=data.get("claimed") is True,
            shard=_optional_shard(data, where),
            push_id=_optional_push_id(data, where),
        )


def _optional_push_id(data: dict[str, object], where: str) -> int | None:
    push_id = data.get("push_id")
    if push_id is None:
        return None
    if type(push_id) is not int or not 0 < push_id < COUNT_LIMIT:
        raise StateError(f"{where}: state is corrupt (push_id is not a push identity)")
    return push_id


def _optional_shard(data: dict[str, object], where: str) -> str | None:
    shard = data.get("shard")
    if shard is None:
        return None
    if not isinstance(shard, str) or not 1 <= len(shard) <= 2048 or not shard.isprintable():
        raise StateError(f"{where}: state is corrupt (shard is not a URL)")
    return shard


def load(file: StateFile, schema: GroupSchema = PROBE_SCHEMA) -> GroupState | None:
    """The saved state of a group of `schema`, or None when there is none yet."""
    data = file.read()
    return None if data is None else GroupState.from_json(data, str(file.path), schema)


def save(file: StateFile, group: GroupState) -> None:
    """Write the state; totals that reached COUNT_LIMIT are refused instead (StateError):
    pushed, they would no longer be exact, and every later run would refuse the file."""
    for what, totals in (("totals", group.totals), ("pending runs", group.pending)):
        problem = None if totals is None else totals.beyond_limit()
        if problem is not None:
            raise StateError(
                f"{file.path}: this run would take the group's {what} to or beyond "
                f"{COUNT_LIMIT_SHOWN}, the limit of exact counting ({problem}); it was not "
                f"counted ({_RESET_HINT})"
            )
    file.write(group.to_json())


# --- the modelled gp2 credit balance --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VolumeCredits:
    """Modelled gp2 I/O credits of one dedicated volume, shared by all its probe groups.

    Every profile run on the volume spends from one bucket, so the balance is kept per
    volume (one file beside the groups' state files), never per group.
    """

    balance: float
    at: float


def load_credits(file: StateFile) -> VolumeCredits | None:
    data = file.read()
    if data is None:
        return None
    if not isinstance(data, dict) or data.get("version") not in (1, STATE_VERSION):
        raise StateError(f"{file.path}: credit state has an unknown layout or version")
    try:
        credits = VolumeCredits(float(data["balance"]), float(data["at"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise StateError(f"{file.path}: credit state is corrupt ({exc})") from None
    if not (math.isfinite(credits.balance) and math.isfinite(credits.at)) or credits.balance < 0:
        raise StateError(f"{file.path}: credit state is corrupt (not a finite balance)")
    return credits


def save_credits(file: StateFile, credits: VolumeCredits) -> None:
    file.write({"version": STATE_VERSION, "balance": credits.balance, "at": credits.at})
