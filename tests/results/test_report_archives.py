"""Hostile archives in `fioprobe report` and `backfill`: nested archives are streamed.

A nested archive used to be read whole into memory before it was opened, so a 7 MB tar.gz
holding a big uncompressed .tar inside took gigabytes. These archives are generated here,
small on disk (zeros compress ~1000:1), and the real CLI reads them in a subprocess whose
peak RSS is measured.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import corpus_files
from fioprobe.results import discover
from fioprobe.results.load import load

GOOD = corpus_files(negative=False)
#: What the CLI may use on a hostile archive. Reading the 1 GiB nested .tar into memory, as
#: before, needs over 1 GiB; streaming it needs what a report of one file needs.
RSS_LIMIT_BYTES = 300 * 1024 * 1024
BIG_BYTES = 1024**3


class _TarStream(io.RawIOBase):
    """An uncompressed tar archive generated on the fly: (name, bytes or a zero count)
    members; `size` is known up front, so it can be a member of another archive without
    ever being written out or held in memory."""

    def __init__(self, members: list[tuple[str, bytes | int]]) -> None:
        self.pieces: list[bytes | int] = []
        for name, content in members:
            info = tarfile.TarInfo(name)
            info.size = content if isinstance(content, int) else len(content)
            info.mtime = 1_600_000_000
            self.pieces += [
                info.tobuf(tarfile.USTAR_FORMAT, "utf-8", "strict"),
                content,
                -info.size % 512,
            ]
        self.pieces.append(1024)  # the end-of-archive blocks
        self.size = sum(p if isinstance(p, int) else len(p) for p in self.pieces)
        self.index = self.offset = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while self.index < len(self.pieces):
            piece = self.pieces[self.index]
            length = piece if isinstance(piece, int) else len(piece)
            if self.offset < length:
                count = min(len(buffer), length - self.offset)
                if isinstance(piece, int):
                    buffer[:count] = bytes(count)
                else:
                    buffer[:count] = piece[self.offset : self.offset + count]
                self.offset += count
                return count
            self.index, self.offset = self.index + 1, 0
        return 0


def _add(tar: tarfile.TarFile, name: str, data: bytes | _TarStream) -> None:
    info = tarfile.TarInfo(name)
    info.mtime = 1_600_000_000
    if isinstance(data, _TarStream):
        info.size = data.size
        tar.addfile(info, io.BufferedReader(data, 1024 * 1024))
    else:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def _gz(members: list[tuple[str, bytes | _TarStream]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        for name, data in members:
            _add(tar, name, data)
    return buffer.getvalue()


def hostile_archive(path: Path) -> Path:
    """battery.tar.gz > b1_c1-fio-h1.tar.gz > results.tar (1 GiB, uncompressed) holding one
    real fio result and a 1 GiB member of zeros, plus a 16 MiB "result" of zeros (under the
    per-result cap, so it is read and refused by the parser)."""
    result = GOOD[0].read_bytes()
    inner = _TarStream(
        [("run1/result.json", result), ("run1/zeros.json", BIG_BYTES), ("run1/pad.log", 16 << 20)]
    )
    middle = _gz([("results.tar", inner)])
    path.write_bytes(_gz([("b1_c1-fio-h1.tar.gz", middle)]))
    return path


def peak_rss(*args: str) -> tuple[subprocess.CompletedProcess[bytes], int]:
    """Run the CLI from a fresh Python whose only child it is, and that child's peak RSS
    (this pytest process's own children include Prometheus and Chromium)."""
    probe = (
        "import json, resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True, timeout=600)\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024\n"
        "print(json.dumps([done.returncode, done.stdout.decode(errors='replace'),\n"
        "                  done.stderr.decode(errors='replace'), peak]))\n"
    )
    command = [sys.executable, "-c", probe, sys.executable, "-m", "fioprobe", *args]
    outer = subprocess.run(command, capture_output=True, timeout=660, check=True)
    code, stdout, stderr, peak = json.loads(outer.stdout)
    return subprocess.CompletedProcess(args, code, stdout.encode(), stderr.encode()), peak


def test_peak_rss_of_report_on_nested_big_archive_is_bounded(tmp_path: Path) -> None:
    archive = hostile_archive(tmp_path / "battery.tar.gz")
    assert archive.stat().st_size < 16 * 1024 * 1024  # small on disk
    out = tmp_path / "out"
    result, peak = peak_rss("report", str(archive), "-o", str(out), "--quiet")
    assert result.returncode == 0, result.stderr.decode()
    assert peak < RSS_LIMIT_BYTES, f"peak RSS {peak / 2**20:.0f} MiB"
    data = json.loads((out / "report.json").read_text())
    assert data["files"]["parsed"] == 1, data["files"]
    unreadable = {u["name"]: u["reason"] for u in data["files"]["unreadable"]}
    nested = f"{archive}/b1_c1-fio-h1.tar.gz/results.tar/run1"
    assert unreadable[f"{nested}/zeros.json"] == f"too large for a fio result ({BIG_BYTES} bytes)"
    assert f"{nested}/pad.log" in unreadable  # read (under the cap), not a fio output


def test_peak_rss_of_backfill_on_nested_big_archive_is_bounded(tmp_path: Path) -> None:
    archive = hostile_archive(tmp_path / "battery.tar.gz")
    result, peak = peak_rss("backfill", str(archive), "-o", str(tmp_path / "blocks"))
    assert result.returncode == 0, result.stderr.decode()
    assert peak < RSS_LIMIT_BYTES, f"peak RSS {peak / 2**20:.0f} MiB"
    assert "too large for a fio result" in result.stderr.decode()
    assert "from 1 files" in result.stderr.decode()


def _nested_chain(levels: int) -> bytes:
    """An archive of an archive of ... `levels` archives deep, one fio result at the bottom."""
    data = _gz([("b1_c1-fio-h1/result.json", GOOD[0].read_bytes())])
    for level in range(levels - 1, 0, -1):
        data = _gz([(f"level{level}.tar.gz", data)])
    return data


def test_nesting_depth_is_capped(tmp_path: Path) -> None:
    limit = discover.MAX_ARCHIVE_DEPTH
    (tmp_path / "ok.tar.gz").write_bytes(_nested_chain(limit))
    (tmp_path / "deep.tar.gz").write_bytes(_nested_chain(limit + 1))
    loaded = load([str(tmp_path / "ok.tar.gz"), str(tmp_path / "deep.tar.gz")])
    assert loaded.files_parsed == 1
    assert [e.group for e in loaded.entries][:1] == ["c1"]
    [deep] = loaded.unreadable
    assert deep.name.startswith(str(tmp_path / "deep.tar.gz") + "/level1.tar.gz/")
    assert deep.name.endswith(f"/level{limit}.tar.gz")
    assert deep.reason == f"an archive nested more than {limit} archives deep; not read"


def test_unpacked_bytes_per_archive_are_capped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the cap the walk stops with one line for the archive; what came before stays."""
    result = GOOD[0].read_bytes()
    members: list[tuple[str, bytes | _TarStream]] = [
        ("b1_c1-fio-h1/first.json", result),
        ("b1_c1-fio-h1/padding.bin", bytes(4 << 20)),
        ("b1_c1-fio-h1/never.json", result),
    ]
    archive = tmp_path / "bomb.tar.gz"
    archive.write_bytes(_gz(members))
    monkeypatch.setattr(discover, "MAX_ARCHIVE_BYTES", 3 << 20)
    loaded = load([str(archive)])
    assert loaded.files_parsed == 1
    [stopped] = loaded.unreadable
    assert stopped.name == str(archive)
    assert stopped.reason.startswith("unpacks to more than 3 MiB (nested archives counted")
    monkeypatch.setattr(discover, "MAX_ARCHIVE_BYTES", 64 << 20)
    assert load([str(archive)]).files_parsed == 2


def test_explicit_device_is_never_read(tmp_path: Path) -> None:
    """/dev/zero reports size 0 and never ends: a device is not a result, even named."""
    found = list(discover.discover(["/dev/zero"]))
    assert found == [discover.Unreadable("/dev/zero", "not a regular file (a character device)")]


def _three_results_tar() -> tuple[bytes, list[int]]:
    """An uncompressed tar of three fio results and where each member's header starts."""
    raw = io.BytesIO()
    starts = []
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for k, path in enumerate(GOOD[:3]):
            starts.append(raw.tell())
            _add(tar, f"battery/host-{k}/{path.name}", path.read_bytes())
    return raw.getvalue(), starts


#: The file name's ending for each kind of archive.
SUFFIX = {"tar": ".tar", "gz": ".tar.gz", "bz2": ".tar.bz2", "xz": ".tar.xz"}


def _compressed(data: bytes, kind: str) -> bytes:
    if kind == "gz":
        return gzip.compress(data, mtime=0)
    if kind == "bz2":
        return bz2.compress(data)
    if kind == "xz":
        return lzma.compress(data)
    return data


@pytest.mark.parametrize("kind", ["tar", "gz", "bz2", "xz"])
def test_archive_cut_between_members_is_damaged_not_short(tmp_path: Path, kind: str) -> None:
    """tarfile alone reads an archive cut off right before a member's header as a whole
    archive with fewer members: results would go missing without a word."""
    data, starts = _three_results_tar()
    whole = tmp_path / f"whole{SUFFIX[kind]}"
    whole.write_bytes(_compressed(data, kind))
    complete = load([str(whole)])
    assert complete.files_parsed == 3 and complete.unreadable == []

    cut = tmp_path / f"cut{SUFFIX[kind]}"
    cut.write_bytes(_compressed(data[: starts[2]], kind))  # the third header is gone
    loaded = load([str(cut)])
    assert loaded.files_parsed == 2  # what is there is still read ...
    (damaged,) = loaded.unreadable  # ... and the archive is named as damaged
    assert damaged.name == str(cut)
    assert damaged.reason == "archive is damaged: it ends before its end-of-archive block"


def test_unreadable_header_between_members_is_damaged(tmp_path: Path) -> None:
    data, starts = _three_results_tar()
    spoiled = bytearray(data)
    spoiled[starts[1] + 148 : starts[1] + 156] = b"9999999\0"  # the header's checksum
    archive = tmp_path / "spoiled.tar"
    archive.write_bytes(bytes(spoiled))
    loaded = load([str(archive)])
    assert loaded.files_parsed == 1
    (damaged,) = loaded.unreadable
    assert damaged.reason == "archive is damaged: a header is unreadable; the rest is not read"


@pytest.mark.parametrize(("kind", "word"), [("gz", "end-of-stream"), ("bz2", "end-of-stream"),
                                            ("xz", "end-of-stream")])  # fmt: skip
def test_compressed_stream_cut_after_the_end_block_is_damaged(
    tmp_path: Path, kind: str, word: str
) -> None:
    """Every result is there but the compressed stream stops short of its end (gzip's CRC
    and length are the last bytes): the file is not what was written, and says so."""
    data, _ = _three_results_tar()
    compressed = _compressed(data, kind)
    archive = tmp_path / f"short{SUFFIX[kind]}"
    archive.write_bytes(compressed[:-4])
    loaded = load([str(archive)])
    (damaged,) = loaded.unreadable
    assert damaged.reason.startswith("archive is damaged: ") and word in damaged.reason, damaged
