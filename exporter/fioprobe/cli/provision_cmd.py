"""`fioprobe provision`: one provisioning run per StorageClass, each pushed to its group.

What a CronJob of the provisioning probe runs (docs/PROVISIONING.md): for each class given,
a claim and a pod that writes through it, every step timed, both deleted, the deletion
timed; then the run is merged into its group's totals and pushed (job="fioprobe_provision",
storageclass[, node]), the same way and with the same state files as the fio probes' pushes.
Every argument is checked before the first run: a bad one runs nothing and pushes nothing.
The classes run one after the other: two runs the scheduler places may land on one node,
share its attach slots and time each other's waits. A class bound to nodes (--nodes) runs
once per node, up to --max-parallel at once: runs on different nodes share no node.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from fioprobe import bounds
from fioprobe.cli import options
from fioprobe.cli.argtypes import seconds, whole
from fioprobe.errors import ExitCode, UsageError

if TYPE_CHECKING:
    from collections.abc import Callable

    from fioprobe.gateway.transport import Transport
    from fioprobe.kube.client import KubeClient
    from fioprobe.provision.runner import RunResult
    from fioprobe.provision.steps import Step
    from fioprobe.publish.statefile import StateDir

DESCRIPTION = (
    "Provision a small volume of each StorageClass given, as a new workload would: create a "
    "claim and a pod that writes and fdatasyncs a few KiB through it, time every step from "
    "claim to first fdatasync, delete both and time the deletion; push each run to its "
    "Pushgateway group (job=fioprobe_provision, storageclass[, node]). The run's objects "
    "live in --namespace and carry --owner's label: the next run removes what a killed run "
    "left, and nothing else. Needs the RBAC of docs/PROVISIONING.md. Exits 0 when every run "
    "succeeded or its class was skipped (it keeps its volumes), 1 when a run failed (pushed), "
    "4 when a push failed (the run is kept for the next push), 2 for a bad argument (nothing "
    "run)."
)
#: A step's deadline on the command line: from a second (the test's "nothing provisions")
#: to an hour (beyond it a step is broken, whatever the class).
_deadline_seconds = seconds(1, 3600)
DEFAULT_OWNER = "default"
DEFAULT_MAX_PARALLEL = 4


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--storageclass",
        action="append",
        required=True,
        metavar="NAME",
        help="a StorageClass to provision from (repeatable: one run each, in order)",
    )
    parser.add_argument(
        "--nodes",
        action="append",
        default=[],
        metavar="CLASS=NODE[,NODE...]",
        help="run CLASS (one given with --storageclass) once on each NODE, by node affinity "
        "(not nodeName), each run pushed to its own group with node=NODE: for classes whose "
        "volumes are local to a node (repeatable, each class once; default: one run where "
        "the scheduler places it)",
    )
    parser.add_argument(
        "--max-parallel",
        type=whole(*bounds.PROVISION_PARALLEL),
        default=DEFAULT_MAX_PARALLEL,
        metavar="N",
        help="how many runs of one class given --nodes overlap, each on its own node, "
        f"{bounds.PROVISION_PARALLEL[0]} to {bounds.PROVISION_PARALLEL[1]}; every other run "
        "is alone: two runs the scheduler places may share a node's attach slots and time "
        f"each other's waits (default: {DEFAULT_MAX_PARALLEL})",
    )
    parser.add_argument(
        "--namespace",
        required=True,
        metavar="NS",
        help="the probe's own namespace, where its claims and pods are made (restricted Pod "
        "Security is enough)",
    )
    parser.add_argument(
        "--owner",
        default=DEFAULT_OWNER,
        metavar="NAME",
        help="which probe made the objects (their label) and owns the groups "
        "(fioprobe_owner_info): a label value. The next run of the same owner and class "
        f"removes what an earlier one left (default: {DEFAULT_OWNER})",
    )
    parser.add_argument(
        "--size",
        metavar="QUANTITY",
        help="the claim's size, a Kubernetes quantity from 1Mi to 64Ti, for every class given "
        f"(default: each class's smallest volume by its type: {_smallest()})",
    )
    parser.add_argument(
        "--image",
        required=True,
        metavar="IMAGE",
        help="the image whose dd and sleep the pod runs (fioprobe's own image)",
    )
    parser.add_argument(
        "--platform",
        choices=("kubernetes", "openshift"),
        default="kubernetes",
        help="who sets the test pod's user and fsGroup: kubernetes, the pod (the image's "
        "user, 65532); openshift, the platform (restricted-v2 assigns them from the "
        "namespace's range and refuses a pod that names others) (default: kubernetes)",
    )
    parser.add_argument(
        "--deadline",
        action="append",
        default=[],
        metavar="STEP=SECONDS",
        help="how long STEP may take before the run fails in it, 1 to 3600 (repeatable); "
        "steps: created, scheduled, bound, attached, running, written, pod_deleted, "
        "detached, volume_deleted (defaults in docs/PROVISIONING.md)",
    )
    parser.add_argument(
        "--state-dir",
        metavar="SDIR",
        help="where the groups' totals are kept between runs, one file per group (default: "
        "$FIOPROBE_STATE_DIR or ~/.local/state/fioprobe); checked on every open: owned by "
        "this user, writable by no one else",
    )
    parser.add_argument(
        "--ephemeral-state",
        action="store_true",
        help="keep the groups' totals for this invocation only, in a private directory made "
        "under $TMPDIR and removed at the end (a CronJob's pod without a volume): each push "
        "reads its group back from the Pushgateway first and continues from it; a run whose "
        "push fails is lost with it",
    )
    kube = parser.add_argument_group(
        "Kubernetes API",
        "Default: the pod's own service account ($KUBERNETES_SERVICE_HOST and _PORT, its "
        "token and CA files). Outside a pod, give all three; the token is read from its "
        "file at every request, never from the command line.",
    )
    kube.add_argument("--kube-server", metavar="URL", help="the API server, https://HOST:PORT")
    kube.add_argument("--kube-token-file", metavar="FILE", help="file holding a bearer token")
    kube.add_argument("--kube-ca-file", metavar="FILE", help="CA bundle of the API server")
    options.add_quiet_option(parser, "log lines of the runs")
    options.add_gateway_options(parser)


def _smallest() -> str:
    """The default sizes by volume type, as the help states them ("1Gi for gp2 and gp3")."""
    from fioprobe.provision.workload import SMALLEST, SMALLEST_OTHERWISE

    by_size: dict[str, list[str]] = {}
    for volume_type, size in SMALLEST.items():
        by_size.setdefault(size, []).append(volume_type)
    shown = [f"{size} for {' and '.join(types)}" for size, types in by_size.items()]
    return ", ".join([*shown, f"{SMALLEST_OTHERWISE} for any other"])


def run(args: argparse.Namespace) -> int:
    """Every run, then, when a signal (SIGTERM, SIGINT, SIGHUP) stopped them, `Interrupted`:
    no run starts after it, a run stopped while provisioning deletes its objects and pushes
    nothing, one stopped while deleting pushes what it measured, a push under way finishes,
    and the private state directory is removed."""
    from fioprobe.probe.signals import Signals

    signals = Signals()
    with signals.deferred(), signals.installed():  # deferred first: a signal is only noted
        status = _run(args, lambda: signals.received is not None)
    signals.raise_if_received(
        "no run started after it; a run stopped while provisioning deleted its claim and pod "
        "and pushed nothing, one stopped while deleting pushed what it measured"
    )
    return status


def _run(args: argparse.Namespace, stopping: Callable[[], bool]) -> int:
    from fioprobe.publish.statefile import StateDir, default_state_dir

    _check(args)
    nodes_of = _nodes(args.nodes, args.storageclass)
    deadlines = _deadlines(args.deadline)
    transport = options.transport(args)
    client = _client(args)
    if args.ephemeral_state:
        # mkdtemp makes it 0700 and ours, under a name no one else can have taken: its parent
        # (a pod's shared emptyDir, writable by all) is not trusted, nor needed.
        try:
            private = Path(tempfile.mkdtemp(prefix="fioprobe-provision-state-"))
        except OSError as exc:
            raise UsageError(
                f"provision: --ephemeral-state: cannot make a private directory under "
                f"{tempfile.gettempdir()}: {exc.strerror}"
            ) from None
        try:
            runs = _Runs(args, StateDir(private), deadlines, transport, client, stopping)
            return _provision_each(args, nodes_of, runs)
        finally:
            shutil.rmtree(private, ignore_errors=True)
    directory = (
        StateDir(Path(os.path.abspath(args.state_dir)), create_parents=True)
        if args.state_dir
        else default_state_dir()
    )
    return _provision_each(
        args, nodes_of, _Runs(args, directory, deadlines, transport, client, stopping)
    )


def _provision_each(args: argparse.Namespace, nodes_of: dict[str, list[str]], runs: _Runs) -> int:
    """One run per class given, in order, each pushed to its group; a class given --nodes
    runs on each of its nodes, up to --max-parallel at once. The highest exit code."""
    status: int = ExitCode.OK
    for storage_class in args.storageclass:
        nodes = nodes_of.get(storage_class, [])
        if not nodes:
            status = max(status, runs.one(storage_class, None))
            continue
        workers = min(args.max_parallel, len(nodes))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="provision") as pool:
            status = max(status, *pool.map(partial(runs.one, storage_class), nodes))
    return status


@dataclass
class _Runs:
    """What every run of one invocation shares: its arguments, state, push and API."""

    args: argparse.Namespace
    directory: StateDir
    deadlines: dict[Step, float]
    transport: Transport
    client: KubeClient
    #: Whether a signal stopped the command: no run starts after it, and those in progress end.
    stopping: Callable[[], bool]
    #: A run's lines are printed together: runs on several nodes end in any order.
    printing: threading.Lock = field(default_factory=threading.Lock)

    def one(self, storage_class: str, node: str | None) -> int:
        """One run of `storage_class` (on `node`), pushed to its group; its exit code."""
        from fioprobe.gateway.transport import PushError
        from fioprobe.grouping import provision_key
        from fioprobe.metrics.provision import ProvisionOutcome
        from fioprobe.provision.runner import ProvisionRun
        from fioprobe.provision.workload import RunSpec
        from fioprobe.publish.outcome import StateNotKept, WriterConflict
        from fioprobe.publish.provision import publish_provision, state_file

        args = self.args
        if self.stopping():
            return ExitCode.OK  # not run: the command ends with `Interrupted`
        spec = RunSpec(owner=args.owner, storage_class=storage_class, namespace=args.namespace,
                       size=args.size, image=args.image, node=node,
                       pin_ids=args.platform != "openshift")  # fmt: skip
        shown = storage_class + (f" on {node}" if node else "")
        started = time.monotonic()
        result = ProvisionRun(self.client, spec, deadlines=self.deadlines,
                              stopping=self.stopping).execute()  # fmt: skip
        # The run's own wall time, from its first step on (what its steps add up to); the
        # removal of earlier runs' objects, the class's read and the watches' start before it
        # are no step.
        wall = time.monotonic() - (result.started if result.started is not None else started)
        with self.printing:
            for line in result.log:
                options.say(args, f"provision {shown}: {line}")
            print(f"{shown}: {_summary(result, wall)}", flush=True)
        if result.interrupted:
            return ExitCode.OK  # measured nothing whole: pushed as nothing
        key = provision_key(storage_class, node)
        file = state_file(self.directory, key)
        outcome = ProvisionOutcome(result, time.time(), owner=args.owner)
        code: int = ExitCode.OK if result.failure is None else ExitCode.PROBE_FAILED
        problem: str | None = None
        try:
            publish_provision(outcome, key, self.transport, file, lease_seconds=args.writer_lease)
        except PushError as exc:
            kept = (
                "the run is lost with this invocation's state (--ephemeral-state)"
                if args.ephemeral_state
                else f"the run is kept in {file.path} and goes with the next push"
            )
            problem, code = f"{exc}; {kept}", ExitCode.PUSH_FAILED
        except WriterConflict as exc:
            problem, code = f"FAILED (writer_conflict): {exc}", max(code, ExitCode.PROBE_FAILED)
        except StateNotKept as exc:
            problem = f"FAILED ({exc.reason}): {exc}"
            code = ExitCode.PUSH_FAILED if not exc.pushed else max(code, exc.exit_code)
        if problem is not None:
            with self.printing:
                _error(f"provision {shown}: {problem}")
        return code


def _check(args: argparse.Namespace) -> None:
    """Every argument a run uses, before the first run: the first bad one is a UsageError."""
    from fioprobe.kube.nodes import node_name_problem
    from fioprobe.provision.workload import label_value_problem, namespace_problem, size_problem
    from fioprobe.target.config import valid_owner

    if args.ephemeral_state and args.state_dir:
        raise UsageError("provision: --state-dir and --ephemeral-state exclude each other")
    for name in args.storageclass:
        problem = node_name_problem(name)  # a StorageClass's name is a DNS subdomain too
        if problem is not None:
            raise UsageError(
                f"provision: --storageclass {name!r:.80} "
                + problem.replace("a node name", "a StorageClass name")
            )
    if len(set(args.storageclass)) != len(args.storageclass):
        raise UsageError("provision: --storageclass names a class twice: give each once")
    for option, problem in (
        ("--namespace", namespace_problem(args.namespace)),
        ("--size", size_problem(args.size) if args.size is not None else None),
        ("--owner", label_value_problem(args.owner) if args.owner else "must not be empty"),
    ):
        if problem is not None:
            raise UsageError(f"provision: {option} {problem}")
    if not valid_owner(args.owner):
        raise UsageError(f"provision: --owner {args.owner!r:.80} is not an owner name")
    image = args.image
    if not image or len(image) > 512 or not image.isprintable() or any(c.isspace() for c in image):
        raise UsageError(
            f"provision: --image must be an image reference, printable, without spaces, at "
            f"most 512 characters: {image!r:.80}"
        )


def _nodes(given: list[str], classes: list[str]) -> dict[str, list[str]]:
    """--nodes CLASS=NODE[,NODE...]: each class one given with --storageclass, and once;
    each node a node name, once per class."""
    from fioprobe.kube.nodes import node_name_problem

    nodes_of: dict[str, list[str]] = {}
    for text in given:
        name, equals, listed = text.partition("=")
        if not equals or not listed:
            raise UsageError(f"provision: --nodes {text!r:.80} is not CLASS=NODE[,NODE...]")
        if name not in classes:
            raise UsageError(
                f"provision: --nodes {text!r:.80}: {name!r:.80} is not a class given with "
                "--storageclass"
            )
        if name in nodes_of:
            raise UsageError(f"provision: --nodes names class {name} twice: give each once")
        nodes = listed.split(",")
        for node in nodes:
            problem = node_name_problem(node)
            if problem is not None:
                raise UsageError(f"provision: --nodes {name}: {node!r:.80} {problem}")
        if len(set(nodes)) != len(nodes):
            raise UsageError(f"provision: --nodes {name}: names a node twice: give each once")
        most = bounds.PROVISION_NODES[1]
        if len(nodes) > most:
            raise UsageError(f"provision: --nodes {name}: {len(nodes)} nodes, at most {most}")
        nodes_of[name] = nodes
    return nodes_of


def _deadlines(given: list[str]) -> dict[Step, float]:
    """--deadline STEP=SECONDS, each step named once."""
    from fioprobe.provision.steps import Step

    deadlines: dict[Step, float] = {}
    names = ", ".join(step.value for step in Step)
    for text in given:
        name, equals, value = text.partition("=")
        if not equals:
            raise UsageError(f"provision: --deadline {text!r:.80} is not STEP=SECONDS")
        try:
            step = Step(name.strip())
        except ValueError:
            raise UsageError(
                f"provision: --deadline {text!r:.80}: {name!r:.40} is not a step ({names})"
            ) from None
        if step in deadlines:
            raise UsageError(f"provision: --deadline names step {step.value} twice")
        try:
            deadlines[step] = _deadline_seconds(value.strip())
        except argparse.ArgumentTypeError as exc:
            raise UsageError(f"provision: --deadline {text!r:.80}: {exc}") from None
    return deadlines


def _client(args: argparse.Namespace) -> KubeClient:
    from fioprobe.kube.client import KubeClient

    explicit = {"--kube-server": args.kube_server, "--kube-token-file": args.kube_token_file,
                "--kube-ca-file": args.kube_ca_file}  # fmt: skip
    missing = [name for name, value in explicit.items() if not value]
    if len(missing) == len(explicit):
        return KubeClient.from_pod()
    if missing:
        raise UsageError(
            f"provision: {', '.join(missing)} missing: outside a pod, give --kube-server, "
            "--kube-token-file and --kube-ca-file together"
        )
    for name in ("--kube-token-file", "--kube-ca-file"):
        path = explicit[name]
        if not os.path.isfile(path):
            raise UsageError(f"provision: {name} {path!r:.200} is not a readable file")
    return KubeClient(args.kube_server, Path(args.kube_token_file), Path(args.kube_ca_file))


def _summary(result: RunResult, wall: float) -> str:
    """One line: the verdict, the wall time and each finished step's duration."""
    steps = ", ".join(f"{t.step.value} {t.seconds:.1f}s" for t in result.steps)
    timed = f" ({steps})" if steps else ""
    left = f"; left behind: {', '.join(result.left)}" if result.left else ""
    if result.interrupted:
        return f"interrupted after {wall:.1f}s{timed}, not pushed{left}"
    if result.skipped is not None:
        return f"skipped ({result.skipped}){left}"
    failure = result.failure
    if failure is None:
        return f"ok in {wall:.1f}s{timed}{left}"
    where = f" in {failure.step.value}" if failure.step is not None else ""
    return (
        f"FAILED ({failure.reason.value}{where}) after {wall:.1f}s{timed}: {failure.message}{left}"
    )


def _error(message: str) -> None:
    print(f"fioprobe: error: {message}", file=sys.stderr)
