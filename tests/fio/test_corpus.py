"""The reader against every real fio output in tests/data/fio-corpus.

For each good file: the model and the exported samples agree with the file's own numbers
(read independently here with json), histograms are cumulative, monotone and count N.
For each neg- file: a one-line error naming the file, exit 3, nothing on stdout.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import corpus_files, fioprobe
from fioprobe.fio.parse import FioOutputError, parse_file
from prometheus_client.parser import text_string_to_metric_families
from support.corpus import EXPECTED_ERRORS, raw_document

GOOD = corpus_files(negative=False)
NEGATIVE = corpus_files(negative=True)


def _clat(job: dict, op: str) -> dict:
    stats = job.get(op) or {}
    return stats.get("clat_ns") or stats.get("clat") or {}


def exported(path: Path) -> dict[str, list]:
    result = fioprobe("convert", str(path))
    assert result.returncode == 0, result.stderr.decode()
    families = text_string_to_metric_families(result.stdout.decode())
    return {family.name: family.samples for family in families}


def test_corpus_is_there() -> None:
    assert len(GOOD) >= 20 and len(NEGATIVE) >= 4


@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.name)
def test_good_file_exports_fio_numbers(path: Path) -> None:
    doc = raw_document(path)
    jobs = doc.get("jobs") or doc["client_stats"]
    if any(j.get("jobname") == "All clients" for j in jobs):
        jobs = [j for j in jobs if j.get("jobname") == "All clients"]
    families = exported(path)
    ns = "clat_ns" in json.dumps(jobs[0])
    per_second = 1e9 if ns else 1e6

    checked_percentiles = 0
    for op in ("read", "write"):
        for job in jobs:
            stats = job.get(op)
            if not stats or not (stats.get("total_ios") or stats.get("io_bytes")):
                continue
            names = {s.labels.get("fio_job") for s in families.get(f"fioprobe_{op}_iops", [])}
            assert len(names) >= 1
            # IOPS and bandwidth gauges equal the JSON's numbers.
            iops = [s.value for s in families[f"fioprobe_{op}_iops"]]
            assert stats["iops"] in iops
            bw = stats.get("bw_bytes", stats.get("bw", 0) * 1024)
            assert bw in [s.value for s in families[f"fioprobe_{op}_bandwidth_bytes_per_second"]]
            # fio's exact percentiles appear in the summary, converted to seconds.
            clat = _clat(job, op)
            summary = families.get(f"fioprobe_last_{op}_latency_seconds", [])
            for key, quantile in (("50.000000", "0.5"), ("99.000000", "0.99"),
                                  ("99.900000", "0.999")):  # fmt: skip
                if key in clat.get("percentile", {}) and clat.get("N", 1):
                    want = clat["percentile"][key] / per_second
                    got = [s.value for s in summary if s.labels.get("quantile") == quantile]
                    assert want in got, (op, key, want, got)
                    checked_percentiles += 1
            # fio's max (one stall no percentile shows) is a gauge of its own, in seconds.
            maxima = [s.value for s in families.get(f"fioprobe_last_{op}_latency_max_seconds", [])]
            if clat.get("max"):
                assert clat["max"] / per_second in maxima, (op, clat["max"], maxima)
    # The cumulative histogram counts fio's N (summed over jobs) where fio reports it.
    for op in ("read", "write"):
        n_values = [_clat(job, op).get("N") for job in jobs]
        if n_values and all(n_values):
            (count,) = [s.value for s in families[f"fioprobe_{op}_latency_seconds"]
                        if s.name.endswith("_count")]  # fmt: skip
            assert count == sum(n_values), op

    # Buckets are cumulative and monotone, +Inf equals _count.
    for name, samples in families.items():
        buckets = [s for s in samples if s.name.endswith("_bucket")]
        if not buckets:
            continue
        values = [s.value for s in buckets]
        assert values == sorted(values), name
        assert buckets[-1].labels["le"] == "+Inf"
        count = next(s.value for s in samples if s.name.endswith("_count"))
        assert values[-1] == count, name
    has_percentiles = any(
        _clat(j, op).get("percentile") and (j.get(op) or {}).get("total_ios", 1)
        for j in jobs for op in ("read", "write")
    )  # fmt: skip
    if has_percentiles:
        assert checked_percentiles > 0, "no percentile was compared"
    info = families["fioprobe_info"][0]
    assert info.labels["fio_version"] == doc["fio version"]


@pytest.mark.parametrize("path", NEGATIVE, ids=lambda p: p.name)
def test_negative_file_is_rejected_with_its_reason(path: Path) -> None:
    with pytest.raises(FioOutputError) as caught:
        parse_file(path)
    message = str(caught.value)
    assert message.startswith(str(path) + ": ")
    assert EXPECTED_ERRORS[path.name] in message
    assert "\n" not in message

    result = fioprobe("convert", str(path))
    assert result.returncode == 3
    assert result.stdout == b""
    stderr = result.stderr.decode().strip()
    assert stderr.count("\n") == 0 and EXPECTED_ERRORS[path.name] in stderr


def test_json_plus_bins_count_equals_n() -> None:
    path = next(p for p in GOOD if "jsonplus-bins" in p.name)
    run = parse_file(path)
    write = run.jobs[0].ops["write"]
    assert write.latency is not None and write.latency.bins_ns
    assert write.latency.bins_ns.total() == write.latency.samples == 16384
    assert write.latency.bins_ns.latencies_ns == sorted(write.latency.bins_ns.latencies_ns)
    families = exported(path)
    (info,) = families["fioprobe_info"]
    assert info.labels["histogram_source"] == "bins"


def test_legacy_units_are_converted() -> None:
    """fio 2.x: microseconds and io_bytes in KiB."""
    path = next(p for p in GOOD if p.name.startswith("fio2.2.10"))
    doc = raw_document(path)
    stats = doc["jobs"][0]["write"]
    run = parse_file(path)
    write = run.jobs[0].ops["write"]
    assert write.io_bytes == stats["io_bytes"] * 1024
    assert write.latency is not None
    assert write.latency.percentiles[99.0] == stats["clat"]["percentile"]["99.000000"] / 1e6


def test_client_server_uses_all_clients_aggregate() -> None:
    path = next(p for p in GOOD if "2clients-allclients" in p.name)
    run = parse_file(path)
    assert [job.name for job in run.jobs] == ["All clients"]


def test_duplicate_job_names_become_unique() -> None:
    """numjobs without group_reporting: several jobs share a name; labels must not clash."""
    text = json.dumps(
        {"fio version": "fio-3.33", "jobs": [
            {"jobname": "w", "error": 0, "write": {"io_bytes": 1, "iops": 1.0, "total_ios": 1}},
            {"jobname": "w", "error": 0, "write": {"io_bytes": 1, "iops": 2.0, "total_ios": 1}},
        ]}
    )  # fmt: skip
    result = fioprobe("convert", "-", stdin=text.encode())
    assert result.returncode == 0, result.stderr
    assert 'fio_job="w.0"' in result.stdout.decode()
    assert 'fio_job="w.1"' in result.stdout.decode()
