"""The provisioning fixtures of tests/data/provision, loaded (see its README)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fioprobe.provision.cross_check import Clock
from fioprobe.provision.events import Event, read_event
from fioprobe.provision.objects import StorageClassInfo, read_storage_class
from fioprobe.provision.observations import Observation, read_watch_event
from fioprobe.provision.steps import RunObjects
from fioprobe.provision.timestamps import parse_time

from support.paths import TEST_DATA

DATA = TEST_DATA / "provision"
SCENARIOS = (
    "ebs-gp3-wait-for-first-consumer",
    "ceph-rbd-immediate",
    "local-path-wait-for-first-consumer",
)


@dataclass(frozen=True)
class Scenario:
    name: str
    storage_class: StorageClassInfo
    objects: RunObjects
    clock: Clock
    provisioning: tuple[Observation, ...]
    deletion: tuple[Observation, ...]
    events: tuple[Event, ...]
    raw: dict[str, Any]

    @property
    def start(self) -> float:
        return self.clock.monotonic


def observations(raw: list[dict[str, Any]]) -> tuple[Observation, ...]:
    found = []
    for event in raw:
        observation = read_watch_event(event["at"], event)
        assert observation is not None
        found.append(observation)
    return tuple(found)


def scenario(name: str) -> Scenario:
    raw = json.loads((DATA / f"{name}.json").read_text())
    wall = parse_time(raw["clock"]["wall"], "clock.wall")
    assert wall is not None
    return Scenario(
        name=name,
        storage_class=read_storage_class(raw["storageClass"]),
        objects=RunObjects(**raw["objects"]),
        clock=Clock(raw["clock"]["monotonic"], wall.posix),
        provisioning=observations(raw["provisioning"]),
        deletion=observations(raw["deletion"]),
        events=tuple(read_event(event) for event in raw["events"]),
        raw=raw,
    )


def catalog(name: str) -> dict[str, Any]:
    """events.json or api-errors.json: what each entry shows -> the entry."""
    loaded: dict[str, Any] = json.loads((DATA / name).read_text())
    return loaded


def attachments_of_the_deletion(case: Scenario) -> list[dict[str, Any]]:
    """A deletion's VolumeAttachment deliveries (the EBS run's: asked to go, then gone)."""
    return [e for e in case.raw["deletion"] if e["object"]["kind"] == "VolumeAttachment"]
