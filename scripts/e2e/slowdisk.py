"""The slow disks of `make e2e`: `fioprobe.slowdisk` (the FUSE passthrough that adds a delay
to every fsync, as in `make demo`), with new files owned by the process that creates them.

Why the difference: the FUSE daemon runs as root and creates every file and directory as
root, and the mount uses `default_permissions`, so the kernel checks access against those
owners. A probe running as 65532 could then not enter the 0700 state directory it has just
made. A real filesystem gives a new file its creator's uid, and its creator's gid unless the
parent directory is setgid (then the parent's group: that is how fsGroup keeps a volume
writable); this wrapper does the same after each create, mkdir, mknod and symlink.

Run as a process (foreground, the same options as `python -m fioprobe.slowdisk`):
    python scripts/e2e/slowdisk.py --backing DIR --mountpoint DIR --fsync-delay-ms 15
SIGTERM unmounts and exits. As root the mount has `allow_other`, so the kubelet can
bind-mount it into pods and the probe user can use it.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable
from typing import Any

from fioprobe import slowdisk

_build_operations = slowdisk._build_operations


def _owned_operations(backing: str, delays: slowdisk.Delays) -> Any:
    from fuse import fuse_get_context

    operations = _build_operations(backing, delays)
    root = os.path.realpath(backing)

    def give_to_caller(path: str) -> None:
        uid, gid, _pid = fuse_get_context()
        full = os.path.join(root, path.lstrip("/"))
        parent = os.stat(os.path.dirname(full))
        group = -1 if parent.st_mode & stat.S_ISGID else gid
        os.lchown(full, uid, group)

    def owned(name: str, path_index: int) -> Callable[..., Any]:
        original = getattr(operations, name)

        def call(*args: Any) -> Any:
            result = original(*args)
            give_to_caller(args[path_index])
            return result

        return call

    # fusepy dispatches by attribute name on the instance; symlink's new path is its first
    # argument (fusepy's `target`).
    for name in ("create", "mkdir", "mknod", "symlink"):
        setattr(operations, name, owned(name, 0))
    return operations


def main(argv: list[str] | None = None) -> int:
    # slowdisk.serve builds its operations through this module attribute: replacing it keeps
    # every mount option and the control file of the original.
    slowdisk._build_operations = _owned_operations
    return slowdisk.main(argv)


if __name__ == "__main__":
    sys.exit(main())
