"""The benchmark plan: a small, strict YAML file saying what to run and what it may cost.

Strict because a plan decides how much IO lands on a StorageClass someone else may be using:
an unknown key (a typo of `runtime`, a `directory` someone hoped for), a repeated key or a
value of the wrong type is an error naming the file and the key, never a default silently
taken instead. The plan names no path, device or command: fio's files go into each server's
own working directory, and the job files are built by `jobs.py` from these values only.

The budget (bytes and seconds per server) is declared, not defaulted: a benchmark may do far
more IO than a probe, on purpose, and the plan says how much it may.
"""

from __future__ import annotations

import math
import re
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fioprobe.errors import UsageError
from fioprobe.fio.profiles import OPTIONS, ProfileError, parse_size
from fioprobe.target.quantity import quantity_bytes

#: The phases, in the order they run: the data set is laid out, then read, then written.
PHASES = ("prepare", "randread", "randwrite")
#: A benchmark's name: the group's `benchmark` label and a folder name of the archive, whose
#: layout (`<benchmark>_<storageclass>-fio-<server>`) needs it free of `_` and `/`.
_NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
#: A StorageClass name (a Kubernetes object name).
_STORAGECLASS = re.compile(r"[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?")
_LABEL_KEY = re.compile(r"([a-z0-9A-Z.-]{1,253}/)?[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?")
#: Plan files are a few hundred bytes; a larger one is not a plan.
MAX_PLAN_BYTES = 64 * 1024


class PlanError(UsageError):
    """A plan that cannot be run as written (exit 2): nothing was sent to any server."""


@dataclass(frozen=True, slots=True)
class Budget:
    """What the whole benchmark may cost each server, every phase together."""

    bytes_per_server: int
    seconds_per_server: int


@dataclass(frozen=True, slots=True)
class Plan:
    name: str
    storageclass: str
    budget: Budget
    servers: int = 3
    node_selector: dict[str, str] = field(default_factory=dict)
    jobs_per_server: int = 2
    file_size: str = "32m"
    block_size: str = "4k"
    iodepth: int = 4
    ioengine: str = "libaio"
    direct: bool = True
    runtime: int = 5
    loops: int = 1
    prepare_block_size: str = "1m"
    prepare_runtime: int = 60
    phases: tuple[str, ...] = PHASES
    drop_caches: bool = False
    #: Each server's volume (its PVC's size), when the plan knows it: the data set of
    #: `jobs_per_server` files of `file_size` must fit on it (see USABLE_FRACTION).
    volume_size: int | None = None
    source: str = "<plan>"
    #: The random phases run once per IO depth, in this order: the points of a response
    #: curve (latency against IOPS). Without a sweep, (iodepth,).
    iodepths: tuple[int, ...] = ()

    @property
    def sweep(self) -> tuple[int, ...]:
        return self.iodepths or (self.iodepth,)


#: (key, what it is, its check) of every top-level key; `budget` is read on its own.
_INTEGERS = {
    "servers": (1, 64),
    "jobs_per_server": (1, 16),
    "iodepth": (1, 256),
    "runtime": (1, 86400),
    "loops": (1, 1000),
    "prepare_runtime": (1, 86400),
}
_SIZES = ("file_size", "block_size", "prepare_block_size")
_FLAGS = ("direct", "drop_caches")
_KEYS = (
    "name",
    "storageclass",
    "budget",
    "node_selector",
    "ioengine",
    "phases",
    "iodepths",
    "volume_size",
    *_INTEGERS,
    *_SIZES,
    *_FLAGS,
)
_BUDGET_KEYS = ("bytes_per_server", "seconds_per_server")


def load_plan(path: Path) -> Plan:
    """Read and check a plan file; PlanError with the file and the key otherwise."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_PLAN_BYTES + 1)
    except OSError as exc:
        raise PlanError(f"{path}: cannot read the plan: {exc.strerror or exc}") from None
    if len(data) > MAX_PLAN_BYTES:
        raise PlanError(f"{path}: larger than {MAX_PLAN_BYTES} bytes; not a benchmark plan")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PlanError(f"{path}: not UTF-8 text (bad byte at offset {exc.start})") from None
    return parse_plan(text, str(path))


def parse_plan(text: str, source: str) -> Plan:
    try:
        raw = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass
    except PlanError as exc:
        raise PlanError(f"{source}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not YAML"
        raise PlanError(f"{source}: not a valid YAML plan{where}: {problem}") from None
    if not isinstance(raw, dict):
        raise PlanError(f"{source}: a plan is a mapping of keys such as name, storageclass, budget")
    for key in raw:
        if key not in _KEYS:
            raise PlanError(
                f"{source}: {_shown(key)}: unknown key (expected one of: "
                f"{', '.join(sorted(_KEYS))})"
            )
    values: dict[str, Any] = {"source": source}
    values["name"] = _text(raw, "name", _NAME, source, "a lowercase name such as qualify-gp3")
    values["storageclass"] = _text(
        raw, "storageclass", _STORAGECLASS, source, "a StorageClass name such as gp3"
    )
    values["budget"] = _budget(raw.get("budget"), source)
    for key, limits in _INTEGERS.items():
        if key in raw:
            values[key] = _integer(raw[key], key, limits, source)
    for key in _SIZES:
        if key in raw:
            values[key] = _size(raw[key], key, source)
    for key in _FLAGS:
        if key in raw:
            if not isinstance(raw[key], bool):
                raise PlanError(f"{source}: {key}: must be true or false, got {_shown(raw[key])}")
            values[key] = raw[key]
    if "ioengine" in raw:
        values["ioengine"] = _ioengine(raw["ioengine"], source)
    if "phases" in raw:
        values["phases"] = _phases(raw["phases"], source)
    if "node_selector" in raw:
        values["node_selector"] = _node_selector(raw["node_selector"], source)
    if "iodepths" in raw:
        if "iodepth" in raw:
            raise PlanError(f"{source}: iodepths: give iodepth or iodepths, not both")
        values["iodepths"] = _iodepths(raw["iodepths"], source)
        values["iodepth"] = values["iodepths"][0]  # the prepare phase's
    if "volume_size" in raw:
        values["volume_size"] = _volume_size(raw["volume_size"], source)
    plan = Plan(**values)
    _check_data_set_fits(plan)
    return plan


#: The part of a volume a filesystem surely leaves to files: ext4 keeps 5 % for root (fio's
#: servers are not root), and its journal (up to 1 GiB; 32 MiB on a 1 GiB volume) and inode
#: tables (about 1.6 %) take more, most on small volumes: 1 GiB leaves about 88 %. XFS
#: takes less.
USABLE_FRACTION = 0.85


def data_set_bytes(plan: Plan) -> int:
    """What the data set takes on each server's volume: one file of `file_size` per job."""
    return plan.jobs_per_server * parse_size(plan.file_size)


def prepare_bytes(plan: Plan) -> int:
    """What a whole prepare writes on each server: fio writes whole blocks of a job's size,
    so a `file_size` that is no multiple of `prepare_block_size` loses its last part block."""
    block = parse_size(plan.prepare_block_size)
    return plan.jobs_per_server * (parse_size(plan.file_size) // block * block)


def _volume_size(value: object, source: str) -> int:
    size = quantity_bytes(str(value)) if isinstance(value, str | int) else None
    if (
        isinstance(value, bool)
        or size is None
        or not math.isfinite(size)
        or size < 1
        or size != int(size)
    ):
        raise PlanError(
            f"{source}: volume_size: must be a size such as 40Gi or 500Mi (each server's "
            f"volume), got {_shown(value)}"
        )
    return int(size)


def _check_data_set_fits(plan: Plan) -> None:
    """A data set larger than the volume fills it in prepare: refused before it is sent."""
    if plan.volume_size is None:
        return
    usable = int(plan.volume_size * USABLE_FRACTION)
    if data_set_bytes(plan) > usable:
        raise PlanError(
            f"{plan.source}: the data set, jobs_per_server ({plan.jobs_per_server}) files of "
            f"file_size ({plan.file_size}), is {data_set_bytes(plan)} bytes per server: more "
            f"than a filesystem leaves to files on volume_size ({plan.volume_size} bytes, "
            f"about {USABLE_FRACTION:.0%}: {usable}); lower file_size or jobs_per_server, or "
            "give the servers larger volumes"
        )


def _text(raw: dict[Any, Any], key: str, form: re.Pattern[str], source: str, what: str) -> str:
    if key not in raw:
        raise PlanError(f"{source}: {key}: is required ({what})")
    value = raw[key]
    if not isinstance(value, str) or form.fullmatch(value) is None:
        raise PlanError(f"{source}: {key}: {_shown(value)} is not {what}")
    return value


def _budget(raw: object, source: str) -> Budget:
    if raw is None:
        raise PlanError(
            f"{source}: budget: is required (bytes_per_server and seconds_per_server: what the "
            "whole benchmark may cost each server)"
        )
    if not isinstance(raw, dict):
        raise PlanError(
            f"{source}: budget: must be a mapping of bytes_per_server, seconds_per_server"
        )
    for key in raw:
        if key not in _BUDGET_KEYS:
            raise PlanError(
                f"{source}: budget.{_shown(key)}: unknown key (expected one of: "
                f"{', '.join(_BUDGET_KEYS)})"
            )
    for key in _BUDGET_KEYS:
        if key not in raw:
            raise PlanError(f"{source}: budget.{key}: is required")
    size = _size(raw["bytes_per_server"], "budget.bytes_per_server", source)
    seconds = _integer(
        raw["seconds_per_server"], "budget.seconds_per_server", (1, 7 * 86400), source
    )
    return Budget(parse_size(size), seconds)


def _integer(value: object, key: str, limits: tuple[int, int], source: str) -> int:
    low, high = limits
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise PlanError(
            f"{source}: {key}: must be a whole number from {low} to {high}, got {_shown(value)}"
        )
    return value


def _size(value: object, key: str, source: str) -> str:
    """A fio size (4k, 64m, 1g, or bytes as a number), kept as text for the job file."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise PlanError(
            f"{source}: {key}: must be a size such as 4k, 64m or 1g, got {_shown(value)}"
        )
    try:
        if parse_size(value) <= 0:
            raise ProfileError("is zero")
    except ProfileError:
        raise PlanError(
            f"{source}: {key}: {_shown(value)} is not a size such as 4k, 64m or 1g"
        ) from None
    return value.strip()


def _ioengine(value: object, source: str) -> str:
    try:
        OPTIONS["ioengine"](value if isinstance(value, str) else None)
    except ProfileError as exc:
        raise PlanError(f"{source}: ioengine: {_shown(value)} {exc}") from None
    assert isinstance(value, str)  # the check above accepts only listed strings
    return value


def _phases(value: object, source: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise PlanError(f"{source}: phases: must be a non-empty list of {', '.join(PHASES)}")
    for item in value:
        if item not in PHASES:
            raise PlanError(
                f"{source}: phases: {_shown(item)} is not a phase (phases: {', '.join(PHASES)})"
            )
    if len(set(value)) != len(value):
        raise PlanError(f"{source}: phases: each phase at most once")
    # They always run in their own order: the data set first, reads before writes.
    return tuple(phase for phase in PHASES if phase in value)


#: At most this many points in a sweep: each is a run of every random phase.
MAX_SWEEP = 16


def _iodepths(value: object, source: str) -> tuple[int, ...]:
    low, high = _INTEGERS["iodepth"]
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_SWEEP:
        raise PlanError(
            f"{source}: iodepths: must be a list of 1 to {MAX_SWEEP} IO depths, got {_shown(value)}"
        )
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int) or not low <= item <= high:
            raise PlanError(
                f"{source}: iodepths: {_shown(item)} is not a whole number from {low} to {high}"
            )
    if len(set(value)) != len(value):
        raise PlanError(f"{source}: iodepths: each IO depth at most once")
    return tuple(value)


def _node_selector(value: object, source: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise PlanError(f"{source}: node_selector: must be a mapping of label: value")
    for key, item in value.items():
        if not isinstance(key, str) or _LABEL_KEY.fullmatch(key) is None:
            raise PlanError(f"{source}: node_selector: {_shown(key)} is not a label name")
        if not isinstance(item, str) or _LABEL_VALUE.fullmatch(item) is None:
            raise PlanError(f"{source}: node_selector.{key}: {_shown(item)} is not a label value")
    return dict(value)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a repeated key (PyYAML keeps the last one silently)."""


def _mapping_without_repeats(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Hashable, Any]:
    seen: set[object] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if isinstance(key, Hashable) and key in seen:
            raise PlanError(f"line {key_node.start_mark.line + 1}: {_shown(key)} appears twice")
        if isinstance(key, Hashable):
            seen.add(key)
    return loader.construct_mapping(node)


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_repeats
)
