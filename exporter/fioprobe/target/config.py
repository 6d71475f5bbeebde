"""Strict YAML configuration of the targets, as `fioprobe run`, `continuous` and `gc` read it.

Unknown keys, duplicate keys and wrong types are errors that name the file and the key:
a typo in a monitoring config must not silently turn a probe off. Defaults are applied at
load, so the rest of the program sees complete values.

    owner: storage-probes         # whose groups these are on the Pushgateway (default: default)
    pushgateway:
      url: http://fioprobe-pushgateway:9091
      # or, sharded (fioprobe.gateway.shards picks each group's replica):
      # shards: [http://pgw-0.pgw:9091, http://pgw-1.pgw:9091]
      username_file: /etc/fioprobe/auth/username   # optional; or env FIOPROBE_PUSHGATEWAY_*
      password_file: /etc/fioprobe/auth/password
      ca_file: /etc/fioprobe/tls/ca.crt            # optional, for https
      timeout_seconds: 10         # bounds each whole request
      attempts: 3
      writer_lease_seconds: 3600  # see fioprobe.publish.outcome
    targets:
      - name: gp2-standard          # the storageclass label
        directory: /probe           # the probe volume's mount; fio writes only inside it
        node_local: false           # true: hostPath on a node, labelled node=<this node>
        etcd_disk: false            # true: this disk holds etcd's data (published, see below)
        # etcd_data_dir: /etcd-data # only with etcd_disk: true: etcd's data directory as the
        #   pod sees it (mounted read-only, only stat'ed). The probe directory must be on its
        #   filesystem: else every run is refused (unsafe_target) and publishes etcd_disk="false"
        require_mount_point: true   # refuse to probe an unmounted volume's empty mount point
        volume: {type: gp2, size: 100Gi, provisioner: ebs.csi.aws.com, dedicated: true}
        # dedicated: true: the volume is the probe's own (its own PVC), no tenant writes it,
        # so the state may live on it (<directory>/.fioprobe-state/). Otherwise (the default:
        # a hostPath directory, a volume tenants share) the state lives in state_dir, a
        # directory only the probe writes, beside the probe directory, never inside it;
        # without state_dir, in the per-user one ($FIOPROBE_STATE_DIR, ~/.local/state/fioprobe).
        state_dir: /var/lib/fioprobe/state/gp2-standard
        timeout_seconds: 120        # optional: wall-clock limit per profile run
        profiles:
          - etcd-fsync
          - {name: burst-ceiling, runtime: 3}
    provision:                      # optional: what this owner's `fioprobe provision` runs
      storage_classes: [gp3, io2]   #   provision, for `fioprobe gc` (docs/GC.md)

`targets` may be left out of a configuration that has `provision:`: gc's configuration of a
provisioning probe's owner, which runs no fio probe.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import reprlib
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fioprobe import bounds
from fioprobe.errors import UsageError
from fioprobe.fio.profiles import OVERRIDABLE, ProfileError, load_profile
from fioprobe.gateway import defaults as push_defaults
from fioprobe.gateway.settings import PushgatewayConfig
from fioprobe.target.quantity import quantity_bytes
from fioprobe.target.volumes import VOLUME_TYPES, model


class ConfigError(UsageError):
    """A configuration problem; the message names the file and the key (exit 2)."""


@dataclass(frozen=True, slots=True)
class VolumeConfig:
    type: str = "unknown"
    size_bytes: int | None = None
    iops: float | None = None
    throughput_bytes_per_second: float | None = None
    provisioner: str = ""
    #: The volume is the probe's own (its own PVC): only the probe's IO, so its burst
    #: balance can be modelled, and no tenant writes it, so the state may live on it.
    #: False (shared: hostPath directories, volumes tenants write): the state lives in a
    #: state directory of the probe's own (docs/SAFETY.md, "Where state lives").
    dedicated: bool = False


@dataclass(frozen=True, slots=True)
class ProfileConfig:
    name: str
    overrides: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TargetConfig:
    name: str
    directory: Path
    profiles: tuple[ProfileConfig, ...]
    volume: VolumeConfig
    node_local: bool = False
    timeout_seconds: float | None = None
    state_dir: Path | None = None
    require_mount_point: bool = False
    #: The disk holds etcd's data: a deployment fact, published with every push and by the
    #: continuous stream (fioprobe_info{etcd_disk}), so the mixin's etcd alerts select by it
    #: and never guess from a label such as `node`.
    etcd_disk: bool = False
    #: etcd's data directory as the probe sees it (the node's etcd.dataDir, mounted read-only):
    #: the probe directory must be on its filesystem, or the etcd alerts would judge another
    #: disk than etcd's. Checked on the volume before every run (`probe.etcd_filesystem`).
    etcd_data_dir: Path | None = None


#: The owner of a configuration that names none. Configurations that share a Pushgateway
#: must each name their own, or `fioprobe gc` with one of them takes the others' groups for
#: its own removed probes (see docs/GC.md).
DEFAULT_OWNER = "default"
_OWNER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")


@dataclass(frozen=True, slots=True)
class Config:
    path: Path
    pushgateway: PushgatewayConfig
    targets: tuple[TargetConfig, ...]
    #: Pushed with every group as fioprobe_owner_info{owner}: which configuration the group
    #: belongs to, so that `fioprobe gc` deletes only groups of the configurations it is given.
    owner: str = DEFAULT_OWNER
    #: The StorageClasses this owner's provisioning probe (`fioprobe provision --owner`)
    #: provisions (`provision.storage_classes`). Only gc reads it: a provisioning group
    #: (job="fioprobe_provision") of this owner whose class no given configuration lists is
    #: one that no probe pushes any more. Empty without a `provision:` section: then every
    #: provisioning group of the owner is such a group.
    provisioned: tuple[str, ...] = ()


def valid_owner(owner: str) -> bool:
    """Whether `owner` is a name fioprobe pushes as an owner (like a Kubernetes name)."""
    return _OWNER.fullmatch(owner) is not None


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (PyYAML keeps the last one silently)."""


def _mapping_without_duplicates(
    loader: _StrictLoader, node: yaml.MappingNode
) -> dict[Hashable, Any]:
    seen: set[object] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        try:
            duplicate = key in seen
        except TypeError:  # a list or mapping as a key: construct_mapping reports it below
            continue
        if duplicate:
            raise ConfigError(f"line {key_node.start_mark.line + 1}: duplicate key {_show(key)}")
        seen.add(key)
    return loader.construct_mapping(node)


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates
)


class _Reader:
    """Walks one mapping, consuming keys; `done()` rejects whatever was not consumed."""

    def __init__(self, data: object, where: str, file: str) -> None:
        if not isinstance(data, dict):
            raise ConfigError(f"{file}: {where or 'top level'} must be a mapping")
        self.data = dict(data)
        self.where = where
        self.file = file
        self.known: list[str] = []

    def key(self, name: str) -> str:
        return f"{self.where}.{name}" if self.where else name

    def error(self, name: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.file}: {self.key(name)}: {problem}")

    def take(
        self, name: str, kind: type | tuple[type, ...], default: Any = None, required: bool = False
    ) -> Any:
        self.known.append(name)
        if name not in self.data:
            if required:
                near = difflib.get_close_matches(name, [str(k) for k in self.data], n=1)
                hint = f" (found unknown key {near[0]!r}: a typo?)" if near else ""
                raise self.error(name, "is required" + hint)
            return default
        value = self.data.pop(name)
        if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
            raise self.error(name, f"must be {_kind_name(kind)}, not a boolean")
        if not isinstance(value, kind):
            raise self.error(name, f"must be {_kind_name(kind)}, got {_show(value)}")
        return value

    def done(self) -> None:
        for name in self.data:
            raise self.error(
                str(name), f"unknown key (expected one of: {', '.join(sorted(self.known))})"
            )


_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxlist, _SHOWN.maxdict = 2, 3, 3
_SHOWN.maxstring = _SHOWN.maxother = 60


def _show(value: object) -> str:
    """A value from the file, short, for a message. Never the whole repr: YAML aliases can
    make a 1 kB file a value of millions of nodes, and repr() would walk all of them."""
    return _SHOWN.repr(value)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {
        str: "a string",
        int: "a number",
        float: "a number",
        bool: "true or false",
        list: "a list",
        dict: "a mapping",
    }
    return " or ".join(dict.fromkeys(names.get(k, k.__name__) for k in kinds))


def _quantity(reader: _Reader, name: str) -> int | None:
    value = reader.take(name, (str, int))
    if value is None:
        return None
    size = quantity_bytes(str(value))
    if size is None:
        raise reader.error(name, f"{_show(value)} is not a size (use e.g. 100Gi, 500Mi, 1Ti)")
    if not math.isfinite(size):
        raise reader.error(name, f"{_show(value)} is too large")
    return int(size)


def _number(reader: _Reader, name: str) -> float | None:
    """A numeric setting; NaN, infinities and integers beyond a float would be silently wrong."""
    value = reader.take(name, (int, float))
    if value is None:
        return None
    try:
        number = float(value)
    except OverflowError:  # a YAML integer beyond any float
        number = math.inf
    if not math.isfinite(number):
        raise reader.error(name, f"must be a finite number, got {_show(value)}")
    return number


def _seconds(reader: _Reader, name: str, limits: tuple[float, float]) -> float | None:
    """A number of seconds within the range the matching command-line option takes."""
    value = _number(reader, name)
    low, high = limits
    if value is not None and not low <= value <= high:
        raise reader.error(name, f"must be from {low:g} to {high:g} seconds, got {value:g}")
    return value


def _whole(reader: _Reader, name: str, limits: tuple[int, int], default: int) -> int:
    """A whole number within the range the matching command-line option takes."""
    value: int = reader.take(name, int, default)
    low, high = limits
    if not low <= value <= high:
        raise reader.error(name, f"must be a whole number from {low} to {high}, got {value}")
    return value


def _default(value: float | None, default: float) -> float:
    return default if value is None else value


#: Deeper YAML is no configuration of fioprobe's; the limit keeps the parser off the stack edge.
_MAX_DEPTH = 32


def load_config(
    path: Path, jobs_dir: Path | None = None, *, probes_optional: bool = False
) -> Config:
    """Read and check the configuration; profiles are checked in `jobs_dir` (default jobs/).
    `probes_optional`: a configuration with `provision:` may have no target (gc reads the
    provisioning probe's owner so); the commands that probe always need one."""
    file = str(path)
    try:
        text = path.read_bytes().decode("utf-8").removeprefix("\ufeff")
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file}: not UTF-8 text (bad byte at offset {exc.start})") from None
    depth = _nesting(text)
    if depth > _MAX_DEPTH:
        raise ConfigError(f"{file}: nested {depth} levels deep; at most {_MAX_DEPTH} allowed")
    try:
        data = yaml.load(text, Loader=_StrictLoader)
    except ConfigError as exc:
        raise ConfigError(f"{file}: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{file}: nested too deeply to be a fioprobe configuration") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{file}: {where}not valid YAML: {problem}") from None
    top = _Reader(data, "", file)
    owner = top.take("owner", str, DEFAULT_OWNER)
    if not valid_owner(owner):
        raise top.error(
            "owner", f"{_show(owner)} must be a name (letters, digits, .-_; at most 253)"
        )
    pushgateway = _pushgateway(top.take("pushgateway", dict, required=True), file)
    raw_provision = top.take("provision", dict)
    provisioned = () if raw_provision is None else _provision(raw_provision, file)
    # A provisioning probe's owner runs no fio probe: its configuration (for gc) may have none.
    raw_targets = top.take("targets", list, required=raw_provision is None or not probes_optional)
    top.done()
    if raw_targets is not None and not raw_targets:
        raise ConfigError(f"{file}: targets: at least one target is required")
    targets = tuple(
        _target(raw, f"targets[{i}]", file, jobs_dir) for i, raw in enumerate(raw_targets or ())
    )
    seen: set[tuple[str, bool]] = set()
    for target in targets:
        if (target.name, target.node_local) in seen:
            raise ConfigError(f"{file}: targets: name {target.name!r} is used twice")
        seen.add((target.name, target.node_local))
    # A directory is one target's: its files, its stuck-writer marker and its budget are
    # kept per directory, so two targets in one (or one inside the other) would share them.
    for later, target in enumerate(targets):
        for earlier in range(later):
            other = targets[earlier]
            if paths_overlap(str(target.directory), str(other.directory)):
                raise ConfigError(
                    f"{file}: targets[{later}].directory: {_show(str(target.directory))} is "
                    f"targets[{earlier}]'s directory or overlaps it "
                    f"({_show(str(other.directory))}); each target needs a directory of its own"
                )
    return Config(path, pushgateway, targets, owner, provisioned)


def _provision(raw: object, file: str) -> tuple[str, ...]:
    """`provision.storage_classes`: StorageClass names, each once, at least one (a
    configuration that provisions nothing leaves the section out)."""
    from fioprobe.kube.nodes import node_name_problem  # the API client only when needed

    r = _Reader(raw, "provision", file)
    names = r.take("storage_classes", list, required=True)
    r.done()
    if not names:
        raise r.error(
            "storage_classes", "at least one StorageClass is required (leave out provision: "
            "when the owner provisions none)",
        )  # fmt: skip
    seen: list[str] = []
    for index, name in enumerate(names):
        key = f"storage_classes[{index}]"
        if not isinstance(name, str):
            raise r.error(key, f"must be a string, got {_show(name)}")
        problem = node_name_problem(name)  # a StorageClass's name is a DNS subdomain too
        if problem is not None:
            raise r.error(
                key, f"{_show(name)} {problem.replace('a node name', 'a StorageClass name')}"
            )
        if name in seen:
            raise r.error(key, f"{_show(name)} is listed twice")
        seen.append(name)
    return tuple(seen)


def _pushgateway(raw: object, file: str) -> PushgatewayConfig:
    r = _Reader(raw, "pushgateway", file)
    # One replica (`url`) or several (`shards`, a list of URLs); exactly one of the two.
    shards = tuple(r.take("shards", list, []))
    url = r.take("url", str, required=not shards)
    if shards and url is not None:
        raise r.error("url", "give either url (one Pushgateway) or shards (its replicas)")
    for index, shard in enumerate(shards):
        if not isinstance(shard, str):
            raise r.error(f"shards[{index}]", f"must be a URL, got {_show(shard)}")
    if len(set(shards)) != len(shards):
        raise r.error("shards", "a replica is listed twice")
    for name, value in (("url", url), *((f"shards[{i}]", s) for i, s in enumerate(shards))):
        if value is None:
            continue
        if any(ord(char) < 0x20 or ord(char) == 0x7F for char in value):
            raise r.error(name, f"{_show(value)} holds a control character, which no URL can")
        if not value.startswith(("http://", "https://")):
            raise r.error(name, f"must start with http:// or https://, got {_show(value)}")
        if "@" in value.split("//", 1)[1].split("/", 1)[0]:
            raise r.error(name, "must not hold credentials; use username_file and password_file")
    url = url if url is not None else shards[0]
    config = PushgatewayConfig(
        url=url,
        shards=shards,
        username_file=_file_path(r, "username_file"),
        password_file=_file_path(r, "password_file"),
        ca_file=_file_path(r, "ca_file"),
        cert_file=_file_path(r, "cert_file"),
        key_file=_file_path(r, "key_file"),
        timeout_seconds=_default(
            _seconds(r, "timeout_seconds", bounds.REQUEST_SECONDS), push_defaults.TIMEOUT_SECONDS
        ),
        attempts=_whole(r, "attempts", bounds.ATTEMPTS, push_defaults.ATTEMPTS),
        writer_lease_seconds=_default(
            _seconds(r, "writer_lease_seconds", bounds.LEASE_SECONDS),
            push_defaults.WRITER_LEASE_SECONDS,
        ),
    )
    r.done()
    return config


def _file_path(r: _Reader, key: str) -> str | None:
    path = r.take(key, str)
    if path is not None and "\0" in path:
        raise r.error(key, f"{_show(path)} holds a NUL byte, which no path can")
    return path


def _target(raw: object, where: str, file: str, jobs_dir: Path | None) -> TargetConfig:
    r = _Reader(raw, where, file)
    name = r.take("name", str, required=True)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise r.error(
            "name", f"{_show(name)} must be a StorageClass-like name (letters, digits, .-_)"
        )
    directory = _absolute_path(r, "directory", name, r.take("directory", str, required=True))
    node_local = r.take("node_local", bool, False)
    etcd_disk = r.take("etcd_disk", bool, False)
    require_mount_point = r.take("require_mount_point", bool, False)
    timeout = _seconds(r, "timeout_seconds", bounds.PROBE_SECONDS)
    state_dir = r.take("state_dir", str)
    if state_dir is not None:
        state_dir = _absolute_path(r, "state_dir", name, state_dir)
    if state_dir is not None and paths_overlap(state_dir, directory):
        raise r.error(
            "state_dir",
            f"{_show(state_dir)} must be a directory beside the probe directory "
            f"{_show(directory)}, neither inside it nor holding it: tenants of the probe "
            "volume could write the state there",
        )
    etcd_data_dir = _etcd_data_dir(r, name, etcd_disk, directory, state_dir)
    volume = _volume(r.take("volume", dict, {}), f"{where}.volume", file)
    raw_profiles = r.take("profiles", list, required=True)
    r.done()
    if not raw_profiles:
        raise r.error("profiles", "at least one profile is required")
    profiles = tuple(
        _profile(p, f"{where}.profiles[{i}]", file, jobs_dir) for i, p in enumerate(raw_profiles)
    )
    return TargetConfig(
        name=name,
        directory=Path(directory),
        profiles=profiles,
        volume=volume,
        node_local=node_local,
        timeout_seconds=timeout,
        state_dir=Path(state_dir) if state_dir else None,
        require_mount_point=require_mount_point,
        etcd_disk=etcd_disk,
        etcd_data_dir=Path(etcd_data_dir) if etcd_data_dir else None,
    )


def _etcd_data_dir(
    r: _Reader, target: str, etcd_disk: bool, directory: str, state_dir: str | None
) -> str | None:
    """The optional `etcd_data_dir`: only an etcd disk has one to be on, and it must be a
    directory apart from the probe's own (the probe directory inside etcd's data directory
    would have fio write among etcd's files; the state there, likewise)."""
    path = r.take("etcd_data_dir", str)
    if path is None:
        return None
    if not etcd_disk:
        raise r.error(
            "etcd_data_dir",
            "is only for a target with etcd_disk: true (it checks that the probe directory "
            "is on etcd's filesystem)",
        )
    path = _absolute_path(r, "etcd_data_dir", target, path)
    for key, other in (("directory", directory), ("state_dir", state_dir)):
        if other is not None and paths_overlap(path, other):
            raise r.error(
                "etcd_data_dir",
                f"{_show(path)} must be apart from the {key} {_show(other)}, neither inside it "
                "nor holding it: the probe writes there, and never among etcd's files",
            )
    return path


def _absolute_path(r: _Reader, key: str, target: str, path: str) -> str:
    """An absolute path without a NUL byte (no file name can hold one: the first open
    would fail with ValueError, for the whole run instead of this target)."""
    if "\0" in path:
        raise r.error(key, f"{_show(path)} holds a NUL byte, which no path can (target {target})")
    if not path.startswith("/"):
        raise r.error(key, f"must be an absolute path, got {_show(path)}")
    return path


def paths_overlap(one: str, other: str) -> bool:
    """Whether one of two absolute paths is the other or inside it (no symlink resolved:
    the probe refuses symlinks on its way anyway)."""
    a, b = os.path.normpath(one), os.path.normpath(other)
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


def _volume(raw: object, where: str, file: str) -> VolumeConfig:
    r = _Reader(raw, where, file)
    volume_type = r.take("type", str, "unknown")
    if volume_type not in VOLUME_TYPES:
        raise r.error("type", f"{_show(volume_type)} is not one of {', '.join(VOLUME_TYPES)}")
    size = _quantity(r, "size")
    iops = _number(r, "iops")
    throughput = _quantity(r, "throughput")
    # A volume of no bytes, IOPS or throughput is a typo, and would model a disk that does nothing.
    for key, value in (("size", size), ("iops", iops), ("throughput", throughput)):
        if value is not None and value <= 0:
            raise r.error(key, f"must be more than 0, got {value:g}")
    config = VolumeConfig(
        type=volume_type,
        size_bytes=size,
        iops=iops,
        throughput_bytes_per_second=throughput,
        provisioner=r.take("provisioner", str, ""),
        dedicated=r.take("dedicated", bool, False),
    )
    r.done()
    try:
        model(volume_type, size, config.iops, throughput)
    except ValueError as exc:
        raise ConfigError(f"{file}: {where}: {exc}") from None
    return config


def _profile(raw: object, where: str, file: str, jobs_dir: Path | None) -> ProfileConfig:
    if isinstance(raw, str):
        raw = {"name": raw}
    r = _Reader(raw, where, file)
    name = r.take("name", str, required=True)
    overrides = {}
    for key in OVERRIDABLE:
        value = r.take(key, (str, int))
        if value is not None:
            overrides[key] = str(value)
    r.done()
    try:
        load_profile(name, jobs_dir).with_overrides(overrides)
    except ProfileError as exc:
        raise ConfigError(f"{file}: {where}: {exc}") from None
    return ProfileConfig(name, overrides)


def _nesting(text: str) -> int:
    """The deepest bracket nesting of flow-style YAML, counted before parsing it."""
    depth = deepest = 0
    for char in text:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth = max(0, depth - 1)
    return deepest
