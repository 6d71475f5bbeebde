"""Tolerant reader of fio's JSON output (fio 2.1 to 3.4x, json and json+, client/server).

Real fio output is rarely a clean JSON file: fio prints warnings or "terminating on signal"
before it, `--output-format=json,normal` appends the text report, `--status-interval` writes
several documents, pod logs wrap it in markers. The reader finds the fio document in the text
and maps it into `fioprobe.fio.model`, converting units once. Anything it cannot trust is
rejected whole with a `FioOutputError` naming the source and the problem on one line.
"""

from __future__ import annotations

import json
import math
import re
from array import array
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson

from fioprobe.fio.model import OPERATIONS, Bins, Job, LatencyStats, OpStats, Run
from fioprobe.fio.output_error import FioOutputError
from fioprobe.fio.repeats import DECODER, DOCUMENT_START, strict_if_client_server

__all__ = [
    "FioOutputError",
    "parse_file",
    "parse_text",
    "parse_text_with_raw",
    "read_document",
    "run_of_entries",
]


#: Time units of fio latency blocks, by key name: fio 3.x writes nanoseconds (`clat_ns`),
#: fio 2.x microseconds (`clat`). Values are *divided* by these: division by a power of ten
#: is correctly rounded, so 7584 ns becomes exactly 7.584e-06 s (multiplying by 1e-9 does not).
_NS_PER_S = 1e9
_US_PER_S = 1e6
#: fio's counters are uint64: a larger count is not fio output (and would overflow floats
#: once summed over runs).
_COUNT_LIMIT = 2**64


def parse_file(path: str | Path) -> Run:
    """Read one fio output file."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise FioOutputError(str(path), f"cannot read: {exc.strerror or exc}") from None
    return parse_text(data.decode("utf-8", errors="replace"), source=str(path))


def parse_text(text: str, source: str = "<stdin>") -> Run:
    """Find the last complete fio document in `text` and build the model from it."""
    document = _find_fio_document(text, source)
    return _build_run(document, source)


def parse_text_with_raw(
    text: str, source: str = "<stdin>"
) -> tuple[Run, dict[str, Any], list[dict[str, Any]]]:
    """The run, fio's raw document, and its raw job objects in the order of `run.jobs`.

    For readers that need what fio wrote but the model does not keep (per-job options,
    timestamp_ms), such as the offline report; the exporter itself needs only `parse_text`.
    """
    document = _find_fio_document(text, source)
    run = _build_run(document, source)
    return run, document, [job for _, job in _job_entries(document, source)]


def read_document(text: str, source: str = "<stdin>") -> dict[str, Any]:
    """fio's raw document in `text`, found and checked as `parse_text` finds and checks it.

    For readers of parts the model does not keep apart, such as each server's own entries
    of client/server output (`fioprobe.fio.clientserver`).
    """
    return _find_fio_document(text, source)


def run_of_entries(document: dict[str, Any], entries: list[dict[str, Any]], source: str) -> Run:
    """The run of `document` made of the given job objects only (each read as any job is)."""
    return _build_run(document, source, list(enumerate(entries)))


# --- finding the document -----------------------------------------------------------------


def _is_fio_document(obj: object) -> bool:
    return isinstance(obj, dict) and (
        isinstance(obj.get("jobs"), list) or isinstance(obj.get("client_stats"), list)
    )


#: The common case: the whole text is one JSON document (with whitespace around it).
_STARTS_WITH_BRACE = re.compile(r"\s*\{")


def _whole_document(text: str) -> dict[str, Any] | None:
    """Fast path: decode a clean fio file whole with orjson (several times faster than json).

    Anything orjson refuses (text around the JSON, several documents, integers beyond 64
    bits, deep nesting) returns None and goes through the tolerant scan, which gives the
    same result or the same error as before: the fast path never decides an error itself.
    """
    # Only the last characters are looked at for the closing brace: a regex search for
    # "}\s*$" would scan the whole text. Longer trailing whitespace takes the slow path.
    if not (_STARTS_WITH_BRACE.match(text) and text[-256:].rstrip().endswith("}")):
        return None
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return document if _is_fio_document(document) else None


def _find_fio_document(text: str, source: str) -> dict[str, Any]:
    whole = _whole_document(text)
    if whole is not None:
        return strict_if_client_server(whole, text, len(text) - len(text.lstrip()), source)
    found: dict[str, Any] | None = None
    found_at = 0
    first_error: json.JSONDecodeError | None = None
    saw_json = False
    position = 0
    while (match := DOCUMENT_START.search(text, position)) is not None:
        start = match.end() - 1
        position = start + 1
        try:
            obj, end = DECODER.raw_decode(text, start)
        except json.JSONDecodeError as exc:
            if first_error is None:
                first_error = exc
            continue
        except RecursionError:
            raise FioOutputError(source, "JSON nested too deeply to be fio output") from None
        saw_json = True
        position = end  # skip everything inside the decoded document
        if _is_fio_document(obj):
            # With --status-interval fio writes one document per interval; the last
            # complete one holds the final totals.
            found, found_at = obj, start
    if found is not None:
        return strict_if_client_server(found, text, found_at, source)
    if first_error is not None:
        raise FioOutputError(source, _describe_decode_error(text, first_error)) from None
    if saw_json:
        raise FioOutputError(source, 'JSON found, but not fio output (no "jobs" list)')
    raise FioOutputError(source, "no fio JSON output found" + _fio_said(text))


def _describe_decode_error(text: str, exc: json.JSONDecodeError) -> str:
    if not text[exc.pos :].strip():
        line = text.count("\n", 0, exc.pos) + 1
        return f"fio JSON is truncated: the output ends at line {line} before the document closes"
    return f"invalid fio JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"


def _fio_said(text: str) -> str:
    """Quote fio's own error line, if any: it usually explains why there is no JSON."""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("fio:") or "error" in line.lower():
            return f"; fio said: {line[:200]!r}"
    if text.strip():
        return " (plain-text output? run fio with --output-format=json+)"
    return " (empty input)"


# --- building the model -------------------------------------------------------------------


#: A json+ bin key as fio writes it (`"%llu"` of a latency): plain ASCII decimal digits, no
#: sign, no leading zero, no more than uint64 holds. int() alone would take "-5", "+5",
#: " 5", "1_000" and other scripts' digits, and a negative latency sorts before every bound.
_BIN_KEY = re.compile(r"0|[1-9][0-9]{0,19}")


def _bin_latency(key: str) -> int:
    """A bin key's latency, or ValueError for anything but fio's plain decimal form."""
    if _BIN_KEY.fullmatch(key) is None:
        raise ValueError(key)
    value = int(key)
    if value >= _COUNT_LIMIT:
        raise ValueError(key)
    return value


class _KeyMemo(dict[str, Any]):
    """JSON key -> converted value, converting each distinct key once (on its first lookup).

    fio draws json+ bin values from one fixed table and prints the same percentile list in
    every block, so the 64 jobs of a large file repeat the same few thousand keys. A lookup
    here is several times cheaper than `int()` or `float()` of the string, and
    `map(memo.__getitem__, keys)` stays one C-level pass: only a new key calls back into
    Python, through `__missing__`. A key that does not convert raises ValueError.
    """

    __slots__ = ("convert",)

    def __init__(self, convert: Callable[[str], Any]) -> None:
        super().__init__()
        self.convert = convert

    def __missing__(self, key: str) -> Any:
        value = self[key] = self.convert(key)
        return value


class _Document:
    """What every object of one fio document shares: its source name and two key memos."""

    __slots__ = ("bin_keys", "percent_keys", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        self.bin_keys = _KeyMemo(_bin_latency)
        self.percent_keys = _KeyMemo(float)


class _Fields:
    """Typed access to one JSON object, raising FioOutputError with the field's path.

    The path ("jobs[3].write.clat_ns") is built only for an error message: a large file
    has thousands of these objects and almost never needs it.
    """

    __slots__ = ("document", "key", "obj", "parent")

    def __init__(
        self, obj: Mapping[str, Any], document: _Document, parent: _Fields | None, key: str
    ) -> None:
        self.obj = obj
        self.document = document
        self.parent = parent
        self.key = key

    @property
    def path(self) -> str:
        return self.key if self.parent is None else f"{self.parent.path}.{self.key}"

    @property
    def source(self) -> str:
        return self.document.source

    def fail(self, key: str, problem: str) -> FioOutputError:
        # Keys come from the input: a newline or lone surrogate would break the one-line message.
        name = key if key.isprintable() else repr(key)
        return FioOutputError(self.source, f"{self.path}.{name} {problem}")

    def number(self, key: str, default: float = 0.0) -> float:
        value = self.obj.get(key, default)
        # Fast path for the common case (a few thousand calls per large file).
        if type(value) is float and value - value == 0.0:  # finite: inf - inf and nan - nan are nan
            return value
        if type(value) is int and -_COUNT_LIMIT < value < _COUNT_LIMIT:
            return float(value)
        if isinstance(value, bool) or not isinstance(value, int | float):
            # fio writes some numbers as strings in options, never in stats.
            raise self.fail(key, f"is not a number: {value!r:.60}")
        if value != value or value in (float("inf"), float("-inf")):
            raise self.fail(key, "is not finite")
        try:
            return float(value)
        except OverflowError:  # a JSON integer beyond any float
            raise self.fail(key, "is out of range") from None

    def count(self, key: str, default: int = 0) -> int:
        value = self.number(key, default)
        if value < 0:
            raise self.fail(key, f"is negative: {value:g}")
        if value >= _COUNT_LIMIT:
            raise self.fail(key, f"is beyond fio's 64-bit counters: {value:g}")
        return int(value)

    def mapping(self, key: str) -> dict[str, Any] | None:
        """The JSON object under `key` as it is (no wrapper: the hot blocks need none)."""
        value = self.obj.get(key)
        if value is None or isinstance(value, dict):
            return value
        raise self.fail(key, "is not an object")

    def child(self, key: str) -> _Fields | None:
        value = self.mapping(key)
        return None if value is None else _Fields(value, self.document, self, key)


def _build_run(
    doc: dict[str, Any], source: str, entries: list[tuple[int, dict[str, Any]]] | None = None
) -> Run:
    version = doc.get("fio version", "unknown")
    if not _is_text(version):
        raise FioOutputError(source, '"fio version" is not a string')
    if entries is None:
        entries = _job_entries(doc, source)
    if not entries:
        raise FioOutputError(source, "fio output has no jobs")
    legacy_kib = _major_version(version) < 3
    document = _Document(source)
    jobs = [
        _build_job(_Fields(entry, document, None, f"jobs[{index}]"), legacy_kib)
        for index, entry in entries
    ]
    timestamp = doc.get("timestamp")
    if timestamp is not None and (
        isinstance(timestamp, bool)
        or not isinstance(timestamp, int | float)
        or not 0 <= timestamp < 2**53  # also NaN, infinities and integers beyond a float
    ):
        raise FioOutputError(source, f"timestamp is not a Unix time: {timestamp!r:.60}")
    options = doc.get("global options")
    return Run(
        source=source,
        fio_version=version,
        timestamp=float(timestamp) if timestamp else None,
        jobs=_unique_names(jobs),
        options=_string_options(options),
    )


def _job_entries(doc: dict[str, Any], source: str) -> list[tuple[int, dict[str, Any]]]:
    """The job objects to read, with their index in the original list.

    In client/server output (fio writes its list under "client_stats" there, never "jobs"),
    "All clients" entries aggregate every server; when present they are the answer,
    otherwise each client's entry stands for itself. In plain output "All clients" is only
    a job name a user chose, and every job stands for itself.
    """
    entries = doc.get("jobs")
    client_server = entries is None
    if client_server:
        entries = doc.get("client_stats")
    if not isinstance(entries, list):
        raise FioOutputError(source, '"jobs" is not a list')
    indexed = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise FioOutputError(source, f"jobs[{index}] is not an object")
        indexed.append((index, entry))
    if not client_server:
        return indexed
    aggregate = [(i, e) for i, e in indexed if e.get("jobname") == "All clients"]
    return aggregate or indexed


def _build_job(fields: _Fields, legacy_kib: bool) -> Job:
    entry = fields.obj
    name = entry.get("jobname", "")
    if not _is_text(name):
        raise fields.fail("jobname", "is not a string")
    hostname = entry.get("hostname")
    ops: dict[str, OpStats] = {}
    for op in OPERATIONS:
        section = fields.child(op)
        if section is not None:
            ops[op] = _build_op(op, section, legacy_kib)
    job_runtime_ms = fields.number("job_runtime", 0.0)
    runtime_s = job_runtime_ms / 1000 if job_runtime_ms else fields.number("elapsed", 0.0)
    if not runtime_s and ops:
        runtime_s = max(stats.runtime_s for stats in ops.values())
    return Job(
        name=name,
        fio_name=name,
        error=int(fields.number("error", 0)),
        runtime_s=runtime_s,
        ops=ops,
        hostname=hostname if isinstance(hostname, str) else None,
    )


def _build_op(op: str, section: _Fields, legacy_kib: bool) -> OpStats:
    if op == "sync":
        latency, kind = _latency(section, ("lat_ns", "lat")), "sync"
        # fio 3.33 writes sync.total_ios = 0 even when it timed N fdatasyncs.
        total_ios = section.count("total_ios", 0)
        if latency is not None and latency.samples:
            total_ios = max(total_ios, latency.samples)
        return OpStats(op, 0, 0.0, 0.0, 0.0, total_ios, latency, kind)

    if "io_kbytes" in section.obj or not legacy_kib:
        io_bytes = section.count("io_bytes")
    else:
        io_bytes = section.count("io_bytes") * 1024  # fio 2.x wrote KiB under "io_bytes"
    if "bw_bytes" in section.obj:
        bandwidth = section.number("bw_bytes")
    else:
        bandwidth = section.number("bw") * 1024  # "bw" is KiB/s in every version
    total_ios = section.count("total_ios", 0)
    if not (total_ios or io_bytes or section.number("iops")):
        # An idle direction: fio still writes all-zero latency blocks; nothing to read.
        return OpStats(op, 0, bandwidth, 0.0, section.number("runtime") / 1000, 0, None, "clat")
    latency = _latency(section, ("clat_ns", "clat"))
    kind = "clat"
    if latency is None or not latency.has_data:
        fallback = _latency(section, ("lat_ns", "lat"))
        if fallback is not None and fallback.has_data:
            latency, kind = fallback, "lat"
    return OpStats(
        op=op,
        io_bytes=io_bytes,
        bandwidth_bytes_per_second=bandwidth,
        iops=section.number("iops"),
        runtime_s=section.number("runtime") / 1000,
        total_ios=total_ios,
        latency=latency,
        latency_kind=kind,
    )


def _latency(section: _Fields, keys: tuple[str, str]) -> LatencyStats | None:
    """Read the first present latency block of `keys` (ns key first, then fio 2.x usec)."""
    for key, per_second in zip(keys, (_NS_PER_S, _US_PER_S), strict=True):
        block = section.child(key)
        if block is None:
            continue
        samples = block.obj.get("N")
        if samples is not None:
            samples = block.count("N")
        low, high, mean = (_latency_value(block, k, per_second) for k in ("min", "max", "mean"))
        bins = _bins(block, per_second)
        if samples is not None and bins is not None and (binned := bins.total()) != samples:
            # fio counts every sample in N and in one bin: the two disagree only in a file
            # edited or broken after fio wrote it, and the histogram pushed from the bins
            # would not match the sample count pushed beside it.
            raise FioOutputError(
                block.source,
                f"{block.path}.N is {samples} but its bins hold {binned} samples",
            )
        return LatencyStats(
            min_s=low,
            max_s=high,
            mean_s=mean,
            stddev_s=block.number("stddev", 0.0) / per_second,
            samples=samples,
            percentiles=_percentiles(block, per_second),
            bins_ns=bins,
        )
    return None


#: No single IO takes a day: a larger latency is a broken file, and summed into cumulative
#: totals it would poison them for good.
_MAX_LATENCY_S = 86400.0


def _latency_value(block: _Fields, key: str, per_second: float) -> float:
    value = block.number(key) / per_second
    if not 0 <= value <= _MAX_LATENCY_S:
        raise block.fail(key, f"is not a plausible latency: {value:g} s")
    return value


def _percentiles(block: _Fields, per_second: float) -> dict[float, float]:
    raw = block.mapping("percentile")
    if raw is None:
        return {}
    values = list(raw.values())
    try:
        percents = list(map(block.document.percent_keys.__getitem__, raw))
        valid = set(map(type, values)) <= {int, float} and all(map(math.isfinite, values))
    except (ValueError, OverflowError):  # a key that is no number; an integer beyond floats
        valid = False
    if not valid:  # slow path, only to name the offending entry
        fields = _Fields(raw, block.document, block, "percentile")
        for key in raw:
            try:
                float(key)
            except ValueError:
                raise fields.fail(key, "is not a percentile") from None
            fields.number(key)
    seconds = map(per_second.__rtruediv__, values)  # each value / per_second, at C speed
    in_range = bool(percents) and min(percents) > 0 and max(percents) <= 100
    if in_range and all(map(math.isfinite, percents)):  # fio's usual case
        return dict(zip(percents, seconds, strict=True))
    # "0.00": 0 entries are unused slots (fio 2.1/3.1); "not 0 < p <= 100" also drops NaN.
    return {p: v for p, v in zip(percents, seconds, strict=True) if 0 < p <= 100}


def _bins(block: _Fields, per_second: float) -> Bins | None:
    raw = block.mapping("bins")
    if raw is None:
        return None
    to_ns = round(_NS_PER_S / per_second)  # 1 for *_ns blocks, 1000 for fio 2.x usec blocks
    # A json+ block has up to ~1,800 bins per direction and job: convert them with C-level
    # map/array calls and validate the counts in bulk; fall back to a per-bin loop only to
    # name the offending bin in the error.
    counts = list(raw.values())
    if not _valid_counts(counts):
        fields = _Fields(raw, block.document, block, "bins")
        for key, value in raw.items():
            if type(value) is not int or not 0 <= value < _COUNT_LIMIT:
                raise fields.fail(key, f"is not a count: {value!r:.40}")
    try:
        latencies = list(map(block.document.bin_keys.__getitem__, raw))
    except ValueError:  # see _BIN_KEY: only fio's own plain decimal form is a latency
        path = f"{block.path}.bins"
        raise FioOutputError(block.source, f"{path} has a key that is not a latency") from None
    if to_ns != 1:
        latencies = [latency * to_ns for latency in latencies]
    if latencies != sorted(latencies):  # fio writes them ascending; anything else is sorted
        pairs = sorted(zip(latencies, counts, strict=True))
        latencies, counts = [p[0] for p in pairs], [p[1] for p in pairs]
    return Bins(latencies, counts)


def _valid_counts(counts: list[Any]) -> bool:
    """Every count a JSON integer within fio's uint64 counters, checked at C speed."""
    if not set(map(type, counts)) <= {int}:  # also refuses true/false (bool is not int here)
        return False
    try:
        array("Q", counts)  # OverflowError below 0 or at 2**64 and beyond
    except OverflowError:
        return False
    return True


def _unique_names(jobs: list[Job]) -> list[Job]:
    """Give jobs fio reported under one name (numjobs without group_reporting) `.0`, `.1`...

    A generated name never equals another job's: with jobs `a`, `a` and `a.0`, the two
    `a` become `a.1` and `a.2`, so every job keeps its own series (a push with two equal
    series would be refused by the Pushgateway, and with it the whole run).
    """
    counts: dict[str, int] = {}
    for job in jobs:
        counts[job.fio_name] = counts.get(job.fio_name, 0) + 1
    taken = {job.fio_name for job in jobs if counts[job.fio_name] == 1}
    next_index: dict[str, int] = {}
    unique = []
    for job in jobs:
        if counts[job.fio_name] == 1:
            unique.append(job)
            continue
        index = next_index.get(job.fio_name, 0)
        while f"{job.fio_name}.{index}" in taken:
            index += 1
        name = f"{job.fio_name}.{index}"
        taken.add(name)
        next_index[job.fio_name] = index + 1
        unique.append(
            Job(
                name=name,
                fio_name=job.fio_name,
                error=job.error,
                runtime_s=job.runtime_s,
                ops=job.ops,
                hostname=job.hostname,
            )
        )
    return unique


def _is_text(value: object) -> bool:
    """A str that UTF-8 can carry: JSON's "\\ud800" escapes decode to lone surrogates, which
    no label of a push (UTF-8 text) can hold."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _major_version(version: str) -> int:
    match = re.search(r"(\d+)\.\d+", version)
    return int(match.group(1)) if match else 3


def _string_options(options: object) -> dict[str, str]:
    if isinstance(options, dict):
        return {str(k): str(v) for k, v in options.items()}
    return {}  # fio 3.43 client/server writes a list of per-client objects here
