"""One provisioning run against a cluster: create, follow each step to its deadline, delete,
follow the deletion; the steps' times and the run's verdict.

The order of a run:

1. Remove what an earlier run of the same probe and slot (class and node) left: claims and
   pods carrying both labels, and nothing else (`workload.OWNER_LABEL`, `SLOT_LABEL`).
2. Read the StorageClass: its binding mode orders the steps; a class that keeps its volumes
   (`Retain`) is skipped unless asked, since every run would leave a volume behind.
3. List, then watch, what the run will see (`follow.Follower`), before the first create.
4. Create the claim (and, WaitForFirstConsumer, the pod at once; Immediate, the pod once the
   claim is Bound), feed every delivery to the timeline (`steps.Timeline`) and every Warning
   event and failed state to the reasons (`reasons`), until the writer has exited 0, a step
   passes its deadline, the writer fails, or the API refuses a request.
5. Delete the pod and the claim (by uid: never a namesake), and follow the deletion the same
   way, each step with its own deadline.

Nothing here sleeps on a fixed schedule: the run waits on its queue of deliveries, at most
until the step in progress passes its deadline. Between waits it asks `stopping`: once a signal
stopped the command, the run creates nothing more, asks for the deletion without following it
(a stopped pod has seconds), and, stopped before its provisioning ended, says it was
interrupted (a run stopped while deleting keeps its verdict, and reports what was left).
"""

from __future__ import annotations

import dataclasses
import queue
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fioprobe.kube.client import KubeClient
from fioprobe.kube.errors import KubeError, KubeNotFound
from fioprobe.kube.watch import Delivery
from fioprobe.provision.attach import AttachmentState
from fioprobe.provision.cross_check import Clock, Stamp, cross_check, stamps_of
from fioprobe.provision.events import Event, read_event
from fioprobe.provision.follow import Follower, Source, Trouble
from fioprobe.provision.objects import (
    NO_PROVISIONER,
    Mode,
    PodState,
    StorageClassInfo,
    VolumeState,
    read_storage_class,
)
from fioprobe.provision.observations import Observation, WatchFailed, read_watch_event
from fioprobe.provision.reasons import (
    Failure,
    Reason,
    Signal,
    api_error_signal,
    attachment_signal,
    event_signal,
    explain,
    pod_signal,
    refused,
    volume_signal,
)
from fioprobe.provision.shape import ShapeError, message
from fioprobe.provision.steps import Step, StepTime, Timeline
from fioprobe.provision.workload import (
    OWNER_LABEL,
    RUN_LABEL,
    SLOT_LABEL,
    RunSpec,
    run_objects,
    sized,
    slot_of,
)
from fioprobe.provision.workload import claim as claim_manifest
from fioprobe.provision.workload import pod as pod_manifest

#: How long each step may take before the run fails in it. A provisioner that calls a cloud
#: API and an EBS attach take seconds to a minute when all is well; 5 minutes is broken.
#: `detached` waits past the attach/detach controller's maxWaitForUnmountDuration (6 min),
#: after which it detaches regardless.
DEADLINES: dict[Step, float] = {
    Step.CREATED: 30.0,
    Step.SCHEDULED: 120.0,
    Step.BOUND: 300.0,
    Step.ATTACHED: 300.0,
    Step.RUNNING: 300.0,
    Step.WRITTEN: 120.0,
    Step.POD_DELETED: 120.0,
    Step.DETACHED: 420.0,
    Step.VOLUME_DELETED: 300.0,
}
#: The longest wait on the queue between two deadline checks.
_POLL_SECONDS = 1.0


@dataclass(frozen=True)
class RunResult:
    """What one run measured and concluded."""

    spec: RunSpec
    run_id: str
    #: The class's binding mode; None when the run never got to read it.
    mode: Mode | None
    #: Every step finished, provisioning then deletion, in order.
    steps: tuple[StepTime, ...]
    #: The steps this run does not have (no VolumeAttachment: no attach, no detach).
    absent: tuple[Step, ...]
    #: Why the run failed; None when it succeeded (or was skipped).
    failure: Failure | None
    #: Why the run did not run at all ("retain_policy", "no_provisioner"), or None.
    skipped: str | None
    #: For the log: warnings with their messages, watch troubles, clock disagreements.
    log: tuple[str, ...]
    #: Objects the run could not see gone before its deadlines (the next run removes them).
    left: tuple[str, ...]
    #: Objects of earlier runs of this slot that this run removed first.
    removed: tuple[str, ...]
    #: The StorageClass as the run read it; None when it could not be read (not found,
    #: refused, not shaped as one).
    storage_class: StorageClassInfo | None = None
    #: time.monotonic() where the first step began (after the leftovers were removed, the
    #: class read and the watches started), None when no step began: the run's own wall time
    #: counts from here, and its steps add up to it.
    started: float | None = None
    #: Stopped by a signal (SIGTERM: the Job's deadline, a deleted pod) before it ended: its
    #: objects were deleted without waiting; it measured nothing whole and is not pushed.
    interrupted: bool = False

    @property
    def success(self) -> bool:
        return self.failure is None and self.skipped is None

    def seconds(self, step: Step) -> float | None:
        return next((t.seconds for t in self.steps if t.step is step), None)


class ProvisionRun:
    """One run of `spec`: `execute()` does all five parts and returns the RunResult."""

    def __init__(
        self,
        client: KubeClient,
        spec: RunSpec,
        *,
        deadlines: Mapping[Step, float] = DEADLINES,
        delete_retained: bool = False,
        run_id: str | None = None,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.client = client
        #: Asked before each wait: once true, the run deletes what it made and ends.
        self.stopping = stopping
        #: A signal cut the run: while provisioning (interrupted, not pushed) or deleting.
        self._cut = False
        self._interrupted = False
        self.spec = spec
        self.deadlines = {**DEADLINES, **deadlines}
        self.delete_retained = delete_retained
        self.run_id = run_id or uuid.uuid4().hex[:10]
        self.objects = run_objects(spec, self.run_id)
        self._log: list[str] = []
        self._signals: list[Signal] = []
        self._stamps: list[Stamp] = []
        #: The uid of each object the run made, by kind ("claim", "pod") and name.
        self._uids: dict[tuple[str, str], str] = {}
        self._last_at = 0.0
        self._mode: Mode | None = None
        self._class: StorageClassInfo | None = None
        self._pod_created = False
        #: Asked for once (a refused create is not asked again).
        self._pod_asked = False
        self._started: float | None = None
        self._namespace_path = f"/api/v1/namespaces/{spec.namespace}"

    # --- the run ----------------------------------------------------------------------------

    def execute(self) -> RunResult:
        if self.stopping():
            self._interrupted = True
            return self._result((), (), None, None, (), ())
        removed = self._remove_leftovers()
        try:
            info = self._storage_class()
        except _Ended as ended:
            return self._result((), (), ended.failure, None, removed, ())
        self._mode, self._class = info.mode, info
        if info.provisioner == NO_PROVISIONER:
            self._say(
                f"StorageClass {info.name} has no dynamic provisioner ({NO_PROVISIONER}): a "
                "claim would take a volume made by hand; not run (no_provisioner)"
            )
            return self._result((), (), None, "no_provisioner", removed, ())
        if not info.deletes_volumes and not self.delete_retained:
            self._say(f"StorageClass {info.name} retains its volumes: not run (retain_policy)")
            return self._result((), (), None, "retain_policy", removed, ())
        if self.spec.size is None:
            self.spec = sized(self.spec, info)
            self._say(f"claim of {self.spec.size}: no size given, the smallest volume of type "
                      f"{info.volume_type}")  # fmt: skip
        follower = Follower(self.client, self._sources())
        try:
            follower.start()
        except KubeError as exc:
            signal = api_error_signal(exc.status, exc.answer)
            return self._result((), (), refused(None, signal), None, removed, ())
        if self.stopping():  # stopped before anything was made: nothing to make or delete
            follower.stop()
            self._interrupted = True
            return self._result((), (), None, None, removed, ())
        try:
            clock = Clock(time.monotonic(), time.time())
            self._started = clock.monotonic
            timeline = Timeline.provisioning(info.mode, clock.monotonic, self.objects)
            self._last_at = clock.monotonic
            failure = self._provision(follower, timeline)
            # The deletion starts where the last step ended when the run succeeded (the two
            # add up to the wall time), at the failure when it failed (the wait for the
            # deadline is no part of any deletion step).
            end = timeline.start + timeline.wall if failure is None else time.monotonic()
            self._last_at = max(self._last_at, end)
            deletion = timeline.deletion(self._last_at, self._pod_created)
            deletion_failure = self._delete(follower, deletion)
        finally:
            follower.stop()
        steps = (*timeline.finished, *deletion.finished)
        for disagreement in cross_check(steps, self._stamps, clock):
            self._say(disagreement.what)
        for note in (*timeline.notes, *deletion.notes):
            self._say(f"{note.step or 'run'}: {note.what}")
        left = () if deletion.done and deletion_failure is None else self._still_there()
        absent = (*timeline.absent, *deletion.absent)
        if self._cut:
            self._say("stopped by a signal: the run's claim and pod deleted, not waited for")
        return self._result(steps, absent, failure or deletion_failure, None, removed, left)

    def _provision(self, follower: Follower, timeline: Timeline) -> Failure | None:
        try:
            self._create("claim", claim_manifest(self.spec, self.run_id), Step.CREATED)
            if timeline.order[1] is Step.SCHEDULED:  # WaitForFirstConsumer: the pod at once
                self._create_pod()
        except _Ended as ended:
            return ended.failure
        return self._follow(follower, timeline, provisioning=True)

    def _delete(self, follower: Follower, timeline: Timeline) -> Failure | None:
        failure = None
        for kind, name, path in (
            ("pod", self.objects.pod, f"{self._namespace_path}/pods/{self.objects.pod}"),
            ("claim", self.objects.claim,
             f"{self._namespace_path}/persistentvolumeclaims/{self.objects.claim}"),
        ):  # fmt: skip
            uid = self._uids.get((kind, name))
            if uid is None:
                continue
            try:
                self.client.delete(path, what=f"deleting the run's {kind} {name}",
                                   uid=uid, grace_seconds=1)  # fmt: skip
            except KubeNotFound:
                pass
            except KubeError as exc:
                self._say(str(exc))
                failure = failure or refused(
                    timeline.current, api_error_signal(exc.status, exc.answer)
                )
        # What was deleted is followed even when a delete was refused: its steps are timed.
        followed = self._follow(follower, timeline, provisioning=False)
        return failure or followed

    def _follow(
        self, follower: Follower, timeline: Timeline, *, provisioning: bool
    ) -> Failure | None:
        """Feed deliveries to `timeline` until it is done or a failure ends it."""
        for _ in range(10_000_000):  # bounded; each pass waits up to _POLL_SECONDS or a delivery
            if timeline.done:
                return None
            if self._cut or self.stopping():
                # Stopped: the deletion is asked for, not followed (a stopped pod has seconds
                # left). Stopped while provisioning, the run measured nothing whole and is
                # interrupted; stopped while deleting, its provisioning stands, and what the
                # deletion did not finish is reported as left.
                self._cut = True
                self._interrupted = self._interrupted or provisioning
                return None
            step = timeline.current
            waited = timeline.elapsed(time.monotonic())
            limit = self.deadlines[step] if step is not None else 0.0
            if waited > limit:
                late = explain(step, self._signals, waited)
                self._say(f"failed in {step}: {late.reason}: {late.message}")
                return late
            try:
                item = follower.deliveries.get(timeout=min(_POLL_SECONDS, limit - waited + 0.01))
            except queue.Empty:
                continue
            try:
                failure = self._take(item, timeline)
                if provisioning and not self._pod_asked and Step.BOUND in timeline.durations():
                    self._create_pod()  # Immediate: the pod once the claim is bound
            except _Ended as ended:
                return ended.failure
            if failure is not None:
                return failure
        return None

    # --- one delivery -------------------------------------------------------------------------

    def _take(self, item: Delivery | Trouble, timeline: Timeline) -> Failure | None:
        if isinstance(item, Trouble):
            self._say(f"watch of {item.source.kind}s: {item.message} (retrying)")
            return None
        at = max(item.at, self._last_at)
        self._last_at = at
        kind = item.event["object"].get("kind")
        try:
            if kind == "Event":
                self._event(read_event(item.event["object"]))
                return None
            observation = read_watch_event(at, item.event)
        except WatchFailed as exc:
            self._say(str(exc))
            return None
        except ShapeError as exc:
            self._say(f"a {message(str(kind), 40)} the run cannot read: {exc}")
            return None
        if observation is None:
            return None
        return self._observe(observation, timeline)

    def _observe(self, observation: Observation, timeline: Timeline) -> Failure | None:
        state = observation.state
        timeline.observe(dataclasses.replace(observation, at=self._last_at))
        if self._mode is not None:
            self._stamps.extend(stamps_of(self._mode, state))
        signal: Signal | None = None
        if isinstance(state, PodState) and state.meta.name == self.objects.pod:
            signal = pod_signal(state)
            if signal is not None and signal.reason is Reason.WRITE_FAILED:
                self._say(f"the writer failed: {signal.message}")
                return Failure(signal.reason, timeline.current, signal.source, signal.message)
        elif isinstance(state, AttachmentState) and state.volume_name == timeline.volume_name:
            signal = attachment_signal(state)
        elif isinstance(state, VolumeState) and state.meta.name == timeline.volume_name:
            signal = volume_signal(state)
        if signal is not None:
            self._signals.append(signal)
        return None

    def _event(self, event: Event) -> None:
        if event.involved.name not in (self.objects.claim, self.objects.pod):
            return
        kind = "claim" if event.involved.kind == "PersistentVolumeClaim" else "pod"
        uid = self._uids.get((kind, event.involved.name))
        if uid is not None and event.involved.uid not in (None, uid):
            return
        if self._mode is not None:
            self._stamps.extend(stamps_of(self._mode, event))
        signal = event_signal(event)
        if signal is not None:
            self._signals.append(signal)
            self._say(f"{signal.source} on {event.involved.kind} {event.involved.name}: "
                      f"{signal.message}")  # fmt: skip

    # --- requests -----------------------------------------------------------------------------

    def _remove_leftovers(self) -> tuple[str, ...]:
        """Delete the claims and pods of earlier runs of this probe's slot; never fails the
        run (what cannot be removed now is tried again next time)."""
        selector = f"{OWNER_LABEL}={self.spec.owner},{SLOT_LABEL}={slot_of(self.spec)}"
        removed: list[str] = []
        for kind, resource in (("pod", "pods"), ("claim", "persistentvolumeclaims")):
            path = f"{self._namespace_path}/{resource}"
            try:
                found, _ = self.client.list_objects(
                    path, what=f"listing the {kind}s of earlier runs", label_selector=selector
                )
                for obj in found:
                    metadata = obj["metadata"]
                    name = metadata["name"]
                    self.client.delete(f"{path}/{name}", what=f"removing {kind} {name}",
                                       uid=metadata.get("uid"), grace_seconds=1)  # fmt: skip
                    removed.append(f"{kind} {name}")
                    self._say(f"removed {kind} {name}, left by run "
                              f"{metadata.get('labels', {}).get(RUN_LABEL, '?')}")  # fmt: skip
            except KubeNotFound:
                continue
            except KubeError as exc:
                self._say(f"cannot remove what earlier runs left: {exc}")
        return tuple(removed)

    def _storage_class(self) -> StorageClassInfo:
        name = self.spec.storage_class
        try:
            obj = self.client.get(f"/apis/storage.k8s.io/v1/storageclasses/{name}",
                                  what=f"reading StorageClass {name}")  # fmt: skip
            return read_storage_class(obj)
        except KubeNotFound:
            said = f'StorageClass "{name}" not found'
            self._say(said)
            raise _Ended(
                Failure(Reason.PROVISIONING_FAILED, None, "the StorageClass", said)
            ) from None
        except KubeError as exc:
            self._say(str(exc))
            raise _Ended(refused(None, api_error_signal(exc.status, exc.answer))) from None
        except ShapeError as exc:
            said = f"StorageClass {name} cannot be read: {exc}"
            self._say(said)
            raise _Ended(Failure(Reason.API_ERROR, None, "the StorageClass", said)) from None

    def _sources(self) -> list[Source]:
        run = f"{RUN_LABEL}={self.run_id}"
        return [
            Source(f"{self._namespace_path}/persistentvolumeclaims", "PersistentVolumeClaim",
                   run),
            Source(f"{self._namespace_path}/pods", "Pod", run),
            Source(f"{self._namespace_path}/events", "Event", None, existing=False),
            Source("/api/v1/persistentvolumes", "PersistentVolume", None, existing=False),
            Source("/apis/storage.k8s.io/v1/volumeattachments", "VolumeAttachment", None,
                   existing=False),
        ]  # fmt: skip

    def _create(self, kind: str, body: dict[str, Any], step: Step | None) -> None:
        path = f"{self._namespace_path}/{'pods' if kind == 'pod' else 'persistentvolumeclaims'}"
        name = body["metadata"]["name"]
        try:
            made = self.client.create(path, body, what=f"creating the run's {kind} {name}")
        except KubeError as exc:
            self._say(str(exc))
            raise _Ended(refused(step, api_error_signal(exc.status, exc.answer))) from None
        self._uids[(kind, name)] = str(made.get("metadata", {}).get("uid", ""))

    def _create_pod(self) -> None:
        self._pod_asked = True
        self._create("pod", pod_manifest(self.spec, self.run_id), Step.SCHEDULED)
        self._pod_created = True

    def _still_there(self) -> tuple[str, ...]:
        left: list[str] = []
        for kind, name, resource in (
            ("pod", self.objects.pod, "pods"),
            ("claim", self.objects.claim, "persistentvolumeclaims"),
        ):
            if (kind, name) not in self._uids:
                continue
            try:
                self.client.get(f"{self._namespace_path}/{resource}/{name}",
                                what=f"reading the run's {kind} {name}")  # fmt: skip
            except KubeNotFound:
                continue
            except KubeError as exc:
                self._say(str(exc))
            left.append(f"{kind} {name}")
        return tuple(left)

    def _say(self, line: str) -> None:
        self._log.append(message(line, 600))

    def _result(
        self,
        steps: tuple[StepTime, ...],
        absent: tuple[Step, ...],
        failure: Failure | None,
        skipped: str | None,
        removed: tuple[str, ...],
        left: tuple[str, ...],
    ) -> RunResult:
        return RunResult(self.spec, self.run_id, self._mode, steps, absent, failure, skipped,
                         tuple(self._log), left, removed, self._class, self._started,
                         self._interrupted)  # fmt: skip


class _Ended(Exception):
    """A request's refusal that ends the run where it is."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


def run_once(client: KubeClient, spec: RunSpec, **options: Any) -> RunResult:
    """One whole run of `spec` (see `ProvisionRun` for the options)."""
    return ProvisionRun(client, spec, **options).execute()
