"""Strict configuration: every bad config is rejected with a message naming file and key."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from fioprobe.target.config import ConfigError, load_config
from fioprobe.target.volumes import VOLUME_TYPES

GOOD = """\
pushgateway:
  url: http://127.0.0.1:9091
targets:
  - name: gp2-standard
    directory: /probe
    volume: {type: gp2, size: 100Gi, dedicated: true}
    profiles:
      - etcd-fsync
      - {name: burst-ceiling, runtime: 3}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_good_config_gets_defaults(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, GOOD))
    assert config.pushgateway.timeout_seconds == 10.0 and config.pushgateway.attempts == 3
    (target,) = config.targets
    assert target.volume.size_bytes == 100 * 1024**3 and target.volume.dedicated
    assert [p.name for p in target.profiles] == ["etcd-fsync", "burst-ceiling"]
    assert target.profiles[1].overrides == {"runtime": "3"}
    assert target.node_local is False and target.timeout_seconds is None


BAD = [
    ("pushgateway: {url: http://x}\n", "targets: is required"),
    ("pushgateway: {url: ftp://x}\ntargets: []\n",
     "pushgateway.url: must start with http:// or https://, got 'ftp://x'"),
    ("owner: team a\n" + GOOD,
     "owner: 'team a' must be a name (letters, digits, .-_; at most 253)"),
    ("owner: [a]\n" + GOOD, "owner: must be a string, got ['a']"),
    (GOOD + "extra: 1\n",
     "extra: unknown key (expected one of: owner, provision, pushgateway, targets)"),
    (GOOD.replace("url:", "ur1:"),
     "pushgateway.url: is required (found unknown key 'ur1': a typo?)"),
    (GOOD.replace("url: http://127.0.0.1:9091", "url: http://127.0.0.1:9091\n  timeout: 5"),
     "pushgateway.timeout: unknown key (expected one of: attempts, ca_file, cert_file, key_file, "
     "password_file, shards, timeout_seconds, url, username_file, writer_lease_seconds)"),
    (GOOD.replace("size: 100Gi", "size: 100 gigs"),
     "targets[0].volume.size: '100 gigs' is not a size (use e.g. 100Gi, 500Mi, 1Ti)"),
    (GOOD.replace("type: gp2", "type: gp4"),
     f"targets[0].volume.type: 'gp4' is not one of {', '.join(VOLUME_TYPES)}"),
    (GOOD.replace("type: gp2, size: 100Gi", "type: gp2"),
     "targets[0].volume: gp2 needs the volume size: its baseline is 3 IOPS per GiB"),
    (GOOD.replace("dedicated: true", "dedicated: yes please"),
     "targets[0].volume.dedicated: must be true or false, got 'yes please'"),
    (GOOD.replace("directory: /probe", "directory: probe"),
     "targets[0].directory: must be an absolute path, got 'probe'"),
    (GOOD.replace("- etcd-fsync", "- etcd-fsinc"),
     "targets[0].profiles[0]: no profile 'etcd-fsinc'"),
    (GOOD.replace("runtime: 3", "runtime: 60"),
     "targets[0].profiles[1]: burst-ceiling: runtime 60s must be set and at most the budget of 6s"),
    (GOOD.replace("runtime: 3", "filename: /dev/sda"),
     "targets[0].profiles[1].filename: unknown key "
     "(expected one of: io_size, name, runtime, size)"),
    (GOOD.replace("name: gp2-standard", "name: gp2/standard"),
     "targets[0].name: 'gp2/standard' must be a StorageClass-like name"),
    (GOOD + "  - name: gp2-standard\n    directory: /probe2\n    profiles: [etcd-fsync]\n",
     "targets: name 'gp2-standard' is used twice"),
    # One directory is one target's (its files, stuck-writer marker and budget).
    (GOOD + "  - name: other\n    directory: /probe\n    profiles: [etcd-fsync]\n",
     "targets[1].directory: '/probe' is targets[0]'s directory or overlaps it ('/probe'); "
     "each target needs a directory of its own"),
    (GOOD + "  - name: other\n    directory: /probe/inner\n    profiles: [etcd-fsync]\n",
     "targets[1].directory: '/probe/inner' is targets[0]'s directory or overlaps it "
     "('/probe'); each target needs a directory of its own"),
    (GOOD.replace("  url: http://127.0.0.1:9091", "  url: http://a\n  url: http://b"),
     "line 3: duplicate key 'url'"),
    ("pushgateway: [\n", "not valid YAML"),
    ("- just\n- a list\n", "top level must be a mapping"),
    # Numeric keys take the ranges of the matching command-line options (fioprobe.bounds).
    *((GOOD.replace("url: http://127.0.0.1:9091", f"url: http://127.0.0.1:9091\n  {setting}"),
       f"pushgateway.{message}")
      for setting, message in (
          ("attempts: 0", "attempts: must be a whole number from 1 to 10, got 0"),
          ("attempts: 11", "attempts: must be a whole number from 1 to 10, got 11"),
          ("attempts: 1.5", "attempts: must be a number, got 1.5"),
          ("timeout_seconds: 0.05", "timeout_seconds: must be from 0.1 to 600 seconds, got 0.05"),
          ("timeout_seconds: 601", "timeout_seconds: must be from 0.1 to 600 seconds, got 601"),
          ("timeout_seconds: -1", "timeout_seconds: must be from 0.1 to 600 seconds, got -1"),
          ("writer_lease_seconds: 0.5",
           "writer_lease_seconds: must be from 1 to 604800 seconds, got 0.5"),
          ("writer_lease_seconds: 1.0e+300",
           "writer_lease_seconds: must be from 1 to 604800 seconds, got 1e+300"),
      )),
    *((GOOD.replace("directory: /probe", f"directory: /probe\n    timeout_seconds: {value}"),
       f"targets[0].timeout_seconds: must be from 1 to 86400 seconds, got {value}")
      for value in ("0.5", "0", "-5", "86401")),
    # A NUL byte in a path fails the first open with ValueError, for the whole run.
    (GOOD.replace("directory: /probe", 'directory: "/pro\\0be"'),
     "targets[0].directory: '/pro\\x00be' holds a NUL byte, which no path can "
     "(target gp2-standard)"),
    (GOOD.replace("directory: /probe", 'directory: /probe\n    state_dir: "/st\\0ate"'),
     "targets[0].state_dir: '/st\\x00ate' holds a NUL byte, which no path can "
     "(target gp2-standard)"),
    (GOOD.replace("url: http://127.0.0.1:9091", 'url: http://127.0.0.1:9091\n  ca_file: "/ca\\0"'),
     "pushgateway.ca_file: '/ca\\x00' holds a NUL byte, which no path can"),
    (GOOD.replace("url: http://127.0.0.1:9091", 'url: "http://127.0.0.1:9091/\\0"'),
     "pushgateway.url: 'http://127.0.0.1:9091/\\x00' holds a control character, which no URL can"),
    # A shared volume's state lives beside the probe directory, never on the volume.
    (GOOD.replace("directory: /probe", "directory: /probe\n    state_dir: state"),
     "targets[0].state_dir: must be an absolute path, got 'state'"),
    (GOOD.replace("directory: /probe", "directory: /probe\n    state_dir: /probe/.state"),
     "targets[0].state_dir: '/probe/.state' must be a directory beside the probe directory "
     "'/probe', neither inside it nor holding it: tenants of the probe volume could write "
     "the state there"),
    (GOOD.replace("directory: /probe", "directory: /probe\n    state_dir: /"),
     "targets[0].state_dir: '/' must be a directory beside the probe directory '/probe', "
     "neither inside it nor holding it"),
    # etcd's data directory: only for an etcd disk, a real path, apart from the probe's own.
    (GOOD.replace("directory: /probe", "directory: /probe\n    etcd_data_dir: /etcd-data"),
     "targets[0].etcd_data_dir: is only for a target with etcd_disk: true (it checks that "
     "the probe directory is on etcd's filesystem)"),
    (GOOD.replace("directory: /probe", "directory: /probe\n    etcd_disk: false\n"
                  "    etcd_data_dir: /etcd-data"),
     "targets[0].etcd_data_dir: is only for a target with etcd_disk: true"),
    *((GOOD.replace("directory: /probe", f"directory: /probe\n    etcd_disk: true\n"
                    f"    state_dir: /var/lib/fioprobe/state\n    etcd_data_dir: {value}"),
       f"targets[0].etcd_data_dir: {message}")
      for value, message in (
          ("etcd-data", "must be an absolute path, got 'etcd-data'"),
          ('"/etcd\\0data"', "'/etcd\\x00data' holds a NUL byte, which no path can "
                              "(target gp2-standard)"),
          ("[/etcd-data]", "must be a string, got ['/etcd-data']"),
          ("/probe/etcd", "'/probe/etcd' must be apart from the directory '/probe', neither "
                          "inside it nor holding it: the probe writes there, and never among "
                          "etcd's files"),
          ("/", "'/' must be apart from the directory '/probe', neither inside it nor "
                "holding it"),
          ("/probe/", "'/probe/' must be apart from the directory '/probe'"),
          ("/var/lib/fioprobe", "'/var/lib/fioprobe' must be apart from the state_dir "
                                "'/var/lib/fioprobe/state', neither inside it nor holding it"),
          ("/var/lib/fioprobe/state/etcd", "'/var/lib/fioprobe/state/etcd' must be apart "
                                           "from the state_dir '/var/lib/fioprobe/state'"),
      )),
    # provision: the StorageClasses the owner's provisioning probe runs (for gc).
    (GOOD + "provision: [gp3]\n", "provision: must be a mapping, got ['gp3']"),
    (GOOD + "provision: {}\n", "provision.storage_classes: is required"),
    (GOOD + "provision: {storageClasses: [gp3]}\n",
     "provision.storage_classes: is required (found unknown key 'storageClasses': a typo?)"),
    (GOOD + "provision: {storage_classes: [gp3], nodes: [n1]}\n",
     "provision.nodes: unknown key (expected one of: storage_classes)"),
    (GOOD + "provision: {storage_classes: gp3}\n",
     "provision.storage_classes: must be a list, got 'gp3'"),
    (GOOD + "provision: {storage_classes: []}\n",
     "provision.storage_classes: at least one StorageClass is required (leave out provision: "
     "when the owner provisions none)"),
    (GOOD + "provision: {storage_classes: [gp3, 3]}\n",
     "provision.storage_classes[1]: must be a string, got 3"),
    (GOOD + "provision: {storage_classes: [GP3]}\n",
     "provision.storage_classes[0]: 'GP3' must be a StorageClass name: lower-case letters, "
     "digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters"),
    (GOOD + "provision: {storage_classes: [gp3, io2, gp3]}\n",
     "provision.storage_classes[2]: 'gp3' is listed twice"),
    (GOOD + "provision: {storage_classes: [gp3], storage_classes: [io2]}\n",
     "line 10: duplicate key 'storage_classes'"),
    ("pushgateway: {url: http://x}\nprovision: {storage_classes: [gp3]}\ntargets: []\n",
     "targets: at least one target is required"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "message"), BAD, ids=[m for _, m in BAD])
def test_bad_config_is_rejected_with_exact_message(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_etcd_data_dir_is_read_for_an_etcd_disk(tmp_path: Path) -> None:
    """Read as given; checked against the probe directory's filesystem at every run, not at
    load (the pod that loads the configuration need not mount either)."""
    text = GOOD.replace(
        "directory: /probe",
        "directory: /var/lib/etcd-fioprobe\n    etcd_disk: true\n    etcd_data_dir: /etcd-data",
    )
    (target,) = load_config(write(tmp_path, text)).targets
    assert target.etcd_disk and target.etcd_data_dir == Path("/etcd-data")
    (plain,) = load_config(write(tmp_path, GOOD)).targets
    assert plain.etcd_data_dir is None


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read: No such file or directory"):
        load_config(tmp_path / "nope.yaml")


def test_provision_lists_the_classes_the_owner_provisions(tmp_path: Path) -> None:
    """Only gc reads it; a provisioning probe's owner needs no fio target for that."""
    assert load_config(write(tmp_path, GOOD)).provisioned == ()
    text = GOOD + "provision:\n  storage_classes: [gp3, io2.fast, local-nvme]\n"
    config = load_config(write(tmp_path, text))
    assert config.provisioned == ("gp3", "io2.fast", "local-nvme")
    assert len(config.targets) == 1
    alone = "owner: fioprobe-provision\npushgateway: {url: http://x:9091}\n" + (
        "provision: {storage_classes: [gp3]}\n"
    )
    config = load_config(write(tmp_path, alone), probes_optional=True)
    assert (config.owner, config.provisioned, config.targets) == (
        "fioprobe-provision", ("gp3",), (),
    )  # fmt: skip
    # The commands that probe (run, continuous) refuse it: they would run nothing.
    with pytest.raises(ConfigError) as refused:
        load_config(write(tmp_path, alone))
    assert str(refused.value).endswith(": targets: is required"), refused.value


def test_owner_defaults_to_default_and_is_read(tmp_path: Path) -> None:
    """Every configuration has an owner: gc decides by it (docs/GC.md)."""
    path = tmp_path / "config.yaml"
    path.write_text(GOOD)
    assert load_config(path).owner == "default"
    path.write_text("owner: gp2.team_a-1\n" + GOOD)
    assert load_config(path).owner == "gp2.team_a-1"


#: Values at the ends of each range are taken, as the command line takes them.
EDGES = [
    ("  timeout_seconds: 0.1\n  attempts: 10\n  writer_lease_seconds: 604800\n", 1,
     (0.1, 10, 604800)),
    ("  timeout_seconds: 600\n  attempts: 1\n  writer_lease_seconds: 1\n", 86400,
     (600, 1, 1)),
]  # fmt: skip


@pytest.mark.parametrize(("gateway", "probe_timeout", "expected"), EDGES)
def test_numbers_at_the_ends_of_their_ranges_are_taken(
    tmp_path: Path, gateway: str, probe_timeout: int, expected: tuple[float, int, float]
) -> None:
    text = GOOD.replace("url: http://127.0.0.1:9091\n", "url: http://127.0.0.1:9091\n" + gateway)
    text = text.replace(
        "directory: /probe", f"directory: /probe\n    timeout_seconds: {probe_timeout}"
    )
    config = load_config(write(tmp_path, text))
    gw = config.pushgateway
    assert (gw.timeout_seconds, gw.attempts, gw.writer_lease_seconds) == expected
    assert config.targets[0].timeout_seconds == probe_timeout
