"""Client/server output: each server's run beside fio's aggregate, and repeated keys.

Real outputs only: three made here by fio 3.33 with three `fio --server` processes
(tests/data/distributed/SOURCES.tsv) and the client/server files of the shared corpus
(tests/data/fio-corpus/SOURCES.tsv). fio's client repeats every key of "global options" once
per server with the same value: that, and old fio's "0.00" percentile slots, are the only
repeats accepted; any other repeated key, or a repeat with another value, rejects the file.
"""

from __future__ import annotations

import json
import re

import pytest
from conftest import CORPUS, REPO
from fioprobe.fio.clientserver import parse_client_server
from fioprobe.fio.parse import FioOutputError, parse_text

DATA = REPO / "tests" / "data" / "distributed"
RANDREAD = DATA / "fio3.33-client-3servers-randread-repeated-global-options.json"
PREPARE = DATA / "fio3.33-client-3servers-prepare-seqwrite.json"
SIGTERM = DATA / "fio3.33-client-3servers-sigterm-randread-text-before.txt"
TWO_CLIENTS = CORPUS / "fio343-client-2clients-allclients-psync.json"
ONE_CLIENT = CORPUS / "fio343-client-1client-psync-randread.json"


def test_the_repeated_global_options_are_really_there() -> None:
    """The file is what the test claims: fio wrote "bs" once per server."""
    text = RANDREAD.read_text()
    options = text[text.index('"global options"') : text.index('"client_stats"')]
    assert len(re.findall(r'"bs" :', options)) == 3


@pytest.mark.parametrize("path", [RANDREAD, PREPARE, SIGTERM])
def test_each_server_and_fio_aggregate(path: object) -> None:
    result = parse_client_server(path.read_text())  # type: ignore[attr-defined]
    assert len(result.servers) == 3
    assert {s.hostname for s in result.servers} == {"127.0.0.1"}
    assert len({s.port for s in result.servers}) == 3
    assert result.aggregate is not None
    assert [job.name for job in result.aggregate.jobs] == ["All clients"]
    for server in result.servers:
        assert [job.name for job in server.run.jobs] == ["bench"]


def test_the_aggregate_is_fios_not_the_sum() -> None:
    """fio's "All clients": every server's IOs over the longest runtime, below the sum of
    the servers' rates when their runtimes differ (prepare: 0.05 to 0.09 s)."""
    result = parse_client_server(PREPARE.read_text())
    assert result.aggregate is not None
    servers = [s.run.jobs[0].ops["write"] for s in result.servers]
    aggregate = result.aggregate.jobs[0].ops["write"]
    assert aggregate.total_ios == sum(s.total_ios for s in servers)
    assert aggregate.runtime_s == max(s.runtime_s for s in servers)
    assert aggregate.iops == pytest.approx(aggregate.total_ios / aggregate.runtime_s, rel=1e-3)
    assert aggregate.iops < sum(s.iops for s in servers)


def test_plain_reader_still_takes_the_aggregate() -> None:
    assert [job.name for job in parse_text(RANDREAD.read_text()).jobs] == ["All clients"]


def test_fio_343_servers_and_options_list() -> None:
    result = parse_client_server(TWO_CLIENTS.read_text())
    assert sorted(s.server for s in result.servers) == ["127.0.0.1:18801", "127.0.0.1:18802"]
    assert result.aggregate is not None


def test_one_server_has_no_aggregate() -> None:
    """fio writes no "All clients" for one server; none is made up."""
    result = parse_client_server(ONE_CLIENT.read_text())
    assert result.aggregate is None
    assert len(result.servers) == 1


def test_plain_output_is_not_client_server() -> None:
    with pytest.raises(FioOutputError, match='no "client_stats" list'):
        parse_client_server((CORPUS / "fio3.36-seqread-numjobs2-group-reporting.json").read_text())


def _edited(old: str, new: str, count: int = 1) -> str:
    text = RANDREAD.read_text()
    assert old in text
    return text.replace(old, new, count)


#: (what, edit of the real file, the exact message). Each is one change to a real output.
REFUSED = [
    (
        "a global option repeated with another value",
        ('"bs" : "4k"', '"bs" : "8k"'),
        'key "bs" appears twice in one object with different values',
    ),
    (
        "a repeated stats key, same value",
        ('"total_ios" : 8192,', '"total_ios" : 8192,\n        "total_ios" : 8192,'),
        'key "total_ios" appears more than once in one object; fio repeats keys only in '
        'client/server "global options"',
    ),
    (
        "a repeated stats key, another value",
        ('"total_ios" : 8192,', '"total_ios" : 8192,\n        "total_ios" : 1,'),
        'key "total_ios" appears twice in one object with different values',
    ),
    (
        "a repeated jobname",
        ('"jobname" : "bench",', '"jobname" : "bench",\n      "jobname" : "bench",'),
        'key "jobname" appears more than once in one object',
    ),
    (
        "a number repeated as a string",
        ('"port" : ', '"port" : "x",\n      "port" : '),
        'key "port" appears twice in one object with different values',
    ),
]


@pytest.mark.parametrize(("what", "edit", "message"), REFUSED, ids=[r[0] for r in REFUSED])
def test_other_repeats_reject_the_whole_file(
    what: str, edit: tuple[str, str], message: str
) -> None:
    text = _edited(*edit)
    with pytest.raises(FioOutputError) as caught:
        parse_text(text, source="f.json")
    assert caught.value.problem.startswith(message), what
    with pytest.raises(FioOutputError):
        parse_client_server(text, source="f.json")


def test_repeats_are_checked_with_text_around_the_document() -> None:
    """The servers' `<host>` lines before the JSON take the slower scan; same rule there."""
    text = SIGTERM.read_text().replace('"bs" : "4k"', '"bs" : "8k"', 1)
    with pytest.raises(FioOutputError, match='"bs" appears twice'):
        parse_text(text)


def test_old_fio_unused_percentile_slots_pass_in_client_server_output() -> None:
    """fio 3.1 and older write "0.00": 0 for unused slots; a client/server file of theirs
    keeps them: the reader drops 0 percentiles anyway."""
    document = json.loads(ONE_CLIENT.read_text())
    text = json.dumps(document, indent=1).replace(
        '"percentile": {', '"percentile": {"0.00": 0, "0.00": 0, ', 1
    )
    assert text.count('"0.00": 0') == 2
    assert parse_client_server(text).servers[0].run.jobs[0].ops["read"].latency is not None


def test_plain_documents_keep_their_reading() -> None:
    """Not client/server: the fast path as before (fio 2.x repeats "0.00" keys there)."""
    path = CORPUS / "fio2.1.4-pkb-5jobs-duplicate-percentile-keys.json"
    assert len(parse_text(path.read_text()).jobs) == 5


#: (what, text after fio's real client/server document, the message's start).
JUNK_AFTER = [
    ("a closing brace glued on", "}\n", "text after the fio JSON document on its last line"),
    ("a half-written second document", '{\n  "client_stats" : [\n', "invalid JSON after"),
    ("a broken object", '{"jobs": [}\n', "invalid JSON after the fio document"),
]


@pytest.mark.parametrize(("what", "junk", "message"), JUNK_AFTER, ids=[j[0] for j in JUNK_AFTER])
def test_broken_json_after_the_document_rejects_the_file(
    what: str, junk: str, message: str
) -> None:
    """fio's client writes its document last: broken JSON after it is an edited or
    concatenated file, rejected whole, never read as its last good-looking part."""
    text = RANDREAD.read_text().rstrip("\n") + ("" if junk == "}\n" else "\n") + junk
    with pytest.raises(FioOutputError) as caught:
        parse_client_server(text, source="f.json")
    assert caught.value.problem.startswith(message), what


def test_whitespace_after_the_document_is_fine() -> None:
    assert len(parse_client_server(RANDREAD.read_text() + "\n\n  \n").servers) == 3


def test_repeated_zero_slots_pass_only_in_percentile_objects() -> None:
    """A repeated "0.00": 0 outside a "percentile" object is not fio's: rejected."""
    document = json.loads(ONE_CLIENT.read_text())
    text = json.dumps(document, indent=1).replace(
        '"job options": {', '"job options": {"0.00": 0, "0.00": 0, ', 1
    )
    assert text.count('"0.00": 0') == 2
    with pytest.raises(FioOutputError, match=re.escape('key "0.00" appears more than once')):
        parse_client_server(text)
