"""The table a benchmark prints: each server's figures, their sum, and fio's aggregate.

fio's "All clients" aggregate is every server's IOs divided by the longest runtime among
them, so when the servers' runtimes differ it is below the sum of their rates. Both are
printed, each on its own labelled row, never one under the other's name.
"""

from __future__ import annotations

from collections.abc import Iterable

from fioprobe.distributed.jobs import phase_kind
from fioprobe.fio.model import OpStats
from fioprobe.metrics.distributed import PhaseResult, single_op

#: The direction each phase measures.
PHASE_OP = {"prepare": "write", "randread": "read", "randwrite": "write"}
SUM_ROW = "sum of servers"
AGGREGATE_ROW = "all servers (fio)"
_HEADER = (
    f"  {'server':<24} {'IOPS':>10} {'MiB/s':>9} {'mean ms':>8} {'p50 ms':>8} {'p99 ms':>8} "
    f"{'p99.9 ms':>9} {'runtime s':>9}"
)


def phase_table(phase: PhaseResult) -> list[str]:
    """The lines of one phase: header, a row per server, the sum, fio's aggregate."""
    op = PHASE_OP[phase_kind(phase.phase)]
    lines = [f"phase {phase.phase} ({op}s)", _HEADER]
    stats = []
    for server in sorted(phase.result.servers, key=lambda s: (s.hostname, s.port or 0)):
        found = single_op(server.run, op)
        stats.append(found)
        lines.append(_row(server.server, found))
    done = [s for s in stats if s is not None]
    iops = sum(s.iops for s in done)
    bandwidth = sum(s.bandwidth_bytes_per_second for s in done)
    lines.append(
        f"  {SUM_ROW:<24} {iops:>10.1f} {bandwidth / 2**20:>9.2f} {'-':>8} {'-':>8} {'-':>8} "
        f"{'-':>9} {'-':>9}"
    )
    aggregate = phase.result.aggregate
    if aggregate is None:
        lines.append(f"  {AGGREGATE_ROW:<24} (one server: fio writes no aggregate)")
    else:
        lines.append(_row(AGGREGATE_ROW, single_op(aggregate, op)))
    return lines


def report_lines(phases: Iterable[PhaseResult]) -> list[str]:
    lines: list[str] = []
    for phase in phases:
        lines += [*phase_table(phase), ""]
    lines.append(
        f'"{AGGREGATE_ROW}" is fio\'s "All clients": every server\'s IOs over the longest '
        f'runtime (fio gives it no percentiles); "{SUM_ROW}" adds the servers\' own rates.'
    )
    return lines


def _row(name: str, stats: OpStats | None) -> str:
    """One row; the runtime is the direction's own (fio's `runtime`: for the aggregate, the
    longest server's), not `job_runtime`, which fio sums over the servers."""
    if stats is None:
        return f"  {name:<24} (no IO reported)"
    latency = stats.latency
    percentiles = latency.percentiles if latency is not None else {}

    def ms(percent: float) -> str:
        value = percentiles.get(percent)
        return "-" if value is None else f"{value * 1000:.3f}"

    mean = "-" if latency is None or not latency.has_data else f"{latency.mean_s * 1000:.3f}"
    return (
        f"  {name:<24} {stats.iops:>10.1f} {stats.bandwidth_bytes_per_second / 2**20:>9.2f} "
        f"{mean:>8} {ms(50.0):>8} {ms(99.0):>8} {ms(99.9):>9} {stats.runtime_s:>9.2f}"
    )
