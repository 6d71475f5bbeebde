"""The part of fusepy (module `fuse`, shipped without types) that fioprobe.demo uses."""

from typing import Any

class FuseOSError(OSError):
    def __init__(self, errno: int) -> None: ...

class Operations: ...

class FUSE:
    def __init__(
        self,
        operations: Operations,
        mountpoint: str,
        raw_fi: bool = ...,
        encoding: str = ...,
        **kwargs: Any,
    ) -> None: ...

def fuse_get_context() -> tuple[int, int, int]: ...
