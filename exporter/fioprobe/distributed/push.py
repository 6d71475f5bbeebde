"""A benchmark's one push: its own group, replaced whole by the next benchmark of that name.

Nothing is cumulative and nothing is read back: a benchmark is one event, and its group
(`job="fioprobe", benchmark, storageclass`) holds the last one. `fioprobe gc` never deletes
it (its key is not a probe's); `DELETE` of the group through the Pushgateway's API does.
"""

from __future__ import annotations

from fioprobe.gateway.api import push
from fioprobe.gateway.transport import PushError, Transport
from fioprobe.grouping import benchmark_key
from fioprobe.metrics.distributed import BenchmarkOutcome, registry_for_benchmark


def push_benchmark(
    transport: Transport, benchmark: str, storageclass: str, outcome: BenchmarkOutcome
) -> None:
    """PUT the benchmark's families as its group; PushError (exit 4) when refused."""
    try:
        push(transport, benchmark_key(benchmark, storageclass), registry_for_benchmark(outcome))
    except PushError as exc:
        raise PushError(f"{exc}; the results are kept in the archive, not pushed") from None
