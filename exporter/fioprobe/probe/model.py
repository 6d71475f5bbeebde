"""The data of one probe: what it probes (`ProbeTarget`) and what came of it (`RunResult`).

Their own module, below everything of the probe that passes them around: the run
(`prober`), its volume part in a child (`volume_part`), the publish, the credit model.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from fioprobe.grouping import probe_key
from fioprobe.metrics.collector import ProbeOutcome
from fioprobe.publish.outcome import WRITER_LEASE_SECONDS
from fioprobe.publish.statefile import StateDir, StateFile, state_directory
from fioprobe.target.config import VolumeConfig
from fioprobe.target.stuck import Marker


@dataclass(frozen=True, slots=True)
class ProbeTarget:
    storageclass: str
    directory: Path
    profile: str
    node: str | None = None
    overrides: dict[str, str] = field(default_factory=dict)
    volume: VolumeConfig = field(default_factory=VolumeConfig)
    timeout_seconds: float | None = None
    require_mount_point: bool = False
    state_dir: Path | None = None
    #: One exact state file (`fioprobe probe --state`), instead of one per group in state_dir.
    state_path: Path | None = None
    lease_seconds: float = WRITER_LEASE_SECONDS
    #: The configuration the group belongs to, pushed as fioprobe_owner_info (see gc.py).
    owner: str | None = None
    #: Whether the disk holds etcd (fioprobe_info{etcd_disk}); None: not known (not pushed).
    etcd_disk: bool | None = None
    #: etcd's data directory: the probe directory must be on its filesystem (`etcd_filesystem`).
    etcd_data_dir: Path | None = None

    @property
    def grouping_key(self) -> dict[str, str]:
        return probe_key(self.storageclass, self.profile, self.node)

    @property
    def state_inside(self) -> bool:
        """Whether the state lives in the probe directory (a dedicated volume's default)."""
        return self.state_path is None and self.state_dir is None and self.volume.dedicated

    @property
    def state_directory(self) -> Path:
        """The directory of the state, by path alone (nothing on disk is looked at)."""
        return Path(os.path.abspath(self.state_file().directory.path))

    @property
    def state_on_volume(self) -> bool:
        """Whether the state lives under the probe directory, on the probed volume: then
        it is touched only by a child, like everything else there. Decided by path: a state
        directory that reaches the volume by another path (a bind mount) is not seen."""
        return within(self.state_directory, self.directory)

    def stuck_marker(self) -> Marker:
        """Where a child left stuck on this volume is written down (see `stuck`)."""
        own = None if self.state_on_volume else self.state_directory
        return Marker.for_directory(self.directory, own)

    def state_file(self) -> StateFile:
        """Where the state lives follows the volume model (`statefile.state_directory`)."""
        if self.state_path is not None:
            parent = StateDir(self.state_path.parent, create_parents=True)
            return parent.file(self.state_path.name)
        directory = state_directory(
            self.directory, dedicated=self.volume.dedicated, state_dir=self.state_dir
        )
        return directory.group_file(self.grouping_key)


@dataclass(slots=True)
class RunResult:
    outcome: ProbeOutcome
    started_at: float
    message: str = ""
    #: The volume did not answer within the deadline (its child was abandoned): nothing on
    #: it is touched again in this run, the state there included.
    volume_hung: bool = False


def within(path: Path, directory: Path) -> bool:
    """Whether `path` is `directory` or below it, by path alone (nothing is looked at)."""
    path, directory = Path(os.path.abspath(path)), Path(os.path.abspath(directory))
    return path == directory or directory in path.parents
