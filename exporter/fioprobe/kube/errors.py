"""What can go wrong asking the Kubernetes API, one class per thing a caller does about it.

Each carries the HTTP status the API server answered (None when no answer came) and, when the
server wrote one, its Status object ({"kind": "Status", "reason": ..., "message": ...}): the
provisioning probe names its failure reason from them (an exceeded quota is a 403 whose
message says so), and the message alone would lose that.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fioprobe.errors import FioprobeError, UsageError


class KubeError(FioprobeError):
    """The Kubernetes API could not be asked, refused, or answered what cannot be used.

    Exit status 2 (nothing was run); callers that have a fallback catch it."""

    def __init__(
        self, message: str, status: int | None = None, answer: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        #: The HTTP status of the API server's answer; None when no usable answer came.
        self.status = status
        #: The API's Status object of a refusal, when its body was one.
        self.answer = answer


class KubeConfigError(KubeError, UsageError):
    """Where or how to reach the API is missing or cannot work (no pod environment, an
    unreadable token or CA file, a bad server URL): no retry can help."""


class KubeUnreachable(KubeError):
    """No answer: refused connection, a name that does not resolve, the deadline, a
    broken-off answer, or a server that says it is unavailable (5xx, 429)."""


class KubeUntrusted(KubeError):
    """The server's TLS certificate is not signed by the CA file (or names another host)."""


class KubeRefused(KubeError):
    """HTTP 401 (the token was not accepted) or 403 (the service account may not do this,
    or an admission plugin refused: a quota, Pod Security)."""


class KubeNotFound(KubeError):
    """HTTP 404: the object, or the resource itself, does not exist."""


class KubeConflict(KubeError):
    """HTTP 409: the object exists already, or is not the one a precondition named."""


class KubeInvalid(KubeError):
    """HTTP 422: the API server found the object sent invalid."""


class KubeBadAnswer(KubeError):
    """An answer that is not what the API sends: a redirect, another status, a body that is
    not JSON or not shaped as asked, or larger than the limit."""
