"""Fuzzing of the fio output reader and the configuration loader (hypothesis).

Why: a monitoring probe reads whatever fio (or a pod log, or an archive) hands it, and a
configuration a person typed. Either may be truncated, edited or hostile. The contract is
that every input ends in a parsed result or the documented error (`FioOutputError` for fio
output, `ConfigError` for configuration): nothing else escapes, so the CLI always exits
with its documented status and a one-line message instead of a traceback.

Inputs:
- every file of tests/data/fio-corpus, mutated as text (truncated, spans deleted, duplicated
  or replaced, hostile snippets inserted) and as a JSON tree (any node replaced by a hostile
  value: huge integers, NaN, infinities, wrong types, deep nesting; keys removed or added);
- fio-like documents generated from scratch (jobs, op sections, latency blocks,
  percentiles, json+ bins) with hostile leaves;
- arbitrary text and bytes (decoded as the CLI decodes them);
- configurations generated as structures and dumped as YAML, valid configurations mutated
  as text, and arbitrary bytes, each loaded from a temporary file with `load_config`.

A parsed fio result must also go through what `fioprobe push` does next (merge into
cumulative totals, state JSON round trip, metric rendering): a result the reader accepts
but the exporter chokes on would be a crash too.

    .venv/bin/python bench/fuzz.py [--examples 100000] [--seed 0]

prints the number of inputs per target and outcome, and every distinct crash found. The
test suite (tests/bench/test_fuzz.py) runs the same properties with a few thousand examples.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import yaml
from fioprobe.fio.model import Run
from fioprobe.fio.parse import FioOutputError, parse_text
from fioprobe.metrics.collector import ProbeOutcome, registry_for
from fioprobe.metrics.totals import GroupTotals, merge_run
from fioprobe.publish.state import totals_from_json
from fioprobe.target.config import Config, ConfigError, load_config
from fioprobe.target.volumes import VOLUME_TYPES
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from prometheus_client import generate_latest

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "data" / "fio-corpus"

# --- the corpus ---------------------------------------------------------------------------


def corpus_texts() -> list[tuple[str, str]]:
    """(name, text) of every corpus file, decoded as the CLI decodes input."""
    files = sorted(p for p in CORPUS.iterdir() if p.name != "SOURCES.tsv")
    return [(p.name, p.read_bytes().decode("utf-8", errors="replace")) for p in files]


def corpus_documents() -> list[tuple[str, dict[str, Any]]]:
    """The JSON document inside each corpus file that has one (the first decodable object)."""
    decoder = json.JSONDecoder()
    documents = []
    for name, text in corpus_texts():
        for start in (i for i, ch in enumerate(text) if ch == "{"):
            try:
                obj, _ = decoder.raw_decode(text, start)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                documents.append((name, obj))
                break
    return documents


CORPUS_TEXTS = corpus_texts()
CORPUS_DOCUMENTS = corpus_documents()

# --- hostile values -----------------------------------------------------------------------

#: Leaves that broke or could break numeric code: overflow on float(), NaN, infinities,
#: negatives, booleans where numbers belong, numbers as strings, huge strings.
SPECIAL_VALUES: list[object] = [
    10**400,
    -(10**400),
    2**63,
    2**64 + 1,
    -1,
    0,
    1e308,
    -1e308,
    5e-324,
    float("nan"),
    float("inf"),
    float("-inf"),
    True,
    False,
    None,
    "",
    "0",
    "1e400",
    "NaN",
    "nan",
    "-1",
    "\n",
    "x" * 5000,
    "9" * 5000,
    [],
    {},
    [1, 2, 3],
    {"N": 1},
]

json_leaves = st.one_of(
    st.sampled_from(SPECIAL_VALUES),
    st.integers(),
    st.integers(min_value=-(10**500), max_value=10**500),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.booleans(),
    st.none(),
)
json_values = st.recursive(
    json_leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=8), children, max_size=4),
    ),
    max_leaves=8,
)
#: Keys fio really writes: a hostile value under a known key reaches deep code.
FIO_KEYS = [
    "fio version", "timestamp", "time", "global options", "jobs", "client_stats", "jobname",
    "groupid", "error", "job_runtime", "elapsed", "hostname", "read", "write", "trim", "sync",
    "mixed", "io_bytes", "io_kbytes", "bw_bytes", "bw", "iops", "runtime", "total_ios",
    "clat_ns", "lat_ns", "slat_ns", "clat", "lat", "min", "max", "mean", "stddev", "N",
    "percentile", "bins", "1.000000", "50.000000", "99.000000", "99.900000", "100.000000",
    "0.00", "nan", "inf", "-5", "1000", "All clients",
]  # fmt: skip
fio_keys = st.one_of(st.sampled_from(FIO_KEYS), st.text(max_size=10))


# --- fio output inputs --------------------------------------------------------------------


def _paths(node: object, prefix: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Every path to a node of a JSON tree (dict keys and list indices)."""
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*prefix, index))
    return found


def _copy(node: object) -> object:
    if isinstance(node, dict):
        return {k: _copy(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_copy(v) for v in node]
    return node


@st.composite
def tree_mutations(draw: st.DrawFn) -> str:
    """A corpus document with a few nodes replaced, removed or added, dumped as JSON."""
    _, document = draw(st.sampled_from(CORPUS_DOCUMENTS))
    document = _copy(document)
    paths = _paths(document)
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(paths))
        if not path:
            continue
        parent = document
        for step in path[:-1]:
            parent = parent[step]
        last = path[-1]
        action = draw(st.sampled_from(["replace", "replace", "remove", "add", "wrap"]))
        try:
            if action == "replace":
                parent[last] = _copy(draw(json_values))
            elif action == "remove":
                del parent[last]
            elif action == "add" and isinstance(parent, dict):
                parent[draw(fio_keys)] = _copy(draw(json_values))
            elif action == "wrap":
                parent[last] = draw(st.sampled_from([[parent[last]], {"x": parent[last]}]))
        except (KeyError, IndexError, TypeError):
            continue  # the path went away with an earlier mutation
        paths = _paths(document)
    text = json.dumps(document, indent=draw(st.sampled_from([None, 1, 2])))
    prefix = draw(st.sampled_from(["", "fio: terminating on signal 2\n", "x\n", "{\n"]))
    suffix = draw(st.sampled_from(["", "\n", "\nRun status group 0\n", "\n{", "\n{}"]))
    return prefix + text + suffix


SNIPPETS = [
    "{", "}", "[", "]", ",", ":", '"', "\\", "\n{", "NaN", "Infinity", "-Infinity", "1e400",
    "9" * 400, '"jobs": []', '"jobs": [{}]', "null", "true", "\x00", "\ufffd", "\ud800",
    '{"jobs": [{"sync": {"lat_ns": {"N": 1e999}}}]}', "[" * 2000, "{" * 50,
]  # fmt: skip


@st.composite
def text_mutations(draw: st.DrawFn) -> str:
    """A corpus file edited as text: truncated, spans cut, duplicated or replaced."""
    _, text = draw(st.sampled_from(CORPUS_TEXTS))
    for _ in range(draw(st.integers(1, 3))):
        if not text:
            break
        at = draw(st.integers(0, len(text)))
        span = draw(st.integers(0, min(200, len(text) - at)))
        action = draw(st.sampled_from(["truncate", "delete", "insert", "duplicate", "replace"]))
        if action == "truncate":
            text = text[:at]
        elif action == "delete":
            text = text[:at] + text[at + span :]
        elif action == "insert":
            snippet = draw(st.one_of(st.sampled_from(SNIPPETS), st.text(max_size=8)))
            text = text[:at] + snippet + text[at:]
        elif action == "duplicate":
            text = text[: at + span] + text[at : at + span] + text[at + span :]
        else:
            snippet = draw(st.one_of(st.sampled_from(SNIPPETS), st.text(max_size=8)))
            text = text[:at] + snippet + text[at + span :]
    return text


latency_blocks = st.fixed_dictionaries(
    {},
    optional={
        "min": json_leaves,
        "max": json_leaves,
        "mean": json_leaves,
        "stddev": json_leaves,
        "N": json_leaves,
        "percentile": st.dictionaries(fio_keys, json_leaves, max_size=5),
        "bins": st.dictionaries(
            st.one_of(st.integers(-10, 10**12).map(str), st.text(max_size=6)),
            json_leaves,
            max_size=5,
        ),
    },
)
op_sections = st.fixed_dictionaries(
    {},
    optional={
        key: json_leaves
        for key in ("io_bytes", "io_kbytes", "bw_bytes", "bw", "iops", "runtime", "total_ios")
    }
    | {key: latency_blocks for key in ("clat_ns", "lat_ns", "clat", "lat")},
)
job_entries = st.fixed_dictionaries(
    {},
    optional={
        "jobname": st.one_of(st.sampled_from(["job", "All clients", ""]), json_leaves),
        "error": json_leaves,
        "job_runtime": json_leaves,
        "elapsed": json_leaves,
        "hostname": json_leaves,
    }
    | {
        op: st.one_of(op_sections, json_leaves) for op in ("read", "write", "trim", "sync", "mixed")
    },
)


@st.composite
def generated_documents(draw: st.DrawFn) -> str:
    """A fio-like document built from scratch with hostile leaves."""
    document = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "fio version": st.one_of(
                    st.sampled_from(["fio-3.33", "fio-2.1.4", "fio-3", "fio-99999999999999.1"]),
                    json_leaves,
                ),
                "timestamp": json_leaves,
                "global options": json_values,
                "jobs": st.one_of(st.lists(job_entries, max_size=3), json_leaves),
                "client_stats": st.lists(job_entries, max_size=2),
            },
        )
    )
    return json.dumps(document)


raw_inputs = st.one_of(
    st.text(max_size=300),
    st.binary(max_size=300).map(lambda b: b.decode("utf-8", errors="replace")),
)
fio_inputs = st.one_of(tree_mutations(), text_mutations(), generated_documents(), raw_inputs)


def check_fio_output(text: str) -> str:
    """The property: a Run the exporter can publish, or a one-line FioOutputError.

    Returns "parsed" or "error"; anything else propagates and is a finding.
    """
    try:
        run = parse_text(text, source="fuzz")
    except FioOutputError as exc:
        if "\n" in str(exc):
            raise AssertionError(f"FioOutputError message is not one line: {exc!s:.300}") from None
        return "error"
    if not isinstance(run, Run) or not run.jobs:
        raise AssertionError(f"parse_text returned {run!r:.200}")
    # What `fioprobe push` does next with an accepted result: merge, save, render.
    outcome = ProbeOutcome(run, success=not run.failed_jobs, duration_seconds=1.0)
    totals = GroupTotals()
    merge_run(totals, run, success=outcome.success, finished_at=run.timestamp or 0.0)
    merge_run(totals, run, success=outcome.success, finished_at=run.timestamp or 0.0)
    saved = json.loads(json.dumps(totals.to_json()))
    totals_from_json(saved, "fuzz-state")
    generate_latest(registry_for(outcome, totals, {"storageclass": "f", "profile": "p"}))
    return "parsed"


# --- configuration inputs -----------------------------------------------------------------

PROFILES = sorted(p.stem for p in (REPO / "jobs").glob("*.fio"))
VALID_CONFIG = """\
pushgateway:
  url: https://pgw:9091
  username_file: /etc/fioprobe/auth/username
  password_file: /etc/fioprobe/auth/password
  ca_file: /etc/fioprobe/tls/ca.crt
  timeout_seconds: 10
  attempts: 3
targets:
  - name: gp2-standard
    directory: /probe
    node_local: false
    volume: {type: gp2, size: 100Gi, provisioner: ebs.csi.aws.com, dedicated: true}
    timeout_seconds: 120
    profiles:
      - etcd-fsync
      - {name: burst-ceiling, runtime: 3}
  - name: etcd
    directory: /var/lib/fioprobe
    node_local: true
    state_dir: /var/lib/fioprobe-state
    volume: {type: io2, iops: 3000, size: 20Gi}
    profiles: [randread-iops, {name: seqwrite-bw, size: 8m, io_size: 8m, runtime: "5s"}]
"""

yaml_leaves = st.one_of(
    st.sampled_from(
        [
            *SPECIAL_VALUES[:12],
            "100Gi", "1e400Gi", "9" * 400, "9" * 400 + "Gi", "-1Gi", "0.5Ti", "١٠٠Gi",
            "http://x", "https://x", "ftp://x", "/probe", "relative", "../x", *PROFILES,
            "etcd-fsync\n", *VOLUME_TYPES,
            "3s", "500ms", "9" * 400, "1h", "4m", "1g", "-3", "0",
        ]
    ),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=10),
    st.booleans(),
    st.none(),
)  # fmt: skip
yaml_values = st.recursive(
    yaml_leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.text(max_size=6), children, max_size=3),
    ),
    max_leaves=6,
)


GATEWAY_KEYS = ("username_file", "password_file", "ca_file", "cert_file", "key_file",
                "timeout_seconds", "attempts", "extra")  # fmt: skip


def _maybe(values: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return st.one_of(values, yaml_values)


profile_entries = st.one_of(
    st.sampled_from(PROFILES),
    st.fixed_dictionaries(
        {"name": _maybe(st.sampled_from(PROFILES))},
        optional={
            "size": _maybe(st.sampled_from(["1m", "4m", "64m", "1g", "9" * 30])),
            "io_size": _maybe(st.sampled_from(["1m", "4m"])),
            "runtime": _maybe(st.sampled_from([1, 3, "5s", "500ms", "2m", "9" * 400])),
            "rw": yaml_leaves,
        },
    ),
    yaml_values,
)
volumes = st.fixed_dictionaries(
    {},
    optional={
        "type": _maybe(st.sampled_from(VOLUME_TYPES)),
        "size": _maybe(st.sampled_from(["100Gi", "1Ti", "500Mi", 1000, "9" * 400])),
        "iops": _maybe(st.sampled_from([100, 3000, 64000, -5, 1e400])),
        "throughput": _maybe(st.sampled_from(["125Mi", "1Gi"])),
        "provisioner": yaml_leaves,
        "dedicated": _maybe(st.booleans()),
    },
)
targets = st.fixed_dictionaries(
    {
        "name": _maybe(st.sampled_from(["gp2", "gp3-fast", "etcd", "a.b_c"])),
        "directory": _maybe(st.sampled_from(["/probe", "/var/lib/x"])),
        "profiles": _maybe(st.lists(profile_entries, max_size=3)),
    },
    optional={
        "node_local": _maybe(st.booleans()),
        "volume": _maybe(volumes),
        "timeout_seconds": _maybe(st.sampled_from([1, 60.5, 0, -1])),
        "state_dir": yaml_leaves,
        "unknown_key": yaml_leaves,
    },
)
configs = st.fixed_dictionaries(
    {
        "pushgateway": _maybe(
            st.fixed_dictionaries(
                {"url": _maybe(st.sampled_from(["http://pgw:9091", "https://pgw"]))},
                optional={key: yaml_leaves for key in GATEWAY_KEYS},
            )
        ),
        "targets": _maybe(st.lists(targets, max_size=3)),
    },
    optional={"extra": yaml_values},
)


@st.composite
def generated_configs(draw: st.DrawFn) -> bytes:
    flow = draw(st.sampled_from([None, True, False]))
    text = yaml.safe_dump(draw(configs), default_flow_style=flow, allow_unicode=True)
    return text.encode("utf-8")


YAML_SNIPPETS = [
    ": ", "- ", "\n  ", "\t", "{", "}", "[", "]", "&a ", "*a", "!!python/object:os.system ",
    "? [a, b]\n: 1\n", "? {a: 1}\n: 2\n", "!!binary ", "%YAML 1.1\n---\n", "---\n", "...\n",
    "<<: *a\n", "'", '"', "#", "|\n", ">\n", "[" * 200, "- " * 100, "name: x\nname: y\n",
    "\x00", "\ufeff", "1e400", "9" * 400, ".inf", ".nan", "~", "null", "yes", "0x10", "0o7",
]  # fmt: skip


@st.composite
def config_text_mutations(draw: st.DrawFn) -> bytes:
    text = VALID_CONFIG
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        span = draw(st.integers(0, min(60, len(text) - at)))
        snippet = draw(st.one_of(st.sampled_from(YAML_SNIPPETS), st.text(max_size=6)))
        action = draw(st.sampled_from(["truncate", "delete", "insert", "replace", "duplicate"]))
        if action == "truncate":
            text = text[:at]
        elif action == "delete":
            text = text[:at] + text[at + span :]
        elif action == "insert":
            text = text[:at] + snippet + text[at:]
        elif action == "replace":
            text = text[:at] + snippet + text[at + span :]
        else:
            text = text[: at + span] + text[at : at + span] + text[at + span :]
    raw = text.encode("utf-8", errors="surrogatepass")
    if draw(st.booleans()):
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(st.binary(max_size=4)) + raw[at:]
    return raw


config_inputs = st.one_of(generated_configs(), config_text_mutations(), st.binary(max_size=200))


class ConfigChecker:
    """Writes each input to one temporary file (load_config reads a path) and loads it."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "fuzz-config.yaml"

    def __call__(self, raw: bytes) -> str:
        self.path.write_bytes(raw)
        try:
            config = load_config(self.path)
        except ConfigError as exc:
            if not str(exc).strip():
                raise AssertionError("ConfigError without a message") from None
            return "error"
        if not isinstance(config, Config) or not config.targets:
            raise AssertionError(f"load_config returned {config!r:.200}")
        gateway = config.pushgateway
        if not (0 < gateway.timeout_seconds < math.inf and gateway.attempts >= 1):
            raise AssertionError(f"bad Pushgateway settings accepted: {gateway!r:.300}")
        for target in config.targets:
            if not all(math.isfinite(v) for v in _numbers(target)):
                raise AssertionError(f"non-finite number accepted: {target!r:.300}")
        return "loaded"


def _numbers(target: Any) -> list[float]:
    """Numeric settings of a loaded target; accepting inf/NaN there would be silently wrong."""
    volume = target.volume
    values = [target.timeout_seconds, volume.size_bytes, volume.iops]
    values.append(volume.throughput_bytes_per_second)
    return [float(v) for v in values if v is not None]


# --- the benchmark driver -----------------------------------------------------------------


class Tally:
    """Counts outcomes and keeps one example of each distinct crash (by type and place)."""

    def __init__(self) -> None:
        self.outcomes: collections.Counter[str] = collections.Counter()
        self.crashes: dict[str, tuple[int, str]] = {}

    def run(self, check: Any, value: object) -> None:
        try:
            self.outcomes[check(value)] += 1
        except Exception as exc:  # the finding: anything but the documented error
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            key = f"{type(exc).__name__} at {Path(frame.filename).name}:{frame.lineno}"
            count, example = self.crashes.get(key, (0, repr(value)[:300]))
            self.crashes[key] = (count + 1, example)
            self.outcomes["crash"] += 1


def fuzz(target: str, examples: int, seed_value: int) -> Tally:
    tally = Tally()
    common = settings(
        max_examples=examples,
        database=None,
        deadline=None,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
        phases=["generate"],
    )
    if target == "fio":

        @seed(seed_value)
        @common
        @given(fio_inputs)
        def body(text: str) -> None:
            tally.run(check_fio_output, text)

        body()
    else:
        with tempfile.TemporaryDirectory(prefix="fioprobe-fuzz-") as tmp:
            checker = ConfigChecker(Path(tmp))

            @seed(seed_value)
            @common
            @given(config_inputs)
            def body(raw: bytes) -> None:
                tally.run(checker, raw)

            body()
    return tally


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=100_000, help="inputs per target")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target", choices=["fio", "config", "both"], default="both")
    args = parser.parse_args()
    crashed = False
    for target in ("fio", "config") if args.target == "both" else (args.target,):
        started = time.monotonic()
        tally = fuzz(target, args.examples, args.seed)
        elapsed = time.monotonic() - started
        total = sum(tally.outcomes.values())
        print(
            f"{target}: {total} inputs in {elapsed:.0f} s ({total / elapsed:.0f}/s): "
            + ", ".join(f"{k} {v}" for k, v in sorted(tally.outcomes.items()))
        )
        for key, (count, example) in sorted(tally.crashes.items()):
            crashed = True
            print(f"  CRASH {key} x{count}: {example}")
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
