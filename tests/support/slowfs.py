"""The slow FUSE disk of the tests: `fioprobe.demo.slowdisk`, which `fioprobe demo` uses too."""

from fioprobe.demo.slowdisk import (
    STARTED,
    SlowFs,
    force_unmount,
    leftovers,
    mount_fstype,
    mount_points_under,
    slow_fs,
)

__all__ = [
    "STARTED",
    "SlowFs",
    "force_unmount",
    "leftovers",
    "mount_fstype",
    "mount_points_under",
    "slow_fs",
]
