"""Probe profiles: plain fio job files in jobs/, with a declared IO budget.

A profile never names a file, a directory or a device: the runner supplies the directory.
Options that could make fio touch anything outside the probe directory (files, devices, logs,
shell commands, sysfs) are refused when the profile is loaded, and again for overrides.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

#: Options that name paths or devices, write logs elsewhere, run commands or write sysfs.
FORBIDDEN_OPTIONS = frozenset(
    {
        "filename",
        "directory",
        "filename_format",
        "opendir",
        "unique_filename",
        "exec_prerun",
        "exec_postrun",
        "ioscheduler",
        "write_iolog",
        "read_iolog",
        "write_bw_log",
        "write_lat_log",
        "write_iops_log",
        "write_hist_log",
        "log_offset",
        "replay_redirect",
        "allow_mounted_write",
        "cgroup",
        "cgroup_nodelete",
        "include",
        "$include",
        "lockfile",
        "trim_backlog",
        "zonemode",
        "pre_read",
        "fill_device",
        "fill_fs",
        "kb_base",
        "unit_base",
        "output",
        "idle_prof",
    }
)
#: IO engines that work on regular files only (no raw devices, networks or kernel bypass).
ALLOWED_ENGINES = frozenset(
    {"sync", "psync", "vsync", "pvsync", "pvsync2", "libaio", "io_uring", "posixaio", "mmap"}
)
#: Options a target may override, within the profile's budget.
OVERRIDABLE = ("size", "io_size", "runtime")

_BUDGET = re.compile(r"^#\s*fioprobe-budget-(bytes|seconds):\s*(\d+)\s*$")
_SIZE = re.compile(r"^(\d+)\s*([kmgt]?)(i?b?)$", re.IGNORECASE)
_DURATION = re.compile(r"^(\d+)\s*(ms|s|m|h)?$", re.IGNORECASE)


class ProfileError(ValueError):
    """A profile or override that is unsafe, malformed, or over its budget."""


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    path: Path
    #: [(section, [(option, value or None)])] in file order.
    sections: list[tuple[str, list[tuple[str, str | None]]]]
    budget_bytes: int
    budget_seconds: int
    overrides: dict[str, str] = field(default_factory=dict)

    def option(self, name: str) -> str | None:
        """The effective value of `name` (last one wins, overrides last of all)."""
        if name in self.overrides:
            return self.overrides[name]
        value = None
        for _, options in self.sections:
            for key, option_value in options:
                if key == name:
                    value = option_value
        return value

    @property
    def size_bytes(self) -> int:
        return parse_size(self.option("size") or "0")

    @property
    def io_bytes_max(self) -> int:
        """The most IO one run can do: io_size (or size), plus laying out the file to read."""
        size = self.size_bytes
        io_size = parse_size(self.option("io_size") or "0") or size
        reads = "read" in (self.option("rw") or self.option("readwrite") or "")
        return io_size + (size if reads else 0)

    @property
    def runtime_seconds(self) -> float:
        return parse_duration(self.option("runtime") or "0")

    def with_overrides(self, overrides: dict[str, str | int]) -> Profile:
        """A copy with size/io_size/runtime overridden, checked against the budget."""
        clean: dict[str, str] = {}
        for key, value in overrides.items():
            if key not in OVERRIDABLE:
                raise ProfileError(
                    f"{self.name}: {key!r} cannot be overridden (only {', '.join(OVERRIDABLE)})"
                )
            clean[key] = str(value)
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
        if self.io_bytes_max > self.budget_bytes:
            raise ProfileError(
                f"{self.name}: up to {self.io_bytes_max} bytes of IO per run exceeds the "
                f"profile's budget of {self.budget_bytes} bytes"
            )
        runtime = self.runtime_seconds
        if runtime <= 0 or runtime > self.budget_seconds:
            raise ProfileError(
                f"{self.name}: runtime {runtime:g}s must be set and at most the budget of "
                f"{self.budget_seconds}s"
            )

    def render(self, directory: Path) -> str:
        """The job file fio runs: [global] directory first, then the profile with overrides.

        `thread`: fio forks each job as a process that calls setsid(), out of reach of a
        kill of fio's process group; as threads of one process, a timeout or SIGTERM stops
        all of fio at once.
        """
        lines = ["[global]", f"directory={directory}", "thread"]
        for section, options in self.sections:
            lines.append(f"[{section}]")
            for key, value in options:
                if key in self.overrides:
                    continue
                lines.append(key if value is None else f"{key}={value}")
            if section != "global":
                lines += [f"{key}={value}" for key, value in self.overrides.items()]
        return "\n".join(lines) + "\n"


def load_profile(name: str, jobs_dir: Path | None = None) -> Profile:
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", name):
        raise ProfileError(f"profile name {name!r} is not a plain name like etcd-fsync")
    directory = jobs_dir or default_jobs_dir()
    path = directory / f"{name}.fio"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        known = sorted(p.stem for p in directory.glob("*.fio"))
        raise ProfileError(
            f"no profile {name!r} in {directory} (have: {', '.join(known)})"
        ) from None
    return parse_profile(name, path, text)


def parse_profile(name: str, path: Path, text: str) -> Profile:
    budget: dict[str, int] = {}
    sections: list[tuple[str, list[tuple[str, str | None]]]] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        match = _BUDGET.match(line)
        if match:
            budget[match.group(1)] = int(match.group(2))
            continue
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            sections.append((line[1:-1].strip(), []))
            continue
        if not sections:
            raise ProfileError(f"{path}:{number}: option outside a [section]")
        key, sep, value = line.partition("=")
        key = key.strip().lower()
        checked = _check_option(path, number, key, value.strip() if sep else None)
        sections[-1][1].append((key, checked))
    if "bytes" not in budget or "seconds" not in budget:
        raise ProfileError(
            f"{path}: header must declare '# fioprobe-budget-bytes: N' and "
            "'# fioprobe-budget-seconds: N'"
        )
    jobs = [s for s, _ in sections if s != "global"]
    if len(jobs) != 1:
        raise ProfileError(f"{path}: a profile has exactly one job section, found {len(jobs)}")
    profile = Profile(name, path, sections, budget["bytes"], budget["seconds"])
    profile.check_budget()
    return profile


def _check_option(path: Path, number: int, key: str, value: str | None) -> str | None:
    where = f"{path}:{number}"
    if key in FORBIDDEN_OPTIONS or key.startswith(("write_", "read_iolog", "exec_")):
        raise ProfileError(
            f"{where}: option {key!r} is not allowed in a probe profile (it names files, "
            "devices, logs or commands; the runner supplies the directory)"
        )
    if key == "ioengine" and (value or "") not in ALLOWED_ENGINES:
        raise ProfileError(
            f"{where}: ioengine={value} is not allowed (use one of "
            f"{', '.join(sorted(ALLOWED_ENGINES))})"
        )
    if value is not None and ("$" in value or "/dev/" in value):
        raise ProfileError(f"{where}: {key}={value}: variables and device paths are not allowed")
    return value


def parse_size(text: str) -> int:
    """fio-style size: 4m, 64M, 1g, 4096, 16Mi (fio's default kb_base is 1024)."""
    match = _SIZE.match(text.strip())
    if not match:
        raise ProfileError(f"not a size: {text!r} (use e.g. 4m, 64m, 1g)")
    number, unit = int(match.group(1)), match.group(2).lower()
    return number * 1024 ** " kmgt".index(unit or " ")


def parse_duration(text: str) -> float:
    """fio-style time: 20, 20s, 500ms, 2m (fio's default unit is seconds)."""
    match = _DURATION.match(text.strip())
    if not match:
        raise ProfileError(f"not a duration: {text!r} (use e.g. 5, 5s, 1m)")
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[(match.group(2) or "s").lower()]
    return int(match.group(1)) * scale


def default_jobs_dir() -> Path:
    """jobs/ of this checkout, or $FIOPROBE_JOBS_DIR, or the image's /usr/share/fioprobe/jobs."""
    env = os.environ.get("FIOPROBE_JOBS_DIR")
    if env:
        return Path(env)
    checkout = Path(__file__).resolve().parents[2] / "jobs"
    if checkout.is_dir():
        return checkout
    return Path("/usr/share/fioprobe/jobs")
