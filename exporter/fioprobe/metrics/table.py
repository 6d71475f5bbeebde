"""The one table of every metric fioprobe exports.

Adding a metric means adding one row here; the collector refuses names that are not in the
table, and the README's metric table and the alert/dashboard name checks are derived from it.
Units are in the names (seconds, bytes); conversions happen in the reader (`fioparse`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["histogram", "summary", "gauge", "counter"]

#: Histogram buckets (le, seconds). They contain every boundary of etcd's own
#: etcd_disk_wal_fsync_duration_seconds (0.001 * 2^k) so that probe and etcd line up, plus
#: 5, 10 and 20 ms so that "p99 above 10 ms" is an exact bucket decision.
LATENCY_BUCKETS_SECONDS: tuple[float, ...] = (
    0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.004, 0.005, 0.008, 0.01, 0.016,
    0.02, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192,
)  # fmt: skip

#: Quantiles of the last-run summaries, as fio's percentile keys give them.
SUMMARY_QUANTILES: tuple[float, ...] = (0.5, 0.9, 0.99, 0.999)

#: Operations exported as separate metric names (docs/DESIGN.md: read, write and sync are names,
#: not a label). fio's trim and unified "mixed" sections stay in the model only.
EXPORTED_OPS: tuple[str, ...] = ("sync", "write", "read")


@dataclass(frozen=True, slots=True)
class MetricDef:
    name: str
    kind: Kind
    help: str
    #: Labels beyond the grouping key (storageclass, profile, node).
    labels: tuple[str, ...] = ()

    def series_names(self) -> tuple[str, ...]:
        """Every series name this metric produces in the text exposition."""
        if self.kind == "histogram":
            return (f"{self.name}_bucket", f"{self.name}_sum", f"{self.name}_count")
        if self.kind == "summary":
            return (self.name, f"{self.name}_sum", f"{self.name}_count")
        return (self.name,)


def _op_metrics(op: str, fio_field: str) -> tuple[MetricDef, ...]:
    what = "fsync/fdatasync" if op == "sync" else f"{op} completion"
    return (
        MetricDef(
            f"fioprobe_{op}_latency_seconds",
            "histogram",
            f"{what} latency (fio {fio_field}), cumulative over all runs of this probe",
        ),
        MetricDef(
            f"fioprobe_last_{op}_latency_seconds",
            "summary",
            f"{what} latency of the last run: fio's exact percentiles, sum and count",
            ("fio_job",),
        ),
        MetricDef(
            f"fioprobe_last_{op}_latency_max_seconds",
            "gauge",
            f"Slowest {what} of the last run (fio max): a single stall that no percentile of "
            "a run of thousands shows",
            ("fio_job",),
        ),
        MetricDef(
            f"fioprobe_{op}_iops",
            "gauge",
            f"{op} operations per second in the last run"
            + (" (fsyncs / job runtime)" if op == "sync" else " (fio iops)"),
            ("fio_job",),
        ),
    )


def _distributed_op_metrics(op: str) -> tuple[MetricDef, ...]:
    done = "read" if op == "read" else "written"
    title = op.capitalize()
    return (
        MetricDef(
            f"fioprobe_distributed_{op}_iops",
            "gauge",
            f"{title} operations per second of one server in one phase of the last benchmark "
            "(fio iops)",
            ("phase", "server"),
        ),
        MetricDef(
            f"fioprobe_distributed_{op}_bandwidth_bytes_per_second",
            "gauge",
            f"{title} bandwidth of one server in one phase of the last benchmark (fio bw_bytes)",
            ("phase", "server"),
        ),
        MetricDef(
            f"fioprobe_distributed_{op}_latency_seconds",
            "summary",
            f"{title} completion latency of one server in one phase of the last benchmark: "
            "fio's exact percentiles, sum and count",
            ("phase", "server"),
        ),
        MetricDef(
            f"fioprobe_distributed_{done}_bytes",
            "gauge",
            f"Bytes {done} by one server in one phase of the last benchmark (its cost)",
            ("phase", "server"),
        ),
        MetricDef(
            f"fioprobe_distributed_aggregate_{op}_iops",
            "gauge",
            f"fio's \"All clients\" {op} IOPS of one phase: every server's IOs over the longest "
            "runtime, not the sum of the servers' rates",
            ("phase",),
        ),
        MetricDef(
            f"fioprobe_distributed_aggregate_{op}_bandwidth_bytes_per_second",
            "gauge",
            f'fio\'s "All clients" {op} bandwidth of one phase (over the longest runtime)',
            ("phase",),
        ),
        MetricDef(
            f"fioprobe_distributed_aggregate_{op}_latency_seconds",
            "summary",
            f'fio\'s "All clients" {op} completion latency of one phase: sum and count over '
            "every server's IOs (fio writes no percentiles for the aggregate)",
            ("phase",),
        ),
    )


METRICS: tuple[MetricDef, ...] = (
    *_op_metrics("sync", "sync.lat_ns"),
    *_op_metrics("write", "write.clat_ns"),
    *_op_metrics("read", "read.clat_ns"),
    MetricDef(
        "fioprobe_read_bandwidth_bytes_per_second",
        "gauge",
        "Read bandwidth of the last run (fio bw_bytes)",
        ("fio_job",),
    ),
    MetricDef(
        "fioprobe_write_bandwidth_bytes_per_second",
        "gauge",
        "Write bandwidth of the last run (fio bw_bytes)",
        ("fio_job",),
    ),
    MetricDef("fioprobe_success", "gauge", "1 if the last probe run succeeded, else 0"),
    MetricDef(
        "fioprobe_duration_seconds",
        "gauge",
        "Wall time of the last probe run from its start to the start of the push that carries "
        "it: fio and the publish's work before the push (state, read-back) are in it; the push "
        "and the check after it are not (fio elapsed time when converting a file)",
    ),
    MetricDef(
        "fioprobe_last_success_timestamp_seconds",
        "gauge",
        "Unix time of the last successful run (carried forward while runs fail)",
    ),
    MetricDef(
        "fioprobe_failure_reason_info",
        "gauge",
        "Why the last run failed; present only while it is failing",
        ("reason",),
    ),
    MetricDef(
        "fioprobe_info",
        "gauge",
        "Facts about the last run: fio and fioprobe versions, volume, histogram source, and "
        "whether the disk holds etcd (etcd_disk, from the configuration; empty if unknown)",
        (
            "fio_version",
            "version",
            "volume_type",
            "provisioner",
            "ran_on_node",
            "histogram_source",
            "etcd_disk",
        ),
    ),
    MetricDef(
        "fioprobe_writer_info",
        "gauge",
        "Identity of the state that owns this group's counters (one writer per group)",
        ("writer",),
    ),
    MetricDef(
        "fioprobe_push_id",
        "gauge",
        "Random identity of the push that wrote this group's counters (bookkeeping)",
        (),
    ),
    MetricDef(
        "fioprobe_push_basis_id",
        "gauge",
        "fioprobe_push_id of the push these counters continued from, 0 if none (bookkeeping)",
        (),
    ),
    MetricDef(
        "fioprobe_owner_info",
        "gauge",
        "Owner (configuration) this group belongs to; `fioprobe gc` deletes only its owner's",
        ("owner",),
    ),
    MetricDef("fioprobe_runs_total", "counter", "Probe runs, successful or not"),
    MetricDef("fioprobe_failures_total", "counter", "Probe runs that failed"),
    MetricDef("fioprobe_read_bytes_total", "counter", "Bytes the probe itself read (its cost)"),
    MetricDef("fioprobe_written_bytes_total", "counter", "Bytes the probe itself wrote (its cost)"),
    MetricDef("fioprobe_volume_size_bytes", "gauge", "Configured size of the probed volume"),
    MetricDef(
        "fioprobe_volume_baseline_iops",
        "gauge",
        "IOPS the volume sustains indefinitely, from its volume model",
    ),
    MetricDef(
        "fioprobe_volume_burst_iops",
        "gauge",
        "IOPS the volume delivers while burst credits last (equals baseline without burst)",
    ),
    MetricDef(
        "fioprobe_volume_baseline_throughput_bytes_per_second",
        "gauge",
        "Throughput the volume sustains indefinitely, from its volume model",
    ),
    MetricDef(
        "fioprobe_volume_burst_throughput_bytes_per_second",
        "gauge",
        "Throughput while burst credits last (equals baseline without burst)",
    ),
    MetricDef(
        "fioprobe_volume_burst_balance_ratio",
        "gauge",
        "Modelled burst credit balance, 0..1, for a dedicated probe volume with a credit model",
    ),
    # --- The continuous stream (`fioprobe continuous`, scraped, not pushed) -------------------
    # Identified by storageclass and, for node-local targets, node (no profile): one stream
    # per target. Latencies are measured in nanoseconds by the writer and converted to
    # seconds in fioprobe.continuous.collector.
    MetricDef(
        "fioprobe_continuous_sync_latency_seconds",
        "histogram",
        "fdatasync latency of the continuous stream's writes, every completed fdatasync",
    ),
    MetricDef(
        "fioprobe_continuous_inflight_seconds",
        "gauge",
        "Age of the stream's operation (write + fdatasync) still outstanding at scrape time; "
        "0 when none",
    ),
    MetricDef(
        "fioprobe_continuous_stall_seconds_total",
        "counter",
        "Time an operation of the stream was outstanding beyond the stall threshold",
    ),
    MetricDef(
        "fioprobe_continuous_operations_total",
        "counter",
        "Completed operations (write + fdatasync) of the stream",
    ),
    MetricDef(
        "fioprobe_continuous_written_bytes_total",
        "counter",
        "Bytes the stream wrote (its own cost, at the application)",
    ),
    MetricDef(
        "fioprobe_continuous_errors_total",
        "counter",
        "Failed operations and set-ups of the stream, by reason",
        ("reason",),
    ),
    MetricDef(
        "fioprobe_continuous_success",
        "gauge",
        "1 while the stream's last operation succeeded, else 0",
    ),
    MetricDef(
        "fioprobe_continuous_failing_seconds",
        "gauge",
        "How long the stream has been failing: seconds since its first failed operation or "
        "set-up after its last success, with the reason of the latest failure; 0 (and no "
        "reason) while its operations succeed",
        ("reason",),
    ),
    MetricDef(
        "fioprobe_continuous_info",
        "gauge",
        "Facts about the stream's target: whether the disk holds etcd (from the "
        "configuration), the node it runs on, its volume type, and the block device its file "
        "lands on (major:minor of the filesystem, kernel name, whole disk; empty without one)",
        ("etcd_disk", "ran_on_node", "volume_type", "device", "disk", "major_minor", "version"),
    ),
    # --- Distributed benchmarks (`fioprobe distributed`, pushed once per benchmark) --------
    # Their own names and their own group (benchmark, storageclass; no profile): no probe
    # rule, alert or panel selects them (the mixin's selectors add benchmark=""). `server`
    # is one fio server (host:port); the aggregate families hold fio's own "All clients"
    # figures, which are not the sum of the servers' (fio divides by the longest runtime).
    *_distributed_op_metrics("read"),
    *_distributed_op_metrics("write"),
    MetricDef(
        "fioprobe_distributed_runtime_seconds",
        "gauge",
        "How long one server ran one phase (fio's runtime of the phase's direction)",
        ("phase", "server"),
    ),
    MetricDef(
        "fioprobe_distributed_servers",
        "gauge",
        "Number of fio servers the benchmark ran against",
    ),
    MetricDef(
        "fioprobe_distributed_success",
        "gauge",
        "1 if every phase of the last benchmark ran on every server, else 0",
    ),
    MetricDef(
        "fioprobe_distributed_failure_reason_info",
        "gauge",
        "Why the last benchmark failed (a reason of the probes' closed set); present only "
        "when it failed",
        ("reason",),
    ),
    MetricDef(
        "fioprobe_distributed_server_success",
        "gauge",
        "1 per server of the last benchmark, 0 for a server its failure names (no answer, "
        "no result, a job error, over the budget, the data set not laid out)",
        ("server",),
    ),
    MetricDef(
        "fioprobe_distributed_timestamp_seconds",
        "gauge",
        "Unix time the last benchmark of this group ended",
    ),
    MetricDef(
        "fioprobe_distributed_info",
        "gauge",
        "Facts about the last benchmark: fio and fioprobe versions, the plan's block size, "
        "IO depths (comma-separated in a sweep), jobs per server and IO engine",
        ("fio_version", "version", "block_size", "iodepth", "jobs_per_server", "ioengine"),
    ),
    # --- The provisioning probe (`fioprobe provision`, pushed per StorageClass) ------------
    # A group of their own (job="fioprobe_provision", storageclass[, node]; no profile), with
    # the probes' bookkeeping (writer, push ids, owner) under the same names. `step` is one
    # of fioprobe.provision.steps.Step, `reason` one of fioprobe.provision.reasons.Reason
    # (docs/PROVISIONING.md), or, for a run that could not be counted, of the probes' own.
    MetricDef(
        "fioprobe_provision_step_duration_seconds",
        "histogram",
        "Duration of each finished step of a provisioning run (claim to first fdatasync, then "
        "the deletion), cumulative over all runs of this group; a step a run does not have "
        "(no attach without a VolumeAttachment) or did not finish adds no sample",
        ("step",),
    ),
    MetricDef(
        "fioprobe_provision_last_step_duration_seconds",
        "gauge",
        "Duration of each step the last provisioning run finished (none for the others)",
        ("step",),
    ),
    MetricDef(
        "fioprobe_provision_success",
        "gauge",
        "1 if the last provisioning run succeeded, else 0; absent while the class is skipped",
    ),
    MetricDef(
        "fioprobe_provision_failure_reason_info",
        "gauge",
        "Why the last provisioning run failed, and in which step (empty: outside the steps); "
        "present only while it is failing",
        ("reason", "step"),
    ),
    MetricDef(
        "fioprobe_provision_skipped_info",
        "gauge",
        "Why the class is not provisioned at all (retain_policy: it keeps its volumes; "
        "no_provisioner: its volumes are made by hand); "
        "present only while it is skipped, in place of fioprobe_provision_success",
        ("reason",),
    ),
    MetricDef(
        "fioprobe_provision_info",
        "gauge",
        "The StorageClass the last run (or skip) read: its provisioner (a short hash when it "
        "is not a qualified name), its volume type (from the provisioner and parameters.type, "
        "one of the volume types; unknown for any other) and its volumeBindingMode; absent "
        "when the class could not be read",
        ("provisioner", "volume_type", "binding_mode"),
    ),
    MetricDef(
        "fioprobe_provision_runs_total",
        "counter",
        "Provisioning runs, successful or not (skipped ones are not runs)",
    ),
    MetricDef("fioprobe_provision_failures_total", "counter", "Provisioning runs that failed"),
    MetricDef(
        "fioprobe_provision_last_run_timestamp_seconds",
        "gauge",
        "Unix time the last provisioning run (or skip) of this group ended",
    ),
    MetricDef(
        "fioprobe_provision_last_success_timestamp_seconds",
        "gauge",
        "Unix time of the last successful provisioning run (carried forward while runs fail)",
    ),
    MetricDef(
        "fioprobe_provision_objects_left",
        "gauge",
        "Claims and pods of the last run still there after its deadlines (the next run of "
        "the group removes them)",
    ),
    MetricDef(
        "fioprobe_provision_objects_removed_total",
        "counter",
        "Claims and pods of earlier runs (killed, or past their deadlines) that a run removed "
        "before it started",
    ),
)

METRICS_BY_NAME: dict[str, MetricDef] = {m.name: m for m in METRICS}


def exposed_series_names() -> set[str]:
    """Every series name the exporter can produce (incl. _bucket/_sum/_count)."""
    return {series for metric in METRICS for series in metric.series_names()}
