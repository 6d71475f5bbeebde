"""A configuration of one owner and its Pushgateway's groups, for the tests of `fioprobe gc`."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from support import services

#: The owner of the configuration, as `fioprobe gc` is given it.
OWNER = "team-a"


def write_config(path: Path, gateway: services.Service) -> Path:
    """OWNER's configuration at `path`: gp3 (etcd-fsync, randread-iops) and node-local etcd
    (etcd-fsync), pushing to `gateway` with one attempt."""
    path.write_text(
        json.dumps(
            {
                "owner": OWNER,
                "pushgateway": {"url": gateway.url, "attempts": 1},
                "targets": [
                    {"name": "gp3", "directory": "/probe", "profiles": ["etcd-fsync",
                     "randread-iops"]},
                    {"name": "etcd", "directory": "/var/lib/etcd-probe", "node_local": True,
                     "profiles": ["etcd-fsync"]},
                ],
            }
        )
    )  # fmt: skip
    return path


def groups(gateway: services.Service) -> list[dict[str, str]]:
    """The labels of every group on `gateway`, sorted."""
    with urllib.request.urlopen(gateway.url + "/api/v1/metrics", timeout=5) as response:
        labels = [group["labels"] for group in json.load(response)["data"]]
    return sorted(labels, key=lambda g: sorted(g.items()))  # the API's order is not stable
