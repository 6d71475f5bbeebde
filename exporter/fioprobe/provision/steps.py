"""The steps of one provisioning run and of its deletion, timed by the probe's own watches.

A run creates a claim and a pod that mounts it, and follows them until the pod has written
and fdatasynced through the mount; then it deletes both and follows the deletion. Which
steps, in which order, depends on the StorageClass's volumeBindingMode:

- Immediate: created (the claim) -> bound -> scheduled (the pod, created once the claim is
  bound) -> attached -> running -> written;
- WaitForFirstConsumer: created (the claim, then the pod) -> scheduled (the node the
  scheduler chose, written on the claim) -> bound -> attached -> running -> written;
- deletion: pod_deleted -> detached -> volume_deleted.

Each step lasts from the end of the one before it (the first from the run's start) to the
watch delivery that shows it done, so a run's step durations add up to its wall time, no
gap and no overlap. Kubernetes guarantees an order the separate watches do not: a claim's
Bound may arrive after its pod is already running, because each resource has its own
stream. So a delivery shows its own step done *and every step before it* (a running
container proves a bound claim and an attached volume); a step shown done that way ends at
that delivery, marked not direct: it ended no later than that. Its own change, arriving
later, changes nothing and is noted.

attached and detached are there only when the volume has a VolumeAttachment (attach.py):
judged absent when a later step is shown done before any VolumeAttachment for the volume
was seen. Absent is not zero: an absent step has no duration at all. The deletion's steps
likewise only for what exists: no pod_deleted without a pod, no volume_deleted without a
volume (a run that failed before provisioning deletes only its claim).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from fioprobe.provision.attach import AttachmentState
from fioprobe.provision.objects import ClaimState, Meta, Mode, PodState, Run, VolumeState
from fioprobe.provision.observations import Observation


class Step(enum.StrEnum):
    """The steps, as the `step` label of the provisioning metrics: a closed set."""

    #: The API accepted the run's first objects and the watch delivered them.
    CREATED = "created"
    #: A node was chosen for the pod (Immediate: the pod bound to it; WaitForFirstConsumer:
    #: the node written on the claim, before provisioning).
    SCHEDULED = "scheduled"
    #: The claim is Bound to a volume (provisioned, or found).
    BOUND = "bound"
    #: The volume is attached to the node (VolumeAttachment status.attached).
    ATTACHED = "attached"
    #: The writer container has started: the volume is mounted into the pod.
    RUNNING = "running"
    #: The writer has written and fdatasynced through the mount and exited 0.
    WRITTEN = "written"
    #: The pod object is gone (the kubelet has stopped it and unmounted the volume).
    POD_DELETED = "pod_deleted"
    #: The volume's VolumeAttachment is gone (or reports it detached, being deleted).
    DETACHED = "detached"
    #: The PersistentVolume is gone (the provisioner deleted the volume).
    VOLUME_DELETED = "volume_deleted"


#: The provisioning steps in the order each binding mode takes them.
PROVISIONING: dict[Mode, tuple[Step, ...]] = {
    Mode.IMMEDIATE: (
        Step.CREATED, Step.BOUND, Step.SCHEDULED, Step.ATTACHED, Step.RUNNING, Step.WRITTEN,
    ),
    Mode.WAIT_FOR_FIRST_CONSUMER: (
        Step.CREATED, Step.SCHEDULED, Step.BOUND, Step.ATTACHED, Step.RUNNING, Step.WRITTEN,
    ),
}  # fmt: skip
#: The deletion's steps, in order.
DELETION: tuple[Step, ...] = (Step.POD_DELETED, Step.DETACHED, Step.VOLUME_DELETED)
#: Steps that only some runs have: they need the object they follow (see `Timeline`).
CONDITIONAL = frozenset({Step.ATTACHED, Step.DETACHED, Step.POD_DELETED, Step.VOLUME_DELETED})

#: The buckets of fioprobe_provision_step_duration_seconds: sub-second steps (a pod's
#: scheduling, a watch's delivery) to the attach of an EBS volume (5 to 60 s) and a
#: provisioning that waits on a cloud API, up to the 600 s beyond which a step has failed.
STEP_BUCKETS: tuple[float, ...] = (
    0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0,
    180.0, 300.0, 600.0,
)  # fmt: skip


class Fact(enum.Enum):
    """What one delivered state shows."""

    CLAIM_SEEN = enum.auto()
    NODE_SELECTED = enum.auto()
    CLAIM_BOUND = enum.auto()
    POD_SEEN = enum.auto()
    POD_SCHEDULED = enum.auto()
    ATTACHED = enum.auto()
    WRITER_STARTED = enum.auto()
    WRITTEN = enum.auto()
    POD_GONE = enum.auto()
    DETACHED = enum.auto()
    VOLUME_GONE = enum.auto()


#: Each step's own fact, per binding mode, and for the deletion.
OWN_FACT: dict[Mode | None, dict[Step, Fact]] = {
    Mode.IMMEDIATE: {
        Step.CREATED: Fact.CLAIM_SEEN,
        Step.BOUND: Fact.CLAIM_BOUND,
        Step.SCHEDULED: Fact.POD_SCHEDULED,
        Step.ATTACHED: Fact.ATTACHED,
        Step.RUNNING: Fact.WRITER_STARTED,
        Step.WRITTEN: Fact.WRITTEN,
    },
    Mode.WAIT_FOR_FIRST_CONSUMER: {
        Step.CREATED: Fact.POD_SEEN,
        Step.SCHEDULED: Fact.NODE_SELECTED,
        Step.BOUND: Fact.CLAIM_BOUND,
        Step.ATTACHED: Fact.ATTACHED,
        Step.RUNNING: Fact.WRITER_STARTED,
        Step.WRITTEN: Fact.WRITTEN,
    },
    None: {
        Step.POD_DELETED: Fact.POD_GONE,
        Step.DETACHED: Fact.DETACHED,
        Step.VOLUME_DELETED: Fact.VOLUME_GONE,
    },
}
#: Facts that show a step done without being its own: a WaitForFirstConsumer pod is bound
#: to its node only after its claim is bound (the scheduler's PreBind waits for it), and a
#: claim bound to a volume found, not provisioned, gets no node written on it at all.
SHOWN_BY: dict[Mode | None, dict[Fact, Step]] = {
    Mode.IMMEDIATE: {},
    Mode.WAIT_FOR_FIRST_CONSUMER: {Fact.POD_SCHEDULED: Step.BOUND},
    None: {},
}
#: The most VolumeAttachments of other volumes kept while the run's volume is not known yet
#: (the watch is cluster-wide; one of them may turn out to be the run's).
MAX_UNMATCHED_ATTACHMENTS = 4096


@dataclass(frozen=True)
class RunObjects:
    """The names the run gave its objects (the volume's name comes from the claim)."""

    namespace: str
    claim: str
    pod: str


@dataclass(frozen=True)
class StepTime:
    step: Step
    #: time.monotonic() values: the previous step's end (the run's start) and this one's.
    start: float
    end: float
    #: Its own change was delivered then; False when a later step's change showed it done.
    direct: bool

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class Note:
    """Something the order check saw that changes no step: a step's own delivery after a
    later step had shown it done, an object of an absent step appearing late, a state going
    back (a claim Lost, a volume detached under the running pod)."""

    at: float
    step: Step | None
    what: str


class Timeline:
    """The steps of one run (`provisioning`) or of one deletion (`deletion`), fed with the
    run's observations in the order the watches delivered them."""

    def __init__(
        self,
        order: Sequence[Step],
        mode: Mode | None,
        start: float,
        objects: RunObjects,
    ) -> None:
        self.order = tuple(order)
        self.objects = objects
        self.start = start
        self._own = OWN_FACT[mode]
        self._shown_by = SHOWN_BY[mode]
        self._provisioning = mode is not None
        self._index = 0
        self._end = start
        self._last_at = start
        self._finished: list[StepTime] = []
        self._absent: list[Step] = []
        self._notes: list[Note] = []
        #: Steps ended by a later step's delivery, waiting for their own.
        self._implied: dict[Step, float] = {}
        self.volume_name: str | None = None
        self._claim_uid: str | None = None
        self._attachments: dict[str, AttachmentState] = {}
        #: The run's VolumeAttachments already gone (they count for `detached`, once).
        self._attachments_gone: set[str] = set()
        self._pod_expected = False
        self._pod_gone = False

    @classmethod
    def provisioning(cls, mode: Mode, start: float, objects: RunObjects) -> Timeline:
        return cls(PROVISIONING[mode], mode, start, objects)

    def deletion(self, start: float, pod_created: bool) -> Timeline:
        """The deletion of what this run made, from `start` (when the first delete is sent;
        the end of the last step, for a run that succeeded, so that the two add up): a pod
        if one was created and is not gone, the volume and its VolumeAttachment if known."""
        if start < self._last_at:
            raise ValueError(f"the deletion starts at {start}, before {self._last_at}")
        after = Timeline(DELETION, None, start, self.objects)
        after.volume_name = self.volume_name
        after._claim_uid = self._claim_uid
        after._attachments = {
            name: va
            for name, va in self._attachments.items()
            if self._ours(va) and name not in self._attachments_gone
        }
        after._pod_expected = (pod_created or self._pod_expected) and not self._pod_gone
        return after

    # --- what the run has seen ----------------------------------------------------------

    @property
    def finished(self) -> tuple[StepTime, ...]:
        return tuple(self._finished)

    @property
    def notes(self) -> tuple[Note, ...]:
        return tuple(self._notes)

    @property
    def current(self) -> Step | None:
        """The step in progress: the first not finished that this run has (a conditional
        step whose object has not appeared is skipped, and comes back if it appears)."""
        for step in self.order[self._index :]:
            if self._applies(step):
                return step
        return None

    @property
    def done(self) -> bool:
        return self.current is None

    @property
    def absent(self) -> tuple[Step, ...]:
        """The steps this run does not have: judged so, and, once done, those left over."""
        left = [s for s in self.order[self._index :] if not self._applies(s)] if self.done else []
        return (*self._absent, *left)

    def elapsed(self, now: float) -> float:
        """How long the step in progress has lasted at `now` (for its deadline)."""
        return now - self._end

    @property
    def wall(self) -> float:
        """From the start to the end of the last finished step: the steps' durations' sum."""
        return self._end - self.start

    def durations(self) -> dict[Step, float]:
        return {t.step: t.seconds for t in self._finished}

    # --- feeding it -----------------------------------------------------------------------

    def observe(self, observation: Observation) -> tuple[StepTime, ...]:
        """Take one delivery; return the steps it finished, in order."""
        at = observation.at
        if at < self._last_at:
            raise ValueError(f"observation at {at} before the one at {self._last_at}")
        self._last_at = at
        facts = self._facts(observation)
        reached = -1
        for fact, direct in facts.items():
            step = self._own_step(fact) or self._shown_by.get(fact)
            if step is None or step not in self.order:
                continue
            position = self.order.index(step)
            if position < self._index and direct:
                self._late(step, fact, at)
            reached = max(reached, position)
        done: list[StepTime] = []
        while self._index <= reached:
            step = self.order[self._index]
            self._index += 1
            if not self._applies(step):
                self._absent.append(step)
                continue
            direct = facts.get(self._own[step], False)
            if not direct:
                self._implied[step] = at
            done.append(StepTime(step, self._end, at, direct))
            self._end = at
        self._finished.extend(done)
        return tuple(done)

    # --- inside -----------------------------------------------------------------------------

    def _own_step(self, fact: Fact) -> Step | None:
        return next((step for step, own in self._own.items() if own is fact), None)

    def _applies(self, step: Step) -> bool:
        """Whether the run has this step: always, but for the CONDITIONAL ones, which need
        the object they follow."""
        if step not in CONDITIONAL:
            return True
        if step in (Step.ATTACHED, Step.DETACHED):
            return any(self._ours(va) for va in self._attachments.values())
        if step is Step.POD_DELETED:
            return self._pod_expected
        return self.volume_name is not None  # VOLUME_DELETED

    def _ours(self, va: AttachmentState) -> bool:
        return self.volume_name is not None and va.volume_name == self.volume_name

    def _note(self, at: float, step: Step | None, what: str) -> None:
        self._notes.append(Note(at, step, what))

    def _late(self, step: Step, fact: Fact, at: float) -> None:
        if self._own.get(step) is not fact:
            return
        shown = self._implied.pop(step, None)
        if shown is not None:
            late = at - shown
            self._note(at, step, f"its own change arrived {late:.3f}s after a later step's")
        elif step in self._absent:
            self._note(at, step, "its object appeared after a later step; it stays absent")

    def _run_object(self, meta: Meta, name: str) -> bool:
        return (meta.namespace, meta.name) == (self.objects.namespace, name)

    def _facts(self, observation: Observation) -> dict[Fact, bool]:
        """The facts one delivery shows, each with whether it is its own (True) or only
        follows from it (False); notes what goes back."""
        state, at, gone = observation.state, observation.at, observation.gone
        if isinstance(state, ClaimState):
            return self._claim(state, gone, at)
        if isinstance(state, PodState):
            return self._pod(state, gone, at)
        if isinstance(state, VolumeState):
            return self._volume(state, gone, at)
        return self._attachment(state, gone, at)

    def _claim(self, claim: ClaimState, gone: bool, at: float) -> dict[Fact, bool]:
        if not self._run_object(claim.meta, self.objects.claim):
            return {}
        if gone:
            if self._provisioning:
                self._note(at, self.current, "the claim was deleted during the run")
            return {}
        self._claim_uid = claim.meta.uid or self._claim_uid
        facts = {Fact.CLAIM_SEEN: True}
        if claim.selected_node is not None:
            facts[Fact.NODE_SELECTED] = True
        if claim.volume_name is not None:
            facts.update(self._learn_volume(claim.volume_name))
        if claim.bound:
            facts[Fact.CLAIM_BOUND] = True
        if claim.phase == "Lost":
            self._note(at, self.current, "the claim is Lost: its volume is gone")
        return facts

    def _pod(self, pod: PodState, gone: bool, at: float) -> dict[Fact, bool]:
        if not self._run_object(pod.meta, self.objects.pod):
            return {}
        if gone:
            self._pod_gone = True
            if self._provisioning:
                self._note(at, self.current, "the pod was deleted during the run")
            return {Fact.POD_GONE: True}
        self._pod_expected = True
        facts = {Fact.POD_SEEN: True}
        if pod.scheduled or pod.node_name is not None:
            facts[Fact.POD_SCHEDULED] = True
        writer = pod.writer
        if writer is not None and writer.run is Run.RUNNING:
            facts[Fact.WRITER_STARTED] = True
        elif writer is not None and writer.run is Run.TERMINATED:
            # It ran, but the kubelet reported it only once it had finished (a write of a few
            # KiB takes milliseconds): the start is shown, not seen.
            facts[Fact.WRITER_STARTED] = False
            if writer.exit_code == 0:
                facts[Fact.WRITTEN] = True
        return facts

    def _volume(self, volume: VolumeState, gone: bool, at: float) -> dict[Fact, bool]:
        """The run's volume: the one its claim names, or, before the claim names one, the
        one whose claimRef is the claim (by uid too: a volume left by an earlier claim of the
        same name is not this run's)."""
        if self.volume_name is not None:
            mine = volume.meta.name == self.volume_name
        else:
            ref = volume.claim
            mine = (
                ref is not None
                and (ref.namespace, ref.name) == (self.objects.namespace, self.objects.claim)
                and (ref.uid is None or self._claim_uid in (None, ref.uid))
            )
        if not mine:
            return {}
        facts = self._learn_volume(volume.meta.name)
        if gone:
            facts[Fact.VOLUME_GONE] = True
            if self._provisioning:
                self._note(at, self.current, "the volume was deleted during the run")
        return facts

    def _learn_volume(self, name: str) -> dict[Fact, bool]:
        """Take the run's volume name; an attachment already seen for it shows ATTACHED now
        (not its own delivery: it came before the volume was known to be the run's)."""
        if self.volume_name is not None:
            return {}
        self.volume_name = name
        ours = [va for va in self._attachments.values() if self._ours(va)]
        self._attachments = {va.meta.name: va for va in ours}
        return {Fact.ATTACHED: False} if any(va.attached for va in ours) else {}

    def _attachment(self, va: AttachmentState, gone: bool, at: float) -> dict[Fact, bool]:
        if va.volume_name is None:
            return {}
        if self.volume_name is None:
            if gone:
                self._attachments.pop(va.meta.name, None)
            elif len(self._attachments) < MAX_UNMATCHED_ATTACHMENTS:
                self._attachments[va.meta.name] = va
            return {}
        if va.volume_name != self.volume_name:
            return {}
        before = self._attachments.get(va.meta.name)
        self._attachments[va.meta.name] = va
        if gone or va.detached:
            if gone:
                self._attachments_gone.add(va.meta.name)
            if self._provisioning and before is not None and before.attached:
                self._note(at, self.current, "the volume was detached during the run")
            return {Fact.DETACHED: True}
        if va.attached:
            return {Fact.ATTACHED: True}
        if self._provisioning and before is not None and before.attached:
            self._note(at, self.current, "the volume's attachment went back to not attached")
        return {}
