"""`fioprobe provision`: one provisioning run per StorageClass, each pushed to its group.

What a CronJob of the provisioning probe runs (docs/PROVISIONING.md): for each class given,
a claim and a pod that writes through it, every step timed, both deleted, the deletion
timed; then the run is merged into its group's totals and pushed (job="fioprobe_provision",
storageclass[, node]), the same way and with the same state files as the fio probes' pushes.
Every argument is checked before the first run: a bad one runs nothing and pushes nothing.
The classes run one after the other, never at once: two runs would share the node's attach
slots and time each other's waits.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from fioprobe.cli import options
from fioprobe.cli.argtypes import seconds
from fioprobe.errors import ExitCode, UsageError

if TYPE_CHECKING:
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--storageclass",
        action="append",
        required=True,
        metavar="NAME",
        help="a StorageClass to provision from (repeatable: one run each, in order)",
    )
    parser.add_argument(
        "--node",
        metavar="NODE",
        help="run the pods on this node (node affinity, not nodeName): for classes bound to "
        "nodes (local volumes); the group gets node=NODE (default: the scheduler's choice)",
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
    from fioprobe.publish.statefile import StateDir, default_state_dir

    _check(args)
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
            return _provision_each(args, StateDir(private), deadlines, transport, client)
        finally:
            shutil.rmtree(private, ignore_errors=True)
    directory = (
        StateDir(Path(os.path.abspath(args.state_dir)), create_parents=True)
        if args.state_dir
        else default_state_dir()
    )
    return _provision_each(args, directory, deadlines, transport, client)


def _provision_each(
    args: argparse.Namespace,
    directory: StateDir,
    deadlines: dict[Step, float],
    transport: Transport,
    client: KubeClient,
) -> int:
    """One run per class given, in order, each pushed to its group; the highest exit code."""
    from fioprobe.gateway.transport import PushError
    from fioprobe.grouping import provision_key
    from fioprobe.metrics.provision import ProvisionOutcome
    from fioprobe.provision.runner import ProvisionRun
    from fioprobe.provision.workload import RunSpec
    from fioprobe.publish.outcome import StateNotKept, WriterConflict
    from fioprobe.publish.provision import publish_provision, state_file

    status: int = ExitCode.OK
    for storage_class in args.storageclass:
        spec = RunSpec(owner=args.owner, storage_class=storage_class, namespace=args.namespace,
                       size=args.size, image=args.image, node=args.node,
                       pin_ids=args.platform != "openshift")  # fmt: skip
        shown = storage_class + (f" on {args.node}" if args.node else "")
        started = time.monotonic()
        result = ProvisionRun(client, spec, deadlines=deadlines).execute()
        # The run's own wall time, from its first step on (what its steps add up to); the
        # removal of earlier runs' objects, the class's read and the watches' start before it
        # are no step.
        wall = time.monotonic() - (result.started if result.started is not None else started)
        for line in result.log:
            options.say(args, f"provision {shown}: {line}")
        print(f"{shown}: {_summary(result, wall)}", flush=True)
        key = provision_key(storage_class, args.node)
        file = state_file(directory, key)
        outcome = ProvisionOutcome(result, time.time(), owner=args.owner)
        code: int = ExitCode.OK if result.failure is None else ExitCode.PROBE_FAILED
        try:
            publish_provision(outcome, key, transport, file, lease_seconds=args.writer_lease)
        except PushError as exc:
            kept = (
                "the run is lost with this invocation's state (--ephemeral-state)"
                if args.ephemeral_state
                else f"the run is kept in {file.path} and goes with the next push"
            )
            _error(f"provision {shown}: {exc}; {kept}")
            code = ExitCode.PUSH_FAILED
        except WriterConflict as exc:
            _error(f"provision {shown}: FAILED (writer_conflict): {exc}")
            code = max(code, ExitCode.PROBE_FAILED)
        except StateNotKept as exc:
            _error(f"provision {shown}: FAILED ({exc.reason}): {exc}")
            code = ExitCode.PUSH_FAILED if not exc.pushed else max(code, exc.exit_code)
        status = max(status, code)
    return status


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
    if args.node is not None:
        problem = node_name_problem(args.node)
        if problem is not None:
            raise UsageError(f"provision: --node {args.node!r:.80} {problem}")
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
