"""`fioprobe distributed`: a benchmark plan against fio servers, phase by phase.

The servers are the caller's (`fio --server` on each node, or the manifests' StatefulSet);
this command needs no Kubernetes API. Its work is in `fioprobe.distributed`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from fioprobe.cli import argtypes, options
from fioprobe.errors import ExitCode

if TYPE_CHECKING:
    from fioprobe.metrics.distributed import BenchmarkOutcome

DESCRIPTION = (
    "Run a benchmark plan (YAML: StorageClass, jobs per server, sizes, phases, and the "
    "budget each server may spend) against running fio servers: prepare (sequential write "
    "of the data set), randread, randwrite, each one `fio --client` sent to every server at "
    "once. Every job file passes the probes' allowlist and the plan's budget before any "
    "server is contacted. Prints each server's figures, their sum and fio's own \"All "
    "clients\" aggregate; keeps every phase's json+ under --output in the layout `report` "
    "and `backfill` read; with --gateway, pushes the benchmark once as its own group "
    "(benchmark, storageclass). The files the phases made on the servers are removed at the "
    "end, also after a failure or SIGTERM. See docs/DISTRIBUTED.md."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--plan", required=True, metavar="FILE", help="the benchmark plan (YAML)")
    parser.add_argument(
        "--servers",
        required=True,
        metavar="HOST:PORT,...",
        help="the fio servers (fio --server), as many as the plan's `servers`",
    )
    parser.add_argument(
        "-o",
        "--output",
        default="distributed-results",
        metavar="DIR",
        help="where each phase's fio output is kept (default: distributed-results); a "
        "benchmark already there is never overwritten",
    )
    parser.add_argument(
        "--wait-for-servers",
        type=argtypes.seconds(0, 3600),
        default=0.0,
        metavar="SECONDS",
        help="first wait up to SECONDS for every server to listen (a client started beside "
        "its servers); nothing is sent before all of them do (default 0: no wait)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="check the plan and print each phase's job file; contact no server",
    )
    options.add_gateway_options(parser, writer_lease=False)


def run(args: argparse.Namespace) -> int:
    from fioprobe.distributed.benchmark import check_plan, run_benchmark
    from fioprobe.distributed.plan import load_plan
    from fioprobe.distributed.push import push_benchmark
    from fioprobe.distributed.servers import parse_servers

    plan = load_plan(Path(args.plan))
    servers = parse_servers(args.servers)
    jobs = check_plan(plan, servers)
    if args.check:
        for job in jobs:
            print(f"# phase {job.phase}: at most {job.profile.io_bytes_max} bytes per server")
            print(job.text)
        return ExitCode.OK
    push: Callable[[BenchmarkOutcome], None] | None = None
    if args.gateway:  # its settings are checked before any server is contacted
        transport = options.transport(args)

        def push(outcome: BenchmarkOutcome) -> None:
            push_benchmark(transport, plan.name, plan.storageclass, outcome)
            print(f"pushed to {transport.shown_url} as benchmark={plan.name}, "
                  f"storageclass={plan.storageclass}", flush=True)  # fmt: skip

    def say(line: str) -> None:
        print(line, flush=True)

    run_benchmark(plan, servers, Path(args.output), say, push, args.wait_for_servers)
    print(f"results kept under {args.output}", flush=True)
    return ExitCode.OK
