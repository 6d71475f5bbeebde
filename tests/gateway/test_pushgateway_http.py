"""The Pushgateway client against servers that are not a well-behaved Pushgateway.

What must hold, whatever the server does: no redirect is followed (so the basic-auth header
never reaches another origin); one call ends within its deadline however slowly the server
drips bytes; an answer that is not a Pushgateway's is a one-line PushError, never a traceback
or a hang; nothing read back that could corrupt a cumulative counter is kept; no message ever
shows a password, the Authorization token or credentials from a URL. Setup mistakes are
usage errors (exit 2) with exact messages.

The hostile servers are raw sockets on 127.0.0.1 (tests/support/hostile_http.py); the read-back
round trip uses a real Pushgateway.
"""

from __future__ import annotations

import base64
import math
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from fioprobe.errors import ExitCode, UsageError
from fioprobe.gateway.api import delete_group, list_groups, push
from fioprobe.gateway.readback import ReadBack, read_group, read_totals
from fioprobe.gateway.transport import (
    ENV_PASSWORD,
    ENV_USERNAME,
    PushError,
    Transport,
    TransportConfigError,
    redact,
)
from fioprobe.metrics.collector import ProbeOutcome, registry_for
from fioprobe.metrics.table import LATENCY_BUCKETS_SECONDS
from fioprobe.metrics.totals import GroupTotals, HistogramTotals
from support import hostile_http as hostile
from support import services
from support.hostile_http import HostileServer

USER = "fioprobe"
PASSWORD = "hunter2-secret-password"
TOKEN = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
KEY = {"storageclass": "gp2", "profile": "etcd-fsync"}
LABELS = {"job": "fioprobe", **KEY}
GROUP_TEXT = "{'job': 'fioprobe', 'storageclass': 'gp2', 'profile': 'etcd-fsync'}"
LE_KEYS = [f"{le:g}" for le in LATENCY_BUCKETS_SECONDS] + ["+Inf"]
DROPPED = "; dropped, its series start again from 0"


def transport(url: str, **options: object) -> Transport:
    settings: dict[str, object] = {
        "username": USER,
        "password": PASSWORD,
        "attempts": 1,
        "timeout_seconds": 5.0,
        "backoff_seconds": 0.05,
    }
    return Transport(url=url, **{**settings, **options})  # type: ignore[arg-type]


def a_registry() -> object:
    return registry_for(ProbeOutcome(None, True, 1.0), GroupTotals(runs_total=1))


OPERATIONS: dict[str, Callable[[Transport], object]] = {
    "push": lambda t: push(t, KEY, a_registry()),  # type: ignore[arg-type]
    "delete": lambda t: delete_group(t, KEY),
    "read back": lambda t: read_group(t, KEY),
}


def failure(call: Callable[[], object]) -> PushError:
    with pytest.raises(PushError) as raised:
        call()
    error = raised.value
    assert error.exit_code == ExitCode.PUSH_FAILED
    message = str(error)
    assert "\n" not in message and PASSWORD not in message and TOKEN not in message
    return error


# --- the answer format, as a Pushgateway 1.5 writes it --------------------------------------


def series(value: str, **labels: str) -> dict[str, object]:
    return {"labels": {"instance": "", **LABELS, **labels}, "value": value}


def family(kind: str, *metrics: dict[str, object]) -> dict[str, object]:
    return {
        "time_stamp": "2026-11-22T19:24:34.900643537Z",
        "type": kind,
        "help": "x",
        "metrics": list(metrics),
    }


def histogram(
    cumulative: list[str], count: str | None = "10", total: str | None = "12.5", keys=LE_KEYS
) -> dict[str, object]:
    metric: dict[str, object] = {
        "buckets": dict(zip(keys, cumulative, strict=True)),
        "labels": {"instance": "", **LABELS},
    }
    if count is not None:
        metric["count"] = count
    if total is not None:
        metric["sum"] = total
    return family("HISTOGRAM", metric)


#: Per-bucket counts 1 (le 0.0001), 7 (le 0.004), 2 (+Inf): cumulative as the gateway shows it.
SYNC_COUNTS = [1, 0, 0, 0, 0, 7] + [0] * 14 + [2]
SYNC_CUMULATIVE = ["1"] * 5 + ["8"] * 15 + ["10"]


def good_group(**changes: object) -> dict[str, object]:
    group: dict[str, object] = {
        "labels": dict(LABELS),
        "last_push_successful": True,
        "fioprobe_runs_total": family("COUNTER", series("5")),
        "fioprobe_failures_total": family("COUNTER", series("1")),
        "fioprobe_read_bytes_total": family("COUNTER", series("4.503599627370496e+15")),
        "fioprobe_written_bytes_total": family("COUNTER", series("1.23456789e+08")),
        "fioprobe_last_success_timestamp_seconds": family("GAUGE", series("1.70000000025e+09")),
        "fioprobe_sync_latency_seconds": histogram(SYNC_CUMULATIVE),
        "fioprobe_writer_info": family("GAUGE", series("1", writer="node-a/pod-1")),
        "push_time_seconds": family("GAUGE", series("1.7953754749006436e+09")),
    }
    group.update(changes)
    return {key: value for key, value in group.items() if value is not None}


def good_totals() -> GroupTotals:
    return GroupTotals(
        histograms={"sync": HistogramTotals(list(SYNC_COUNTS), 12.5)},
        runs_total=5,
        failures_total=1,
        read_bytes_total=2**52,
        written_bytes_total=123456789,
        last_success_timestamp=1700000000.25,
    )


def document(*groups: object) -> dict[str, object]:
    return {"status": "success", "data": list(groups)}


def served(*groups: object) -> ReadBack | None:
    with HostileServer(hostile.json_answer(document(*groups))) as server:
        return read_group(transport(server.url), KEY)


# --- redirects ----------------------------------------------------------------------------


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
@pytest.mark.parametrize("operation", list(OPERATIONS))
def test_redirect_is_never_followed(operation: str, code: int) -> None:
    """A 3xx to another origin: refused, not retried, and the target never hears of us."""
    with (
        HostileServer(hostile.json_answer(document())) as target,
        HostileServer(hostile.redirect(code, target.url + "/elsewhere")) as gateway,
    ):
        error = failure(lambda: OPERATIONS[operation](transport(gateway.url, attempts=3)))
    assert str(error) == (
        f"{operation}: {gateway.url} answered HTTP {code} (redirect to {target.url}/elsewhere); "
        "a Pushgateway does not redirect, refusing to follow"
    )
    assert target.requests == []  # nothing followed, so no Authorization header went there
    assert not any("authorization" in request.headers for request in target.requests)
    (request,) = gateway.requests  # one request: a redirect is never retried
    assert request.headers["authorization"] == f"Basic {TOKEN}"  # the real origin got it


def test_redirect_target_with_credentials_is_shown_redacted() -> None:
    location = f"http://{USER}:{PASSWORD}@evil.example:9091/metrics"
    with HostileServer(hostile.redirect(302, location)) as gateway:
        error = failure(lambda: read_group(transport(gateway.url), KEY))
    assert str(error) == (
        f"read back: {gateway.url} answered HTTP 302 (redirect to "
        "http://***@evil.example:9091/metrics); a Pushgateway does not redirect, refusing to "
        "follow"
    )


# --- answers that are not a Pushgateway's -------------------------------------------------

NESTED = b'{"status":"success","data":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
HUGE = 64 * 1024 * 1024 + 1024 * 1024  # one MiB more than fioprobe reads
TOO_LARGE = (
    "read back: the answer of {url}/api/v1/metrics is larger than 64 MiB, more than fioprobe "
    "reads: not a Pushgateway answer fioprobe can use"
)


@pytest.mark.parametrize(
    ("behaviour", "attempts", "expected", "requests"),
    [
        pytest.param(
            hostile.answer(200, b"<html><body>Sign in</body></html>",
                           {"Content-Type": "text/html"}),
            3,
            "read back: {url}/api/v1/metrics is not a Pushgateway answer: not JSON "
            "(text/html): Expecting value: line 1 column 1 (char 0)",
            1,
            id="html-200",
        ),
        pytest.param(
            hostile.answer(200, NESTED, {"Content-Type": "application/json"}),
            3,
            "read back: {url}/api/v1/metrics is not a Pushgateway answer: its JSON is nested "
            "too deeply",
            1,
            id="nested-100000-deep",
        ),
        pytest.param(
            hostile.answer(200, b"\xff\xfe\x00garbage", {"Content-Type": "application/json"}),
            1,
            "read back: {url}/api/v1/metrics is not a Pushgateway answer: not JSON "
            "(application/json): 'utf-8' codec can't decode byte 0xff in position 0: invalid "
            "start byte",
            1,
            id="not-utf8",
        ),
        pytest.param(
            hostile.truncated(1000, 10),
            2,
            "read back: {url} broke off its answer after 10 of 1000 bytes (after 2 attempts)",
            2,
            id="truncated-body",
        ),
        pytest.param(hostile.huge(100 * 1024 * 1024, announce=True), 3, TOO_LARGE, 1,
                     id="huge-announced"),
        pytest.param(hostile.huge(HUGE, announce=False), 3, TOO_LARGE, 1, id="huge-streamed"),
        pytest.param(
            lambda exchange: None,
            2,
            "read back: {url} closed the connection without an answer (after 2 attempts)",
            2,
            id="closed-without-answer",
        ),
        pytest.param(
            lambda exchange: exchange.send(b"SSH-2.0-OpenSSH_9.2\r\n"),
            1,
            "read back: {url} answered something that is not HTTP (BadStatusLine: "
            "SSH-2.0-OpenSSH_9.2) (after 1 attempt)",
            1,
            id="not-http",
        ),
        pytest.param(
            lambda exchange: exchange.send(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"
            ),
            1,
            "read back: {url} broke off its answer after 0 bytes (after 1 attempt)",
            1,
            id="bad-chunk-size",
        ),
        pytest.param(
            hostile.answer(200, b"{}", {"Content-Length": "\u00b2"}),
            1,
            "read back: {url}/api/v1/metrics is not a Pushgateway answer: 'data' is not a list",
            1,
            id="content-length-not-a-number",
        ),
        pytest.param(
            hostile.answer(503, b"down for maintenance\n", reason="Service Unavailable"),
            3,
            "read back: {url} answered HTTP 503 Service Unavailable: down for maintenance "
            "(after 3 attempts)",
            3,
            id="5xx-retried",
        ),
    ],
)  # fmt: skip
def test_an_answer_that_is_not_a_pushgateways_is_a_clear_error(
    behaviour: hostile.Behaviour, attempts: int, expected: str, requests: int
) -> None:
    with HostileServer(behaviour) as server:
        error = failure(lambda: read_group(transport(server.url, attempts=attempts), KEY))
    assert str(error) == expected.format(url=server.url)
    assert len(server.requests) == requests


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ([], "the answer is not a JSON object"),
        ({"status": "error", "error": "boom"}, "status is 'error', not 'success'"),
        ({"status": "success", "data": {}}, "'data' is not a list"),
        (document(1), "group 0 is not an object"),
        (document({"labels": ["job"]}), "group 0: its labels are not a map of strings"),
        (document({"labels": {"job": 1}}), "group 0: its labels are not a map of strings"),
        (document(good_group(), {}), "group 1: its labels are not a map of strings"),
    ],
)
def test_wrong_shaped_answer_is_refused(answer: object, problem: str) -> None:
    with HostileServer(hostile.json_answer(answer)) as server:
        error = failure(lambda: list_groups(transport(server.url, attempts=3)))
        assert len(server.requests) == 1  # another attempt would get the same: not retried
    assert str(error) == (
        f"read back: {server.url}/api/v1/metrics is not a Pushgateway answer: {problem}"
    )


def with_metric(name: str, **fields: object) -> dict[str, object]:
    metric = {"labels": {"instance": "", **LABELS}, **fields}
    return good_group(**{name: family("COUNTER", metric)})


SYNC = "fioprobe_sync_latency_seconds"


def sync_histogram(**fields: object) -> dict[str, object]:
    metric = {
        "buckets": dict(zip(LE_KEYS, SYNC_CUMULATIVE, strict=True)),
        "count": "10",
        "sum": "12.5",
        "labels": {"instance": "", **LABELS},
        **fields,
    }
    return good_group(**{SYNC: family("HISTOGRAM", metric)})


@pytest.mark.parametrize(
    ("group", "problem"),
    [
        (good_group(fioprobe_runs_total=[]), "fioprobe_runs_total is not an object"),
        (good_group(fioprobe_runs_total={"metrics": {}}),
         "fioprobe_runs_total: 'metrics' is not a list"),
        (good_group(fioprobe_runs_total={"metrics": ["5"]}),
         "fioprobe_runs_total: metric 0 is not an object"),
        (good_group(fioprobe_runs_total={"metrics": [{"labels": {"a": 1}, "value": "5"}]}),
         "fioprobe_runs_total: metric 0: its labels are not a map of strings"),
        (with_metric("fioprobe_runs_total", value=5),
         "fioprobe_runs_total: value is not a number in a string: 5"),
        (with_metric("fioprobe_runs_total", value="five"),
         "fioprobe_runs_total: value is not a number in a string: 'five'"),
        (with_metric("fioprobe_runs_total", value=" 5"),
         "fioprobe_runs_total: value is not a number in a string: ' 5'"),
        (with_metric("fioprobe_runs_total", value="1_000"),
         "fioprobe_runs_total: value is not a number in a string: '1_000'"),
        (with_metric("push_time_seconds", value=None),
         "push_time_seconds: value is not a number in a string: None"),
        (sync_histogram(buckets=[["0.01", "1"]]), f"{SYNC}: 'buckets' is not an object"),
        (sync_histogram(buckets={"ten": "1"}),
         f"{SYNC}: bucket bound is not a number in a string: 'ten'"),
        (sync_histogram(buckets={"0.0001": 3}),
         f"{SYNC}: bucket '0.0001' is not a number in a string: 3"),
        (sync_histogram(sum=12.5), f"{SYNC}: sum is not a number in a string: 12.5"),
        (sync_histogram(count=["10"]), f"{SYNC}: count is not a number in a string: ['10']"),
    ],
)  # fmt: skip
def test_wrong_shaped_group_is_refused(group: dict[str, object], problem: str) -> None:
    with HostileServer(hostile.json_answer(document(group))) as server:
        error = failure(lambda: read_group(transport(server.url), KEY))
    assert str(error) == (
        f"read back: {server.url}/api/v1/metrics is not a Pushgateway answer: group "
        f"{GROUP_TEXT}: {problem}"
    )


# --- the deadline -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("operation", "behaviour"),
    [
        ("read back", hostile.drip_body(2.0)),
        ("read back", hostile.drip_head(2.0)),
        ("push", hostile.drip_head(2.0)),
        ("delete", hostile.drip_head(2.0)),
    ],
    ids=["read-slow-body", "read-slow-headers", "push-slow-headers", "delete-slow-headers"],
)
def test_deadline_bounds_the_whole_exchange(operation: str, behaviour: hostile.Behaviour) -> None:
    """One byte every 2 s satisfies every socket read; the deadline still ends it at 3 s."""
    with HostileServer(behaviour) as server:
        started = time.monotonic()
        error = failure(lambda: OPERATIONS[operation](transport(server.url, timeout_seconds=3)))
        elapsed = time.monotonic() - started
    assert str(error) == (
        f"{operation}: no complete answer from {server.url} within 3s (after 1 attempt)"
    )
    assert 2.9 <= elapsed < 8, elapsed  # about 3 s; the margin is for a loaded machine only
    assert len(server.requests) == 1


def test_total_time_is_attempts_times_deadline_plus_backoff() -> None:
    with HostileServer(hostile.drip_head(0.5)) as server:
        slow = transport(server.url, timeout_seconds=1, attempts=3, backoff_seconds=0.2)
        started = time.monotonic()
        error = failure(lambda: read_group(slow, KEY))
        elapsed = time.monotonic() - started
    assert str(error) == (
        f"read back: no complete answer from {server.url} within 1s (after 3 attempts)"
    )
    assert 3.5 <= elapsed < 7, elapsed  # 3 x 1 s + 0.2 s + 0.4 s of backoff = 3.6 s
    assert len(server.requests) == 3


def test_refused_connection_is_retried_and_reported() -> None:
    with HostileServer(lambda exchange: None) as server:
        url = server.url
    error = failure(lambda: push(transport(url, attempts=2), KEY, a_registry()))  # type: ignore[arg-type]
    assert str(error) == (
        f"push: cannot reach {url}: [Errno 111] Connection refused (after 2 attempts)"
    )


# --- secrets ------------------------------------------------------------------------------


def test_credentials_in_the_url_are_refused_and_never_shown() -> None:
    for url, shown in [
        (f"http://{USER}:{PASSWORD}@127.0.0.1:9091", "http://***@127.0.0.1:9091"),
        (f"{USER}:{PASSWORD}@127.0.0.1:9091", "***@127.0.0.1:9091"),
        ("https://user:pa/ss#word@gw.example/", "https://***@gw.example/"),
    ]:
        with pytest.raises(TransportConfigError) as raised:
            Transport.from_sources(url)
        message = str(raised.value)
        assert message == (
            f"Pushgateway URL {shown} holds credentials; give them with "
            f"--username-file/--password-file or {ENV_USERNAME}/{ENV_PASSWORD} (or "
            "pushgateway.username_file/password_file in the configuration), never in the URL"
        )
        assert PASSWORD not in message and "pa/ss" not in message
        assert raised.value.exit_code == ExitCode.USAGE
        with pytest.raises(TransportConfigError):
            Transport(url=url if "://" in url else "http://" + url)


@pytest.mark.parametrize(
    ("url", "redacted"),
    [
        ("http://127.0.0.1:9091", "http://127.0.0.1:9091"),
        ("http://u:p@h:1/x", "http://***@h:1/x"),
        ("http://u:p@ss@h", "http://***@h"),
        ("http://u:pa/ss@h/p", "http://***@h/p"),
        ("u:p@h", "***@h"),
        ("", ""),
    ],
)
def test_redact(url: str, redacted: str) -> None:
    assert redact(url) == redacted


@pytest.mark.parametrize("status", [401, 500])
def test_a_server_echoing_the_credentials_does_not_get_them_into_the_message(status: int) -> None:
    def echo(exchange: hostile.Exchange) -> None:
        sent = exchange.request.headers.get("authorization", "")
        body = f"you sent {sent!r}; password {PASSWORD}\r\nsecond line\x1b[31m".encode()
        exchange.send(hostile.response(status, body, reason="No"))

    with HostileServer(echo) as server:
        error = failure(lambda: push(transport(server.url), KEY, a_registry()))  # type: ignore[arg-type]
    assert str(error).startswith(f"push: {server.url} answered HTTP {status} No")
    # The line break is a space, the escape character written out: one inert line.
    assert "you sent 'Basic ***'; password *** second line\\x1b[31m" in str(error)
    assert "\x1b" not in str(error)


# --- setup mistakes -----------------------------------------------------------------------


def config_error(tmp_path: Path, case: str) -> str:
    """Build the transport of one bad setup; return its error message."""
    password = tmp_path / "password"
    username = tmp_path / "username"
    username.write_text(USER + "\n")
    files = {"username_file": str(username), "password_file": str(password)}
    builders: dict[str, Callable[[], object]] = {
        "attempts-0": lambda: Transport.from_sources("http://h:9091", attempts=0),
        "attempts-not-int": lambda: Transport.from_sources("http://h:9091", attempts=1.5),
        "timeout-negative": lambda: Transport.from_sources("http://h:9091", timeout_seconds=-1),
        "timeout-zero": lambda: Transport.from_sources("http://h:9091", timeout_seconds=0),
        "timeout-nan": lambda: Transport.from_sources("http://h:9091", timeout_seconds=math.nan),
        "timeout-inf": lambda: Transport.from_sources("http://h:9091", timeout_seconds=math.inf),
        "ftp-url": lambda: Transport.from_sources("ftp://h:9091"),
        "query-url": lambda: Transport.from_sources("http://h:9091/?x=1"),
        "bad-port": lambda: Transport.from_sources("http://h:port"),
        "no-host": lambda: Transport.from_sources("http://:9091"),
        "non-utf8-password": lambda: (
            password.write_bytes(b"\xff\xfehunter2\n"),
            Transport.from_sources("http://h:9091", **files),
        ),
        "missing-password-file": lambda: Transport.from_sources("http://h:9091", **files),
        "password-file-is-a-directory": lambda: (
            password.mkdir(),
            Transport.from_sources("http://h:9091", **files),
        ),
        "username-only": lambda: Transport.from_sources(
            "http://h:9091", username_file=str(username)
        ),
        "colon-in-username": lambda: (
            username.write_text("a:b\n"),
            password.write_text("x\n"),
            Transport.from_sources("http://h:9091", **files),
        ),
    }
    with pytest.raises(TransportConfigError) as raised:
        builders[case]()
    assert isinstance(raised.value, UsageError)
    assert raised.value.exit_code == ExitCode.USAGE
    return str(raised.value)


CONFIG_ERRORS = {
    "attempts-0": "Pushgateway attempts must be a whole number of at least 1, got 0",
    "attempts-not-int": "Pushgateway attempts must be a whole number of at least 1, got 1.5",
    "timeout-negative": "Pushgateway timeout must be a finite number of seconds above 0, got -1",
    "timeout-zero": "Pushgateway timeout must be a finite number of seconds above 0, got 0",
    "timeout-nan": "Pushgateway timeout must be a finite number of seconds above 0, got nan",
    "timeout-inf": "Pushgateway timeout must be a finite number of seconds above 0, got inf",
    "ftp-url": "Pushgateway URL ftp://h:9091 must start with http:// or https://",
    "query-url": "Pushgateway URL http://h:9091/?x=1 must be a base URL, without a query or "
    "fragment",
    "bad-port": "Pushgateway URL http://h:port has an invalid port",
    "no-host": "Pushgateway URL http://:9091 has no host",
    "non-utf8-password": "credential file {dir}/password is not UTF-8 text (invalid byte at "
    "offset 0)",
    "missing-password-file": "cannot read credential file {dir}/password: No such file or "
    "directory",
    "password-file-is-a-directory": "cannot read credential file {dir}/password: Is a directory",
    "username-only": "basic auth needs both a username and a password; only the username was given",
    "colon-in-username": "basic auth username must not contain ':'",
}


@pytest.mark.parametrize("case", list(CONFIG_ERRORS))
def test_setup_mistakes_are_usage_errors(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_USERNAME, raising=False)
    monkeypatch.delenv(ENV_PASSWORD, raising=False)
    assert config_error(tmp_path, case) == CONFIG_ERRORS[case].format(dir=tmp_path)


def test_scheme_less_url_gets_http_and_credentials_come_from_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_USERNAME, "from-env")
    monkeypatch.setenv(ENV_PASSWORD, "env-password")
    (tmp_path / "password").write_bytes(b"\xef\xbb\xbffile-password\r\n")  # BOM, CRLF
    made = Transport.from_sources(
        "HTTP://gw:9091/", password_file=str(tmp_path / "password"), attempts=2
    )
    assert (made.url, made.username, made.password) == (
        "http://gw:9091",
        "from-env",
        "file-password",
    )
    assert Transport.from_sources("gw:9091").url == "http://gw:9091"


# --- read-back validation -----------------------------------------------------------------


def test_a_valid_group_is_taken_whole() -> None:
    read_back = served(good_group())
    assert read_back is not None
    assert read_back.totals.to_json() == good_totals().to_json()
    assert read_back.push_time == 1795375474.9006436
    assert read_back.writer == "node-a/pod-1"
    assert read_back.dropped == ()


def test_bucket_bounds_are_compared_as_numbers() -> None:
    keys = [f"{le:e}" for le in LATENCY_BUCKETS_SECONDS] + ["+Inf"]  # "1.000000e-04", ...
    read_back = served(good_group(fioprobe_sync_latency_seconds=histogram(SYNC_CUMULATIVE,
                                                                          keys=keys)))  # fmt: skip
    assert read_back is not None and read_back.dropped == ()
    assert read_back.totals.histograms["sync"].counts == SYNC_COUNTS


def test_only_the_exact_group_is_read() -> None:
    other = good_group(labels={**LABELS, "node": "n1"})
    assert served(other) is None
    assert served() is None
    read_back = served(other, good_group(fioprobe_runs_total=family("COUNTER", series("9"))))
    assert read_back is not None and read_back.totals.runs_total == 9
    with HostileServer(hostile.json_answer(document(good_group()))) as server:
        assert read_totals(transport(server.url), KEY).to_json() == good_totals().to_json()  # type: ignore[union-attr]


def other_layout() -> dict[str, object]:
    return histogram(["1", "5", "9", "10"], keys=["0.1", "1", "10", "+Inf"])


def shifted(index: int, value: str) -> list[str]:
    counts = list(SYNC_CUMULATIVE)
    counts[index] = value
    return counts


@pytest.mark.parametrize(
    ("histogram_family", "note"),
    [
        (other_layout(),
         "bucket bounds are not fioprobe's 21 (found 4: 0.1, 1, 10, +Inf)"),
        (histogram(SYNC_CUMULATIVE[1:], keys=LE_KEYS[1:]),
         "bucket bounds are not fioprobe's 21 (found 20: 0.00025, 0.0005, 0.001, 0.002, 0.004, "
         "0.005, 0.008, 0.01, ...)"),
        (histogram([*SYNC_CUMULATIVE, "10"], keys=[*LE_KEYS, "1e-02"]),
         "bucket bounds are not fioprobe's 21 (found 22: 0.0001, 0.00025, 0.0005, 0.001, "
         "0.002, 0.004, 0.005, 0.008, ...)"),
        (histogram(shifted(6, "7")), "cumulative count falls from 8 to 7 at le=0.005"),
        (histogram(shifted(0, "-1")), "bucket le=0.0001 count -1 is negative"),
        (histogram(shifted(0, "0.5")), "bucket le=0.0001 count 0.5 is not a whole number"),
        (histogram(shifted(20, "NaN")), "bucket le=+Inf count nan is not finite"),
        (histogram(shifted(20, "+Inf")), "bucket le=+Inf count inf is not finite"),
        (histogram(["0"] * 20 + ["9.007199254740992e+15"], count="9.007199254740992e+15"),
         "bucket le=+Inf count 9.0072e+15 is 2**53 or more, beyond exact counting"),
        (histogram(SYNC_CUMULATIVE, count="11"), "+Inf bucket 10 differs from count 11"),
        (histogram(SYNC_CUMULATIVE, total="NaN"),
         "sum nan is not a finite number of seconds of at least 0"),
        (histogram(SYNC_CUMULATIVE, total="-0.5"),
         "sum -0.5 is not a finite number of seconds of at least 0"),
        (histogram(SYNC_CUMULATIVE, total=None), "no sum"),
        ({**histogram(SYNC_CUMULATIVE), "type": "GAUGE"}, "type is 'GAUGE', not HISTOGRAM"),
        (family("HISTOGRAM", {"labels": {}, "value": "3"}), "no buckets"),
    ],
)  # fmt: skip
def test_an_untrustworthy_histogram_is_dropped(histogram_family: object, note: str) -> None:
    read_back = served(good_group(fioprobe_sync_latency_seconds=histogram_family))
    assert read_back is not None
    assert read_back.dropped == (f"{SYNC}: {note}{DROPPED}",)
    expected = good_totals()
    del expected.histograms["sync"]
    assert read_back.totals.to_json() == expected.to_json()  # the rest is kept


def test_histogram_without_count_is_taken() -> None:
    read_back = served(good_group(fioprobe_sync_latency_seconds=histogram(SYNC_CUMULATIVE,
                                                                          count=None)))  # fmt: skip
    assert read_back is not None and read_back.dropped == ()
    assert read_back.totals.histograms["sync"].counts == SYNC_COUNTS


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("-1", "is negative"),
        ("NaN", "is not finite"),
        ("+Inf", "is not finite"),
        ("-Inf", "is not finite"),
        ("1.5", "is not a whole number"),
        ("9.007199254740992e+15", "is 2**53 or more, beyond exact counting"),
        ("1e+300", "is 2**53 or more, beyond exact counting"),
    ],
)
def test_an_untrustworthy_counter_counts_from_zero(value: str, problem: str) -> None:
    read_back = served(good_group(fioprobe_failures_total=family("COUNTER", series(value))))
    assert read_back is not None
    assert read_back.dropped == (f"fioprobe_failures_total: {value!r} {problem}; counted from 0",)
    assert read_back.totals.failures_total == 0
    assert read_back.totals.runs_total == 5  # the others are kept


def test_counter_just_below_two_to_the_53_is_kept() -> None:
    just_below = family("COUNTER", series("9.007199254740991e+15"))
    read_back = served(good_group(fioprobe_written_bytes_total=just_below))
    assert read_back is not None and read_back.dropped == ()
    assert read_back.totals.written_bytes_total == 2**53 - 1


@pytest.mark.parametrize("value", ["0", "-5", "NaN", "+Inf"])
def test_last_success_must_be_a_time(value: str) -> None:
    name = "fioprobe_last_success_timestamp_seconds"
    read_back = served(good_group(**{name: family("GAUGE", series(value))}))
    assert read_back is not None
    assert read_back.totals.last_success_timestamp is None
    assert read_back.dropped == (f"{name}: {value!r} is not a time; not used",)


def test_absent_and_ambiguous_families() -> None:
    two = family("COUNTER", series("1", fio_job="a"), series("2", fio_job="b"))
    read_back = served(
        good_group(
            fioprobe_runs_total=two,
            fioprobe_writer_info=None,
            push_time_seconds=None,
            fioprobe_sync_latency_seconds=None,
            fioprobe_failures_total=family("COUNTER"),
            fioprobe_written_bytes_total=family("COUNTER", {"labels": {}}),
        )
    )
    assert read_back is not None
    assert (read_back.writer, read_back.push_time, read_back.totals.histograms) == (None, None, {})
    assert (read_back.totals.runs_total, read_back.totals.failures_total) == (0, 0)
    assert read_back.totals.written_bytes_total == 0
    assert read_back.dropped == (
        "fioprobe_runs_total: 2 series where fioprobe pushes one; not used",
        "fioprobe_written_bytes_total: no value; counted from 0",
    )


# --- a real Pushgateway -------------------------------------------------------------------


def test_real_pushgateway_round_trip(pushgateway: services.Service) -> None:
    """What fioprobe pushes, it reads back exactly; the answer format is the real one."""
    gateway = Transport(pushgateway.url, attempts=1, timeout_seconds=services.REQUEST_S)
    totals = good_totals()
    totals.histograms["write"] = HistogramTotals([3] * 21, 0.125)
    totals.histograms["read"] = HistogramTotals([0] * 20 + [2**40], 1e-9)
    before = time.time()
    push(gateway, KEY, registry_for(ProbeOutcome(None, True, 1.0), totals))
    after = time.time()
    read_back = read_group(gateway, KEY)
    assert read_back is not None
    assert read_back.totals.to_json() == totals.to_json()
    assert read_back.dropped == () and read_back.writer is None
    assert read_back.push_time is not None and before - 5 < read_back.push_time < after + 5
    (group,) = [g for g in list_groups(gateway) if g["labels"] == LABELS]
    (sync,) = group[SYNC]["metrics"]
    assert sorted(sync["buckets"], key=lambda k: float(k)) == LE_KEYS
    assert (sync["count"], sync["sum"]) == ("10", "12.5")

    delete_group(gateway, KEY)
    assert read_group(gateway, KEY) is None
