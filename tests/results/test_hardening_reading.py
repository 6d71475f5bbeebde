"""Hostile inputs on the reading side: fio results, archives and folders given to `report`
and `backfill`, and the credentials `demo` sends to Grafana.

Each case is an input a tenant or a careless tool can produce: a result edited after fio
wrote it, a result stamped in 2100 or 1970, a `.tar.xz` of a million empty members, a FIFO
named like a result, a folder tree a thousand levels deep, a Grafana that redirects the
token elsewhere. Every one ends in one precise line, never a hang or a traceback.
"""

from __future__ import annotations

import copy
import gzip
import http.server
import io
import json
import os
import subprocess
import sys
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import CORPUS, fioprobe
from fioprobe.fio import parse as fioparse
from fioprobe.fio.parse import FioOutputError
from fioprobe.results import discover
from fioprobe.results import load as load_module

JSON_PLUS = CORPUS / "fio3.39-jsonplus-bins-macos-posixaio-randwrite-extracted.json"
PLAIN = CORPUS / "fio3.36-randrw-psync-128k-no-global-options.json"
CLIENT_SERVER = CORPUS / "fio343-client-2clients-allclients-psync.json"
#: Deadline for one CLI call over a handful of files; generous for a loaded 2-core machine.
CLI_TIMEOUT = 120


def _doc(path: Path) -> dict:
    return json.loads(path.read_text())


def _parse(doc: dict) -> fioparse.Run:
    return fioparse.parse_text(json.dumps(doc), "edited.json")


# --- the fio output parser --------------------------------------------------------------


def test_n_that_differs_from_the_bins_total_is_refused() -> None:
    doc = _doc(JSON_PLUS)
    clat = doc["jobs"][0]["write"]["clat_ns"]
    assert sum(clat["bins"].values()) == clat["N"]  # as fio wrote it: accepted
    _parse(doc)
    clat["N"] += 1
    with pytest.raises(FioOutputError) as caught:
        _parse(doc)
    assert str(caught.value) == (
        f"edited.json: jobs[0].write.clat_ns.N is {clat['N']} but its bins hold "
        f"{clat['N'] - 1} samples"
    )


@pytest.mark.parametrize("key", ["-5", "1_000", "+5", " 5", "5 ", "٣", "0x10", "007"])
def test_bin_keys_are_plain_non_negative_integers(key: str) -> None:
    doc = _doc(JSON_PLUS)
    bins = doc["jobs"][0]["write"]["clat_ns"]["bins"]
    first = next(iter(bins))
    bins[key] = bins.pop(first)  # same counts: only the key is wrong
    with pytest.raises(FioOutputError) as caught:
        _parse(doc)
    assert str(caught.value) == (
        "edited.json: jobs[0].write.clat_ns.bins has a key that is not a latency"
    )


def test_a_zero_bin_key_is_a_latency() -> None:
    doc = _doc(JSON_PLUS)
    bins = doc["jobs"][0]["write"]["clat_ns"]["bins"]
    bins["0"] = bins.pop(next(iter(bins)))
    run = _parse(doc)
    assert run.jobs[0].ops["write"].latency.bins_ns.latencies_ns[0] == 0


def test_a_job_named_all_clients_in_plain_output_hides_nothing() -> None:
    doc = _doc(PLAIN)
    job = doc["jobs"][0]
    doc["jobs"] = [
        {**copy.deepcopy(job), "jobname": "All clients"},
        {**copy.deepcopy(job), "jobname": "other"},
    ]
    assert [j.name for j in _parse(doc).jobs] == ["All clients", "other"]


def test_client_server_output_still_reads_its_aggregate() -> None:
    run = fioparse.parse_file(CLIENT_SERVER)
    assert [j.name for j in run.jobs] == ["All clients"]


# --- archives ---------------------------------------------------------------------------


def _empty_members_tar_gz(path: Path, members: int) -> Path:
    """A .tar.gz of `members` empty `run/r.json` members, written in a few large chunks
    (one header repeated: tar allows a name twice, and the walk must not care)."""
    info = tarfile.TarInfo("run/r.json")
    info.mtime = 1_700_000_000
    header = info.tobuf(format=tarfile.USTAR_FORMAT)
    chunk = header * 10_000
    with gzip.open(path, "wb", compresslevel=1) as out:
        for _ in range(members // 10_000):
            out.write(chunk)
        out.write(header * (members % 10_000))
        out.write(b"\0" * tarfile.RECORDSIZE)
    return path


def test_an_archive_of_many_empty_members_is_refused_by_its_member_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """200,000 members cost nothing in bytes; the member limit stops the walk early."""
    monkeypatch.setattr(discover, "MAX_ARCHIVE_MEMBERS", 5_000)
    archive = _empty_members_tar_gz(tmp_path / "many.tar.gz", 200_000)
    found = list(discover.discover([str(archive)]))
    sources = [item for item in found if isinstance(item, discover.Source)]
    refusals = [item for item in found if isinstance(item, discover.Unreadable)]
    assert len(sources) == 5_000  # stopped at the limit, not after 200,000
    assert refusals == [
        discover.Unreadable(
            str(archive),
            "has more than 5000 members (nested archives counted), more than any battery "
            "of fio results: the rest is not read",
        )
    ]


def test_headers_of_empty_members_count_against_the_byte_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(discover, "MAX_ARCHIVE_BYTES", 1 << 20)
    archive = _empty_members_tar_gz(tmp_path / "headers.tar.gz", 4_000)  # 2 MB of headers
    found = list(discover.discover([str(archive)]))
    assert found[-1] == discover.Unreadable(
        str(archive),
        "unpacks to more than 1 MiB (nested archives counted at each level), more than any "
        "battery of fio results: the rest is not read",
    )
    assert len(found) - 1 <= (1 << 20) // tarfile.BLOCKSIZE  # refused at 1 MiB of headers


def test_a_pax_header_is_never_read_whole_beyond_its_allowance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tarfile reads a member's pax records into memory before the walk sees the member:
    300 MiB of them fit in a 1.4 MB .tar.gz. The stream stops it at the allowance."""
    monkeypatch.setattr(discover, "MAX_HEADER_BYTES", 64 << 10)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(_member("ok.json", b"{}"), io.BytesIO(b"{}"))
        padded = _member("padded.json", b"{}")
        padded.pax_headers = {"comment": "x" * (1 << 20)}
        tar.addfile(padded, io.BytesIO(b"{}"))
    archive = tmp_path / "pax.tar.gz"
    archive.write_bytes(gzip.compress(buffer.getvalue(), 1))
    found = list(discover.discover([str(archive)]))
    assert [item.name for item in found] == [f"{archive}/ok.json", str(archive)]
    assert found[-1].reason == (
        "a member's headers (pax or long-name records) take more than 0.0625 MiB, more than "
        "any fio result's: the rest is not read"
    )


def _member(name: str, data: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mtime = len(data), 1_700_000_000
    return info


def test_files_that_are_not_fio_output_are_listed_up_to_a_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(load_module, "MAX_LISTED_NOT_FIO", 10)
    for index in range(25):
        (tmp_path / f"empty-{index:02}.json").write_bytes(b"")
    loaded = load_module.load([str(tmp_path)])
    assert loaded.files_read == 25 and loaded.files_parsed == 0
    assert len(loaded.unreadable) == 11
    assert loaded.unreadable[-1] == discover.Unreadable(
        "(15 more)",
        "15 more files that are not fio output, not listed: 25 in all, the first 10 are above",
    )


# --- folders: FIFOs and depth -----------------------------------------------------------


def _report(tmp_path: Path, *paths: str) -> tuple[int, str, dict]:
    out = tmp_path / "out"
    result = fioprobe("report", *paths, "-o", str(out), "--quiet", timeout=CLI_TIMEOUT)
    stderr = result.stderr.decode()
    assert "Traceback" not in stderr, stderr
    data = json.loads((out / "report.json").read_text()) if result.returncode == 0 else {}
    return result.returncode, stderr, data


def _unreadable(data: dict) -> dict[str, str]:
    return {u["name"]: u["reason"] for u in data["files"]["unreadable"]}


def test_fifos_named_like_results_are_never_opened(tmp_path: Path) -> None:
    """Opening a FIFO for reading blocks until a writer comes: the report would hang."""
    tree = tmp_path / "results"
    tree.mkdir()
    (tree / "good.json").write_bytes(PLAIN.read_bytes())
    os.mkfifo(tree / "stuck.json")
    os.mkfifo(tree / "stuck.tar.gz")
    named = tmp_path / "named.json"
    os.mkfifo(named)
    code, stderr, data = _report(tmp_path, str(tree), str(named))
    assert code == 0, stderr
    assert _unreadable(data) == {
        str(tree / "stuck.json"): "not a regular file (a FIFO)",
        str(tree / "stuck.tar.gz"): "not a regular file (a FIFO)",
        str(named): "not a regular file (a FIFO)",
    }


def test_a_thousand_folders_deep_is_a_line_not_a_recursion_error(tmp_path: Path) -> None:
    tree = tmp_path / "results"
    tree.mkdir()
    folders = [tree]
    for _ in range(1_100):  # mkdir(parents=True) and rmtree recurse themselves
        folders.append(folders[-1] / "d")
        folders[-1].mkdir()
    (folders[-1] / "deep.json").write_bytes(PLAIN.read_bytes())
    (tree / "top.json").write_bytes(PLAIN.read_bytes())
    try:
        code, stderr, data = _report(tmp_path, str(tree))
    finally:
        (folders[-1] / "deep.json").unlink()
        for folder in reversed(folders[1:]):
            folder.rmdir()
    assert code == 0, stderr
    assert data["files"]["parsed"] == 1  # top.json; the deep one is not reached
    limit = discover.MAX_FOLDER_DEPTH
    too_deep = str(tree.joinpath(*(["d"] * (limit + 1))))
    assert _unreadable(data) == {
        too_deep: f"folders nested more than {limit} deep below {tree}; not read"
    }


# --- run times --------------------------------------------------------------------------


def _stamped(path: Path, seconds: float) -> Path:
    doc = _doc(PLAIN)
    doc["timestamp"] = int(seconds)
    doc["timestamp_ms"] = int(seconds * 1000)
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    ("seconds", "shown", "why"),
    [
        (4_102_444_800, "2100-01-01 00:00:00 UTC", "is later than now plus 10 minutes"),
        (86_400, "1970-01-02 00:00:00 UTC", "is before 2005-01-01, before fio existed"),
    ],
)
def test_backfill_refuses_a_run_time_no_fio_run_can_have(
    tmp_path: Path, seconds: int, shown: str, why: str
) -> None:
    good = tmp_path / "in" / "good.json"
    good.parent.mkdir()
    good.write_bytes(PLAIN.read_bytes())
    bad = _stamped(tmp_path / "in" / "stamped.json", seconds)
    out = tmp_path / "blocks"
    result = fioprobe("backfill", str(tmp_path / "in"), "-o", str(out), timeout=CLI_TIMEOUT)
    assert result.returncode == 3
    assert result.stderr.decode() == (
        f"fioprobe: error: {bad}: run time {shown} (from fio) {why}, no fio run's time: "
        "backfill refused, nothing written\n"
    )
    assert not out.exists()


def test_backfill_refuses_an_archive_member_dated_by_a_zeroed_header(tmp_path: Path) -> None:
    """Without a fio timestamp the member's mtime is the run time: 0 is no run's."""
    doc = _doc(PLAIN)
    del doc["timestamp"], doc["timestamp_ms"]
    data = json.dumps(doc).encode()
    archive = tmp_path / "old.tar"
    with tarfile.open(archive, "w") as tar:
        info = tarfile.TarInfo("run/result.json")
        info.size, info.mtime = len(data), 0
        tar.addfile(info, fileobj=io.BytesIO(data))
    out = tmp_path / "blocks"
    result = fioprobe("backfill", str(archive), "-o", str(out), timeout=CLI_TIMEOUT)
    assert result.returncode == 3
    assert result.stderr.decode() == (
        f"fioprobe: error: {archive}/run/result.json: run time 1970-01-01 00:00:00 UTC "
        "(from file mtime) is before 2005-01-01, before fio existed, no fio run's time: "
        "backfill refused, nothing written\n"
    )
    assert not out.exists()


def test_backfill_prints_the_span_before_promtool_runs(tmp_path: Path) -> None:
    """A promtool that is not there fails after the span line: it was printed first."""
    out = tmp_path / "blocks"
    result = fioprobe("backfill", str(PLAIN), "-o", str(out), "--promtool",
                      "/nonexistent/promtool", timeout=CLI_TIMEOUT)  # fmt: skip
    lines = result.stderr.decode().splitlines()
    assert result.returncode == 1
    assert lines[0] == (
        "fioprobe: backfilling 1 push from 2025-12-03 00:38:18 UTC to 2025-12-03 00:38:18 UTC: "
        "the Prometheus retention must reach back to the first"
    )
    assert "not installed" in lines[1]


def test_report_marks_implausible_times_and_survives_any_tar_time(tmp_path: Path) -> None:
    """A GNU tar header holds times far beyond any calendar; the report shows them as
    numbers, marked, instead of failing to format them."""
    doc = _doc(PLAIN)
    del doc["timestamp"], doc["timestamp_ms"]
    data = json.dumps(doc).encode()
    archive = tmp_path / "far.tar"
    with tarfile.open(archive, "w", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo("run/result.json")
        info.size, info.mtime = len(data), 2**70
        tar.addfile(info, fileobj=io.BytesIO(data))
    future = _stamped(tmp_path / "future.json", 4_102_444_800)
    code, stderr, _ = _report(tmp_path, str(archive), str(future))
    assert code == 0, stderr
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "2100-01-01 00:00:00 UTC (fio; implausible: is later than now plus 10 minutes)" in (
        markdown
    )
    assert "1.18059e+21 s after 1970-01-01 UTC (file mtime; implausible: is later than" in (
        markdown
    )


# --- demo: credentials and redirects ----------------------------------------------------


class _Recorder(http.server.BaseHTTPRequestHandler):
    """The other origin: answers 200 to anything and records the Authorization it saw."""

    seen: list[str | None]

    def _answer(self) -> None:
        self.seen.append(self.headers.get("Authorization"))
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


class _Redirector(http.server.BaseHTTPRequestHandler):
    """Stands for a Grafana (or anything on its URL) that sends every request elsewhere."""

    target: str

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(302)
        self.send_header("Location", self.target + self.path)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def redirect_to_recorder() -> Iterator[tuple[str, list[str | None]]]:
    """(URL that answers 302, what the other origin saw) on two free ports of 127.0.0.1."""
    seen: list[str | None] = []
    recorder = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), type("Recorder", (_Recorder,), {"seen": seen})
    )
    target = f"http://127.0.0.1:{recorder.server_address[1]}"
    redirector = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), type("Redirector", (_Redirector,), {"target": target})
    )
    threads = [
        threading.Thread(target=s.serve_forever, daemon=True) for s in (recorder, redirector)
    ]
    for thread in threads:
        thread.start()
    try:
        yield f"http://127.0.0.1:{redirector.server_address[1]}", seen
    finally:
        for server in (recorder, redirector):
            server.shutdown()
            server.server_close()
        for thread in threads:
            thread.join(timeout=10)


def test_grafana_token_never_follows_a_redirect(redirect_to_recorder) -> None:
    from fioprobe.demo import chain as demo

    url, seen = redirect_to_recorder
    with pytest.raises(OSError) as caught:
        demo.provision_grafana(url, "secret-token", "http://127.0.0.1:9")
    message = str(caught.value)
    assert message.startswith(f"{url}/api/datasources answered 302 Found to ")
    assert message.endswith("not followed (the request carries credentials)")
    assert "\n" not in message
    assert seen == []  # the other origin was never asked, with or without the token


def test_a_readiness_check_with_credentials_never_follows_a_redirect(
    redirect_to_recorder, tmp_path: Path
) -> None:
    from fioprobe.services import servers

    url, seen = redirect_to_recorder
    service = servers.Service(
        "redirecting", ["true"], int(url.rsplit(":", 1)[1]), tmp_path,
        ready_headers={"Authorization": "Basic c2VjcmV0"},
    )  # fmt: skip
    with pytest.raises(servers.ServiceError, match="did not answer"):
        service.wait_ready(timeout=2)
    assert seen == []


def test_skipped_file_names_are_printed_inert(tmp_path: Path) -> None:
    """A file name is the archive's, not fioprobe's: a newline or an escape sequence in one
    that backfill skips reaches stderr escaped, on the one line of its own."""
    results = tmp_path / "results"
    results.mkdir()
    (results / "run\n\x1b[31mforged.json").write_text("not fio output")
    proc = subprocess.run(
        [sys.executable, "-m", "fioprobe", "backfill", str(results), "-o", str(tmp_path / "out")],
        capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    err = proc.stderr.decode()
    assert "\x1b" not in err, err
    skipped = [line for line in err.splitlines() if line.startswith("fioprobe: skipped ")]
    assert len(skipped) == 1 and "\\x1b[31mforged.json" in skipped[0], err
