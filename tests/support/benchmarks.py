"""The distributed benchmark of docs/DISTRIBUTED.md ("In a cluster"), as the tests of its
Kubernetes objects (jsonnet and the Helm chart) describe it: a StorageClass qualified across
three worker nodes before it is trusted."""

from __future__ import annotations

from typing import Any

QUALIFY_GP3: dict[str, Any] = {
    "name": "qualify-gp3",
    "storageclass": "gp3",
    "servers": 3,
    "volumeSize": "40Gi",
    "nodeSelector": {"node-role.kubernetes.io/worker": ""},
    "plan": {
        "jobs_per_server": 4,
        "file_size": "8g",
        "block_size": "8k",
        "runtime": 240,
        "budget": {"bytes_per_server": "200g", "seconds_per_server": 1200},
    },
}
