"""`fioprobe gc` against a real Pushgateway whose groups carry hostile label values: every
string read from the gateway reaches gc's output inert, on its own line (no line break that
forges a line of its own, no escape sequence that rewrites the operator's terminal)."""

from __future__ import annotations

import base64
import urllib.request
from pathlib import Path

from conftest import fioprobe
from support import services
from support.gc_owner import OWNER, groups, write_config

#: A line break and an ANSI colour: what a tenant who can push to the gateway may plant.
HOSTILE = "evil\nfioprobe: forged line\x1b[31m"
#: How printable() writes the escape: visible and inert.
SHOWN_ESCAPE = "\\x1b[31m"


def put_group(gateway: services.Service, labels: dict[str, str], body: str) -> None:
    """Push `body` as the group `labels` by plain HTTP, each value base64-encoded in the
    path so that any character can be part of the grouping key."""
    path = "".join(
        f"/{name}@base64/{base64.urlsafe_b64encode(value.encode()).decode()}"
        for name, value in labels.items()
    )
    request = urllib.request.Request(
        f"{gateway.url}/metrics/job/fioprobe{path}", data=body.encode(), method="PUT"
    )
    urllib.request.urlopen(request, timeout=10).close()


def text_value(value: str) -> str:
    """`value` as a label value of the text exposition format."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def owner_info(owner: str) -> str:
    return f'fioprobe_owner_info{{owner="{text_value(owner)}"}} 1\nfioprobe_success 1\n'


def test_hostile_labels_never_reach_gc_output_raw(
    pushgateway: services.Service, tmp_path: Path
) -> None:
    # A writer conflict group of a removed probe, ours: deleted and listed with its writer.
    put_group(pushgateway, {"storageclass": "gone", "profile": "etcd-fsync", "writer": HOSTILE},
              owner_info(OWNER))  # fmt: skip
    # A group of another owner whose name is hostile: named in the summary.
    put_group(pushgateway, {"storageclass": "gp3", "profile": "seqread-bw"}, owner_info(HOSTILE))
    # A group that is no fioprobe grouping key: listed as left alone with its labels.
    put_group(pushgateway, {"storageclass": "gp3", "instance": HOSTILE}, owner_info(OWNER))
    assert len(groups(pushgateway)) == 3
    config = write_config(tmp_path / "config.yaml", pushgateway)

    result = fioprobe("gc", "--config", str(config), "--dry-run", timeout=120)

    assert result.returncode == 0, result.stderr.decode()
    stdout, stderr = result.stdout.decode(), result.stderr.decode()
    assert "\x1b" not in stdout + stderr
    assert all(line.startswith("fioprobe: ") for line in stderr.splitlines()), stderr
    assert not any(line.startswith("fioprobe: forged") for line in stderr.splitlines())
    assert stdout.splitlines() == [
        "would delete {'storageclass': 'gone', 'profile': 'etcd-fsync', 'writer': "
        "'evil\\nfioprobe: forged line\\x1b[31m'}"
    ]
    summary = stderr.splitlines()[-1]
    assert summary == (
        "fioprobe: would delete 1 groups, kept 0; left alone 1 of other owners "
        f"(evil fioprobe: forged line{SHOWN_ESCAPE}), 0 without an owner (see --unowned)"
    )
    foreign = [line for line in stderr.splitlines() if "not a fioprobe grouping key" in line]
    assert len(foreign) == 1 and SHOWN_ESCAPE in foreign[0] and "\\n" in foreign[0]
