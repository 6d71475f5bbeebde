"""Probe profiles: plain fio job files in jobs/, with a declared IO budget.

A profile is checked against an allowlist before fio ever sees it: every option must be one
of `OPTIONS`, written under its canonical name, with a value of the listed form. Everything
else is refused with the file, the line and the option: `include`, `$` expansions, commands
(`exec_*`), files and directories, logs, memory maps, triggers, other IO engines, aliases
(fio accepts `readwrite` for `rw`, `timeout` for `runtime`, ...): if it is not listed, it is
not run. fio never reads the profile file itself: the runner writes the checked options,
under its own `[global]` section that supplies the directory, into a fresh job file.

The budget is what fio *can* do with the profile, computed from every option that multiplies
IO (size, io_size, filesize, nrfiles, numjobs, loops, time_based with runtime and rate), and
must fit the budget the profile declares. It includes the files fio lays out before a read
(or an overwrite), which fio's own byte counts never show: each job lays out nrfiles files of
filesize each, whatever `size` says. After a run, fio's own byte counts are checked against
the declared budget again (`runner`).

Memory is bounded too, apart from the byte budget: fio allocates a buffer of the largest
block size for every IO in flight of every job, so `bs` and `bs x iodepth x numjobs` have
fixed limits (`MAX_BLOCK_BYTES`, `MAX_BUFFER_BYTES`) that no budget line can raise.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from fioprobe.errors import FailureReason, UsageError

_SIZE = re.compile(r"^(\d{1,15})([kmgt]?)(i?b?)$", re.IGNORECASE)
_DURATION = re.compile(r"^(\d{1,9})(ms|s|m|h)?$", re.IGNORECASE)
_KEY = re.compile(r"^[a-z][a-z0-9_]*$")
_SECTION = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_BUDGET = re.compile(r"^#\s*fioprobe-budget-(bytes|seconds):\s*(\d+)\s*$")

#: The largest `bs`. Block devices split larger IOs (max_sectors_kb is at most a few MiB), so a
#: larger block measures nothing more; it only costs the probe's memory.
MAX_BLOCK_BYTES = 16 * 1024**2
#: The most IO buffer memory fio may allocate: bs x iodepth x numjobs (one buffer of the
#: largest block per IO in flight, per job). Measured with fio 3.33: 64 MiB of buffers is
#: 95 MB of fio's RSS (33 MB at 4 MiB), which leaves room for fioprobe itself within the
#: probe pod's 256Mi memory limit (manifests); bs=4m, iodepth=64, numjobs=4 was 1 GB.
MAX_BUFFER_BYTES = 64 * 1024**2


class ProfileError(UsageError):
    """A profile or override that is unsafe, malformed, or over its budget (exit 2)."""

    reason = FailureReason.UNSAFE_TARGET


# --- value forms ----------------------------------------------------------------------------


def parse_size(text: str) -> int:
    """fio-style size: 4m, 64M, 1g, 4096, 16Mi, 4KiB (fio's default kb_base is 1024)."""
    match = _SIZE.match(text.strip())
    if not match:
        raise ProfileError(f"not a size: {text!r} (use e.g. 4m, 64m, 1g)")
    number, unit = int(match.group(1)), match.group(2).lower()
    return number << 10 * " kmgt".index(unit or " ")


def parse_duration(text: str) -> float:
    """fio-style time: 20, 20s, 500ms, 2m (fio's default unit is seconds)."""
    match = _DURATION.match(text.strip())
    if not match:
        raise ProfileError(f"not a duration: {text!r} (use e.g. 5, 5s, 1m)")
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[(match.group(2) or "s").lower()]
    return int(match.group(1)) * scale


def _size(text: str | None) -> None:
    if text is None or parse_size(text) <= 0:
        raise ProfileError("needs a positive size such as 4k or 64m")


def _duration(text: str | None) -> None:
    if text is None:
        raise ProfileError("needs a duration such as 5 or 500ms")
    parse_duration(text)


def _integer(low: int, high: int) -> Callable[[str | None], None]:
    def check(text: str | None) -> None:
        if text is None or not re.fullmatch(r"\d{1,9}", text) or not low <= int(text) <= high:
            raise ProfileError(f"needs a whole number from {low} to {high}")

    return check


def _choice(*values: str) -> Callable[[str | None], None]:
    def check(text: str | None) -> None:
        if text not in values:
            raise ProfileError(f"must be one of {', '.join(values)}")

    return check


def _flag(text: str | None) -> None:
    """fio's boolean options: bare (`time_based`), 0 or 1."""
    if text not in (None, "0", "1"):
        raise ProfileError("is a flag: write it alone, =0 or =1")


def _percentile_list(text: str | None) -> None:
    parts = (text or "").split(":")
    if not 1 <= len(parts) <= 20 or not all(
        re.fullmatch(r"\d{1,3}(\.\d{1,6})?", p) and 0 < float(p) <= 100 for p in parts
    ):
        raise ProfileError("needs up to 20 percentiles such as 50:99:99.9")


#: Every option a profile or an override may use, by canonical name, with its value check.
#: Nothing outside this table reaches fio. Options that multiply IO are read by `io_bound`.
#: Deliberately absent: anything naming a path, device, log, command, memory map or trigger;
#: value forms with ranges, splits or per-direction lists (bsrange, bssplit, `bs=4k,1m`);
#: engines beyond plain files; `thread`, which the runner sets itself (see `Profile.render`).
OPTIONS: dict[str, Callable[[str | None], None]] = {
    "ioengine": _choice(
        "sync", "psync", "vsync", "pvsync", "pvsync2", "libaio", "io_uring", "posixaio"
    ),
    "rw": _choice("read", "write", "randread", "randwrite", "rw", "readwrite", "randrw"),
    "rwmixread": _integer(0, 100),
    "bs": _size,
    "direct": _flag,
    "buffered": _flag,
    "iodepth": _integer(1, 256),
    "size": _size,
    "io_size": _size,
    "filesize": _size,
    "nrfiles": _integer(1, 64),
    "numjobs": _integer(1, 16),
    "loops": _integer(1, 1000),
    "runtime": _duration,
    "time_based": _flag,
    "rate": _size,
    "rate_iops": _integer(1, 10_000_000),
    "fsync": _integer(0, 1_000_000),
    "fdatasync": _integer(0, 1_000_000),
    "end_fsync": _flag,
    "fsync_on_close": _flag,
    "sync": _choice("0", "1", "none", "sync", "dsync"),
    "overwrite": _flag,
    "invalidate": _flag,
    "randrepeat": _flag,
    "norandommap": _flag,
    "fallocate": _choice("none", "native", "posix", "keep", "0", "1"),
    "group_reporting": _flag,
    "clat_percentiles": _flag,
    "lat_percentiles": _flag,
    "percentile_list": _percentile_list,
}
#: Options a target's configuration may override, within the profile's budget.
OVERRIDABLE = ("size", "io_size", "runtime")


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    path: Path
    #: [(section, [(option, value or None)])] in file order: at most a [global], then one job.
    sections: list[tuple[str, list[tuple[str, str | None]]]]
    budget_bytes: int
    budget_seconds: int
    overrides: dict[str, str] = field(default_factory=dict)

    def option(self, name: str) -> str | None:
        """The effective value of `name` (the job section over [global], overrides last)."""
        if name in self.overrides:
            return self.overrides[name]
        value = None
        for _, options in self.sections:
            for key, option_value in options:
                if key == name:
                    value = "" if option_value is None else option_value
        return value

    def _flag(self, name: str) -> bool:
        value = self.option(name)
        return value is not None and value != "0"

    def _int(self, name: str, default: int) -> int:
        value = self.option(name)
        return int(value) if value else default

    def _bytes(self, name: str) -> int:
        value = self.option(name)
        return parse_size(value) if value else 0

    @property
    def directions(self) -> int:
        rw = self.option("rw") or "read"
        return 2 if rw in ("rw", "readwrite", "randrw") else 1

    @property
    def reads(self) -> bool:
        return "read" in (self.option("rw") or "read") or self.option("rw") in ("rw", "randrw")

    @property
    def file_bytes(self) -> int:
        """Bytes of files one job lays out, and the most one loop of it reads or writes.

        fio divides `size` over nrfiles files unless `filesize` is given; then it lays out
        nrfiles files of filesize each, whatever `size` says (a read job writes them all
        before reading `size` of them): the larger of the two is the bound.
        """
        return max(self._bytes("size"), self._int("nrfiles", 1) * self._bytes("filesize"))

    @property
    def footprint_bytes(self) -> int:
        """Disk space the run needs at most: every job's files."""
        return self._int("numjobs", 1) * self.file_bytes

    @property
    def buffer_bytes(self) -> int:
        """IO buffer memory fio allocates: one block per IO in flight, per job."""
        return self.block_bytes * self._int("iodepth", 1) * self._int("numjobs", 1)

    @property
    def block_bytes(self) -> int:
        """The block size (fio's default is 4 KiB)."""
        return self._bytes("bs") or 4096

    @property
    def size_bytes(self) -> int:
        return self._bytes("size")

    @property
    def runtime_seconds(self) -> float:
        value = self.option("runtime")
        return parse_duration(value) if value else 0.0

    @property
    def io_bytes_max(self) -> int | float:
        """The most bytes one run can read and write, laying out files included.

        Per job: io_size (else size) per loop, times loops; when reads need the files laid
        out first (or overwrite=1), the files are written once more. With time_based, fio
        loops until runtime: only a rate bounds it, so without one the bound is infinite.
        A rate also caps the count-based bound. Then times numjobs.
        """
        per_loop = self._bytes("io_size") or self.file_bytes
        by_count: float = per_loop * self._int("loops", 1)
        if self._flag("time_based"):
            by_count = math.inf
        rate = self._rate_bytes_per_second()
        if rate is not None:
            by_count = min(by_count, rate * self.directions * math.ceil(self.runtime_seconds))
        layout = self.file_bytes if (self.reads or self._flag("overwrite")) else 0
        total = (by_count + layout) * self._int("numjobs", 1)
        return total if math.isinf(total) else int(total)

    def _rate_bytes_per_second(self) -> int | None:
        rates = []
        if self.option("rate"):
            rates.append(self._bytes("rate"))
        if self.option("rate_iops"):
            rates.append(self._int("rate_iops", 0) * self.block_bytes)
        return min(rates) if rates else None

    def with_overrides(self, overrides: Mapping[str, str | int]) -> Profile:
        """A copy with size/io_size/runtime overridden, each value checked, within budget."""
        clean: dict[str, str] = {}
        for key, value in overrides.items():
            if key not in OVERRIDABLE:
                raise ProfileError(
                    f"{self.name}: {key!r} cannot be overridden (only {', '.join(OVERRIDABLE)})"
                )
            text = str(value)
            try:
                OPTIONS[key](text)
            except ProfileError as exc:
                raise ProfileError(f"{self.name}: override {key}={text!r}: {exc}") from None
            clean[key] = text
        profile = Profile(
            self.name,
            self.path,
            self.sections,
            self.budget_bytes,
            self.budget_seconds,
            {**self.overrides, **clean},
        )
        profile.check_budget()
        return profile

    def check_budget(self) -> None:
        most = self.io_bytes_max
        if math.isinf(most):
            raise ProfileError(
                f"{self.name}: time_based without rate or rate_iops has no IO bound; "
                "give a rate, or drop time_based"
            )
        if most > self.budget_bytes:
            raise ProfileError(
                f"{self.name}: up to {most} bytes of IO per run exceeds the "
                f"profile's budget of {self.budget_bytes} bytes"
            )
        runtime = self.runtime_seconds
        if runtime <= 0 or runtime > self.budget_seconds:
            raise ProfileError(
                f"{self.name}: runtime {runtime:g}s must be set and at most the budget of "
                f"{self.budget_seconds}s"
            )
        if self.footprint_bytes <= 0:
            raise ProfileError(f"{self.name}: size (or nrfiles x filesize) must be set")
        self.check_memory()

    def check_memory(self) -> None:
        """fio's IO buffers within fixed limits, whatever the byte budget allows."""
        if self.block_bytes > MAX_BLOCK_BYTES:
            raise ProfileError(
                f"{self.name}: bs of {self.block_bytes} bytes exceeds the limit of "
                f"{MAX_BLOCK_BYTES} bytes"
            )
        if self.buffer_bytes > MAX_BUFFER_BYTES:
            raise ProfileError(
                f"{self.name}: bs x iodepth x numjobs is {self.buffer_bytes} bytes of IO "
                f"buffers, over the limit of {MAX_BUFFER_BYTES} bytes"
            )

    def render(self, directory: str) -> str:
        """The job file fio runs: fioprobe's [global] first, then the checked options.

        `directory` is the only path fio gets. `thread`: fio forks each job as a process
        that calls setsid(), out of reach of a kill of fio's process group; as threads of
        one process, a timeout or SIGTERM stops all of fio at once. A profile cannot set
        `thread` (it is not in OPTIONS), so the [global] one always holds.
        """
        lines = ["[global]", f"directory={directory}", "thread"]
        for section, options in self.sections:
            if section != "global":
                lines.append(f"[{section}]")
            for key, value in options:
                if key in self.overrides:
                    continue
                lines.append(key if value is None else f"{key}={value}")
            if section != "global":
                lines += [f"{key}={value}" for key, value in self.overrides.items()]
        return "\n".join(lines) + "\n"


def load_profile(name: str, jobs_dir: Path | None = None) -> Profile:
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,63}", name):
        raise ProfileError(f"profile name {name!r} is not a plain name like etcd-fsync")
    directory = jobs_dir or default_jobs_dir()
    path = directory / f"{name}.fio"
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProfileError(f"{path}: not UTF-8 text (bad byte at offset {exc.start})") from None
    except OSError:
        known = sorted(p.stem for p in directory.glob("*.fio")) if directory.is_dir() else []
        raise ProfileError(
            f"no profile {name!r} in {directory} (have: {', '.join(known) or 'none'})"
        ) from None
    return parse_profile(name, path, text)


def parse_profile(name: str, path: Path, text: str) -> Profile:
    budget: dict[str, int] = {}
    sections: list[tuple[str, list[tuple[str, str | None]]]] = []
    for number, raw in enumerate(text.removeprefix("\ufeff").splitlines(), 1):
        where = f"{path}:{number}"
        line = raw.strip()
        match = _BUDGET.match(line)
        if match:
            budget[match.group(1)] = int(match.group(2))
            continue
        if not line or line.startswith(("#", ";")):
            continue
        if "$" in line:
            raise ProfileError(f"{where}: '$' is not allowed (fio would expand it)")
        if line.startswith("["):
            sections.append((_section(where, line, sections), []))
            continue
        if not sections:
            raise ProfileError(f"{where}: option outside a [section]")
        key, sep, value = line.partition("=")
        key = key.strip()
        sections[-1][1].append((key, _check_option(where, key, value.strip() if sep else None)))
    if "bytes" not in budget or "seconds" not in budget:
        raise ProfileError(
            f"{path}: header must declare '# fioprobe-budget-bytes: N' and "
            "'# fioprobe-budget-seconds: N'"
        )
    if not any(section != "global" for section, _ in sections):
        raise ProfileError(f"{path}: a profile needs one job section such as [{name}]")
    profile = Profile(name, path, sections, budget["bytes"], budget["seconds"])
    profile.check_budget()
    return profile


def _section(
    where: str, line: str, sections: list[tuple[str, list[tuple[str, str | None]]]]
) -> str:
    """A section header: at most one [global], first, then exactly one job section."""
    if not line.endswith("]"):
        raise ProfileError(f"{where}: {line!r} is not a [section] header")
    section = line[1:-1].strip()
    if not _SECTION.match(section):
        raise ProfileError(f"{where}: section name {section!r} is not a plain lowercase name")
    if section == "global" and sections:
        raise ProfileError(f"{where}: [global] may only come first, once")
    if section != "global" and any(s != "global" for s, _ in sections):
        raise ProfileError(
            f"{where}: a profile has exactly one job section; [{section}] is a second"
        )
    return section


def _check_option(where: str, key: str, value: str | None) -> str | None:
    check = OPTIONS.get(key)
    if check is None:
        hint = "" if _KEY.match(key) else " (not a plain lowercase option name)"
        raise ProfileError(
            f"{where}: option {key!r} is not allowed in a probe profile{hint}; allowed: "
            "see OPTIONS in fioprobe/fio/profiles.py (files, devices, logs, commands and "
            "includes never are: the runner supplies the directory)"
        )
    try:
        check(value)
    except ProfileError as exc:
        raise ProfileError(f"{where}: {key}={value or ''}: {exc}") from None
    return value


def default_jobs_dir() -> Path:
    """jobs/ of this checkout, or $FIOPROBE_JOBS_DIR, or the image's /usr/share/fioprobe/jobs."""
    env = os.environ.get("FIOPROBE_JOBS_DIR")
    if env:
        return Path(env)
    checkout = Path(__file__).resolve().parents[3] / "jobs"
    if checkout.is_dir():
        return checkout
    return Path("/usr/share/fioprobe/jobs")
