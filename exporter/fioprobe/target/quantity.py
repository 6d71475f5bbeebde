"""Sizes as Kubernetes writes them (100Gi, 500Mi, 4096), read into bytes.

Its own module, free of yaml: the configuration reads sizes with it, and so do the
command line's size options and the distributed plan, which need nothing else of it.
"""

from __future__ import annotations

import re

_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)\s*(Ki|Mi|Gi|Ti|K|M|G|T)?$")
_QUANTITY_SCALE = {
    None: 1,
    "Ki": 1024,
    "Mi": 1024**2,
    "Gi": 1024**3,
    "Ti": 1024**4,
    "K": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
}


def quantity_bytes(text: str) -> float | None:
    """A Kubernetes-style quantity (100Gi, 500Mi, 4096) in bytes; None if it is not one.
    May be fractional or infinite: callers decide what they accept."""
    match = _QUANTITY.match(text.strip()) if len(text) <= 64 else None
    if not match:
        return None
    return float(match.group(1)) * _QUANTITY_SCALE[match.group(2)]
