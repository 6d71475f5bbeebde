"""The etcd members the staggered schedule gives turns to: a fixed list, or the nodes with a
role label read from the Kubernetes API, the last list read kept on the node.

An API made slow by etcd's own slow disk is exactly when the probe matters: a read that
fails or takes too long (`RECHECK_SECONDS`) is stood in for by the last list read, kept in a
small file of the node's (`members_file`), so the probes go on (`schedule.run_staggered`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeGuard

from fioprobe.kube.client import KubeClient
from fioprobe.kube.errors import KubeError
from fioprobe.kube.nodes import nodes_with_any_label
from fioprobe.probe import stagger
from fioprobe.publish.statefile import (
    StateError,
    StateFile,
    default_state_dir,
    state_directory,
)
from fioprobe.target.config import Config


@dataclass(frozen=True, slots=True)
class Membership:
    """The members as read before a run: their names (None: no list at all), and a line to
    say when reading them went wrong (the API's error, and what stood in for its answer)."""

    names: tuple[str, ...] | None
    note: str | None = None


class Members(Protocol):
    """Where the members come from; read again before every run."""

    @property
    def fixed(self) -> bool:
        """Whether the list is fixed for the process: a slot too short is then refused
        at the start, as a usage error, instead of in every interval."""

    def read(self, *, quick: bool = False) -> Membership:
        """The members now. `quick`: the read right before a run, within RECHECK_SECONDS
        (what cannot be read by then is what could not be read at all)."""
        ...


@dataclass(frozen=True, slots=True)
class ListedMembers:
    """`--member NODE ...`: the deployment's own list (its etcd.nodes); no API at all."""

    names: tuple[str, ...]

    @property
    def fixed(self) -> bool:
        return True

    def read(self, *, quick: bool = False) -> Membership:
        return Membership(stagger.members_of(self.names))


#: The members file's name in its state directory (the groups' files start "storageclass-",
#: the credit files "credits-", the stuck markers "stuck-": no name can be taken twice).
MEMBERS_FILE = "etcd-members.json"
#: Bumped when the file's layout changes; a file of another version is not used.
MEMBERS_VERSION = 1
#: More members than this in a file is not a list fioprobe wrote (etcd has at most a few).
_MAX_MEMBERS = 10_000


@dataclass(frozen=True, slots=True)
class KnownMembers:
    """The last member list read from the API, and for which label keys, and when."""

    labels: tuple[str, ...]
    names: tuple[str, ...]
    read_at: float

    def to_json(self) -> dict[str, object]:
        return {
            "version": MEMBERS_VERSION,
            "labels": list(self.labels),
            "members": list(self.names),
            "read_at": self.read_at,
        }

    @classmethod
    def from_json(cls, data: object, where: str) -> KnownMembers:
        """The file's content, every field checked; anything else is a StateError."""
        if not isinstance(data, dict) or data.get("version") != MEMBERS_VERSION:
            raise StateError(f"{where}: not a members list of this fioprobe (no version 1)")
        labels, names, read_at = data.get("labels"), data.get("members"), data.get("read_at")
        if not _names(labels, 64) or not _names(names, _MAX_MEMBERS):
            raise StateError(f"{where}: members list is corrupt (labels or members)")
        if isinstance(read_at, bool) or not isinstance(read_at, int | float):
            raise StateError(f"{where}: members list is corrupt (read_at is not a time)")
        if not math.isfinite(read_at):
            raise StateError(f"{where}: members list is corrupt (read_at is not a time)")
        return cls(tuple(labels), tuple(names), float(read_at))


def _names(value: object, most: int) -> TypeGuard[list[str]]:
    return (
        isinstance(value, list)
        and len(value) <= most
        and all(isinstance(v, str) and 0 < len(v) <= 253 and v.isprintable() for v in value)
    )


def members_file(config: Config) -> StateFile:
    """Where the last member list read from the API is kept: beside the state of the first
    node-local target, in its state directory of the probe's own (the manifests'
    stateHostPath/<target>, on the node, owned by the probe user). Such a directory is
    already trusted, and checked on every open, by the code that keeps the counters
    (`publish.statefile`); it outlives the pod. A target whose state lives on its probed
    volume is passed over (that volume may be the one that hangs); with none, the per-user
    state directory."""
    for target in config.targets:
        if not target.node_local:
            continue
        directory = state_directory(
            target.directory, dedicated=target.volume.dedicated, state_dir=target.state_dir
        )
        if directory.own:
            return directory.file(MEMBERS_FILE)
    return default_state_dir().file(MEMBERS_FILE)


class LabelledMembers:
    """`--members-label KEY ...`: the nodes that carry any of the keys, from the API.

    Every successful read is the truth and is kept (`members_file`) when it differs from the
    list kept; when the API cannot be read, the last list read stands in, from memory or,
    after a restart, from that file. With neither, there are no members: nothing runs.
    The file is written only when the list changes: it lives on the node's disk, often
    etcd's own, and an fsync every interval would be IO the schedule exists to avoid.
    """

    @property
    def fixed(self) -> bool:
        return False

    def __init__(self, client: KubeClient, labels: Sequence[str], file: StateFile) -> None:
        self.client = client
        self.labels = tuple(sorted(set(labels)))
        self.file = file
        self._known: KnownMembers | None = None
        self._kept: KnownMembers | None = None  # what the file holds, as far as this knows

    def read(self, *, quick: bool = False) -> Membership:
        client = self.client
        if quick:  # each list its share of the time before the run
            client = replace(client, timeout_seconds=RECHECK_SECONDS / len(self.labels))
        try:
            names = tuple(nodes_with_any_label(client, self.labels))
        except KubeError as exc:
            return self._stand_in(str(exc))
        self._known = KnownMembers(self.labels, names, time.time())
        return Membership(names, self._keep(self._known))

    def _keep(self, known: KnownMembers) -> str | None:
        if self._kept is not None and self._kept.names == known.names:
            return None
        try:
            self.file.write(known.to_json())
        except StateError as exc:
            return (
                f"the member list could not be kept ({exc}): a restarted pod cannot run while "
                "the Kubernetes API is down"
            )
        self._kept = known
        return None

    def _stand_in(self, error: str) -> Membership:
        known, problem = self._known, ""
        if known is None:
            known, problem = self._load()
        if known is None:
            return Membership(
                None,
                f"cannot read the members from the Kubernetes API ({error}), and no member "
                f"list was read before{problem}: not running",
            )
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(known.read_at))
        return Membership(
            known.names,
            f"cannot read the members from the Kubernetes API ({error}); using the list "
            f"read at {when}: {', '.join(known.names) or 'none'}",
        )

    def _load(self) -> tuple[KnownMembers | None, str]:
        """The list kept in the file, or None and why not (for the message)."""
        try:
            data = self.file.read()
        except StateError as exc:
            return None, f" (the kept list cannot be used: {exc})"
        if data is None:
            return None, f" (none kept in {self.file.path})"
        try:
            known = KnownMembers.from_json(data, str(self.file.path))
        except StateError as exc:
            return None, f" (the kept list cannot be used: {exc})"
        if known.labels != self.labels:
            return None, (
                f" (the list kept in {self.file.path} is of the labels "
                f"{', '.join(known.labels)}, not {', '.join(self.labels)})"
            )
        self._known = self._kept = known
        return known, ""


#: The read of the members right before a run starts: at most this long, so that an API made
#: slow by etcd's own slow disk takes at most this much of the run's slot. An API that lists
#: a few nodes by label takes milliseconds; beyond this, the list read before the interval
#: (the plan's) stands in, as it does when the API cannot be read at all.
RECHECK_SECONDS = 2.0


def labelled_members(config: Config, labels: Sequence[str]) -> LabelledMembers:
    """The members of `--members-label` in a pod: the pod's API server and service account."""
    return LabelledMembers(KubeClient.from_pod(), labels, members_file(config))
