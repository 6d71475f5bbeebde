"""Reading fields of Kubernetes JSON objects, strictly by type and leniently by presence.

The API leaves out what is unset (an absent field, or null), so a reader takes a missing
field as "not set". A field of the wrong type is another matter: the object is not what its
API reference says (a proxy's error page decoded as JSON, a future API version), and a
timeline built on a guess would be wrong without a sign; so it is a `ShapeError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fioprobe.errors import FioprobeError
from fioprobe.text import printable


class ShapeError(FioprobeError):
    """An object does not have the shape of its Kubernetes API reference."""


def _where(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def mapping(obj: Mapping[str, Any], key: str, path: str = "") -> Mapping[str, Any]:
    """The object at `key`; an empty one when absent or null."""
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ShapeError(f"{_where(path, key)} is {type(value).__name__}, not an object")
    return value


def items(obj: Mapping[str, Any], key: str, path: str = "") -> Sequence[Mapping[str, Any]]:
    """The list of objects at `key`; an empty one when absent or null."""
    value = obj.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, Mapping) for item in value):
        raise ShapeError(f"{_where(path, key)} is not a list of objects")
    return value


def text(obj: Mapping[str, Any], key: str, path: str = "") -> str | None:
    """The string at `key`, None when absent, null or empty."""
    value = obj.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ShapeError(f"{_where(path, key)} is {type(value).__name__}, not a string")
    return value


def required_text(obj: Mapping[str, Any], key: str, path: str = "") -> str:
    """The string at `key`, which the API always sets (a name, a watch event's type)."""
    value = text(obj, key, path)
    if value is None:
        raise ShapeError(f"{_where(path, key)} is missing")
    return value


def flag(obj: Mapping[str, Any], key: str, path: str = "") -> bool:
    """The boolean at `key`; false when absent or null (how the API omits a false)."""
    value = obj.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ShapeError(f"{_where(path, key)} is {type(value).__name__}, not a boolean")
    return value


def integer(obj: Mapping[str, Any], key: str, path: str = "") -> int | None:
    """The integer at `key`, None when absent or null."""
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ShapeError(f"{_where(path, key)} is {type(value).__name__}, not an integer")
    return value


def message(value: str | None, limit: int = 400) -> str:
    """A message from the cluster (an event's, an error's) as one printable, bounded line:
    it goes to the log, where a newline would forge a line of its own."""
    return printable(value or "", limit)
