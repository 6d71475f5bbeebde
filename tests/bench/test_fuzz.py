"""Fuzzing of the fio reader and the configuration loader, short and derandomized.

The strategies and properties live in bench/fuzz.py (the long run, 100,000+ inputs, results
in docs/BENCHMARKS.md); here the same properties run a few thousand examples so that a
regression shows up in CI. Every crash the fuzzer found is kept below as a regression case,
and a real Pushgateway shows that nothing is pushed for an input the reader refuses.
"""

from __future__ import annotations

import json
import tempfile
import urllib.request
from pathlib import Path

import fuzz
import pytest
from conftest import corpus_files, fioprobe
from fioprobe.cli import main as cli
from fioprobe.fio.parse import FioOutputError, parse_text
from fioprobe.target.config import ConfigError, load_config
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from support import services

CI_SETTINGS = settings(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


@settings(CI_SETTINGS, max_examples=3000)
@given(fuzz.fio_inputs)
def test_fio_reader_returns_a_run_or_its_documented_error(text: str) -> None:
    assert fuzz.check_fio_output(text) in ("parsed", "error")


def test_config_loader_returns_a_config_or_its_documented_error() -> None:
    with tempfile.TemporaryDirectory(prefix="fioprobe-fuzz-") as tmp:
        checker = fuzz.ConfigChecker(Path(tmp))

        @settings(CI_SETTINGS, max_examples=1000)
        @given(fuzz.config_inputs)
        def body(raw: bytes) -> None:
            assert checker(raw) in ("loaded", "error")

        body()


def test_the_valid_example_configuration_loads(tmp_path: Path) -> None:
    """The fuzzer's seed configuration is valid, so its mutations start from real YAML."""
    path = tmp_path / "config.yaml"
    path.write_text(fuzz.VALID_CONFIG)
    config = load_config(path)
    assert [t.name for t in config.targets] == ["gp2-standard", "etcd"]


# --- regression cases: each input crashed before the fix ------------------------------------

JOB = {"jobname": "j", "read": {"io_bytes": 4096, "iops": 1, "runtime": 1000, "total_ios": 1}}


def doc(**changes: object) -> str:
    document: dict[str, object] = {"fio version": "fio-3.33", "jobs": [json.loads(json.dumps(JOB))]}
    document.update(changes)
    return json.dumps(document)


def with_latency(block: dict[str, object]) -> str:
    job = json.loads(json.dumps(JOB))
    job["read"]["clat_ns"] = block
    return json.dumps({"fio version": "fio-3.33", "jobs": [job]})


FIO_REGRESSIONS = [
    # OverflowError in float(): a JSON integer beyond any float, in a stat and the timestamp.
    pytest.param(doc(jobs=[{**JOB, "read": {**JOB["read"], "iops": 10**400}}]),
                 "jobs[0].read.iops is out of range", id="huge-int-stat"),
    pytest.param(doc(timestamp=-(10**400)), "timestamp is not a Unix time", id="huge-timestamp"),
    pytest.param(doc(timestamp=float("nan")), "timestamp is not a Unix time", id="nan-timestamp"),
    # OverflowError in the collector: json+ bin counts beyond fio's uint64 counters.
    pytest.param(with_latency({"min": 1, "max": 2, "mean": 1, "bins": {"1000": 10**30}}),
                 "jobs[0].read.clat_ns.bins.1000 is not a count", id="huge-bin-count"),
    pytest.param(with_latency({"min": 1, "max": 2, "mean": 1, "N": 1e300}),
                 "jobs[0].read.clat_ns.N is beyond fio's 64-bit counters", id="huge-N"),
    # ValueError (round(NaN)) in the percentile histogram: "nan" parses as a float.
    pytest.param(with_latency({"min": 1, "max": 10**9, "mean": 5, "N": 10,
                               "percentile": {"nan": 100, "50.000000": 200}}),
                 None, id="nan-percentile-key"),
    # UnicodeEncodeError when rendering the push: "\ud800" decodes to a lone surrogate.
    pytest.param(doc(jobs=[{**JOB, "jobname": "a\ud800"}]), "jobs[0].jobname is not a string",
                 id="lone-surrogate-jobname"),
    pytest.param(doc(**{"fio version": "fio-3.\udfff"}), '"fio version" is not a string',
                 id="lone-surrogate-version"),
    # A newline in a key made the "one line" error message two lines.
    pytest.param(with_latency({"min": 1, "max": 2, "mean": 1, "percentile": {"1\n2": 5}}),
                 "percentile.'1\\n2' is not a percentile", id="newline-in-key"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "message"), FIO_REGRESSIONS)
def test_fio_reader_regressions(text: str, message: str | None) -> None:
    if message is None:
        assert fuzz.check_fio_output(text) == "parsed"
        run = parse_text(text)
        assert set(run.jobs[0].ops["read"].latency.percentiles) == {50.0}  # NaN dropped
        return
    with pytest.raises(FioOutputError) as refused:
        parse_text(text, source="in")
    assert message in str(refused.value)
    assert fuzz.check_fio_output(text) == "error"


VALID_HEAD = "pushgateway: {url: 'http://pgw:9091'}\n"
TARGET = "targets:\n  - {name: t, directory: /probe, profiles: [etcd-fsync]%s}\n"
CONFIG_REGRESSIONS = [
    # UnicodeDecodeError escaped load_config.
    pytest.param(b"pushgateway:\n  url: \x82\xebM\n", "not UTF-8 text (bad byte at offset 20)",
                 id="not-utf8"),
    # OverflowError in float() of a huge YAML integer, and in a huge size.
    pytest.param(b"pushgateway: {url: 'http://x', timeout_seconds: 1" + b"0" * 400 + b"}\n"
                 + (TARGET % "").encode(), "timeout_seconds: must be a finite", id="huge-int"),
    pytest.param((VALID_HEAD + TARGET % (", volume: {type: gp2, size: " + "9" * 400 + "Gi}"))
                 .encode(), "size: '" + "9" * 20, id="huge-size"),
    # NaN and infinity were accepted as timeouts and IOPS (silently wrong, not a crash).
    pytest.param((VALID_HEAD + TARGET % ", timeout_seconds: .nan").encode(),
                 "timeout_seconds: must be a finite number, got nan", id="nan-timeout"),
    pytest.param((VALID_HEAD + TARGET % ", volume: {type: io2, iops: .inf}").encode(),
                 "iops: must be a finite number, got inf", id="inf-iops"),
    # TypeError: a list as a mapping key reached the duplicate-key check.
    pytest.param(b"pushgateway: {url: 'http://x'}\ntargets:\n  - ? [a, b]\n    : 1\n",
                 "found unhashable key", id="unhashable-key"),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "message"), CONFIG_REGRESSIONS)
def test_config_loader_regressions(tmp_path: Path, raw: bytes, message: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(raw)
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    assert message in str(refused.value)


# --- nothing is pushed for an input that fails ----------------------------------------------


def gateway_groups(gateway: services.Service) -> list[dict[str, object]]:
    with urllib.request.urlopen(gateway.url + "/api/v1/metrics", timeout=5) as response:
        return json.load(response)["data"]


refused_inputs = st.one_of(fuzz.text_mutations(), fuzz.tree_mutations(), fuzz.raw_inputs)


def test_refused_input_pushes_nothing(
    tmp_path: Path, state_dir: Path, pushgateway: services.Service
) -> None:
    """`fioprobe push` with input the reader refuses: exit 3, gateway and state untouched.

    First with the negative corpus through the real CLI process, then with a group already
    present (its push time must not move) and fuzzed refused inputs through `cli.main`.
    """
    state = tmp_path / "state.json"
    common = ["--gateway", pushgateway.url, "--storageclass", "fz", "--profile", "etcd-fsync",
              "--state", str(state), "--quiet"]  # fmt: skip
    for bad in corpus_files(negative=True):
        result = fioprobe("push", str(bad), *common)
        assert result.returncode == 3, (bad.name, result.stderr.decode())
        assert result.stderr.decode().count("\n") == 1  # one line
        assert gateway_groups(pushgateway) == []
        assert not state.exists()

    good = corpus_files(negative=False)[0]
    assert cli.main(["push", str(good), *common]) == 0
    (before,) = gateway_groups(pushgateway)
    saved = state.read_bytes()
    source = tmp_path / "input.txt"
    tried = []

    @settings(CI_SETTINGS, max_examples=60)
    @given(refused_inputs)
    def body(text: str) -> None:
        data = text.encode("utf-8", errors="surrogatepass")
        try:
            parse_text(data.decode("utf-8", errors="replace"))  # what the CLI will read
        except FioOutputError:
            pass
        else:
            assume(False)  # only inputs the reader refuses
        source.write_bytes(data)
        assert cli.main(["push", str(source), *common]) == 3
        tried.append(text)

    body()
    assert len(tried) >= 30
    assert gateway_groups(pushgateway) == [before]  # push_time_seconds unchanged too
    assert state.read_bytes() == saved
