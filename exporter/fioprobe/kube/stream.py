"""An answer of the API server read as it comes, line by line: the transport of a watch.

The request was sent, and its status read, by `fioprobe.kube.client` under one `Deadline`;
the stream keeps that deadline running (a watch's own, longer than a request's), so a server
that keeps the answer open past it is cut off, and `close` cuts it off at once from another
thread (the reader returns, no error).
"""

from __future__ import annotations

import http.client
import threading

from fioprobe.exchange import Deadline, DeadlineHit
from fioprobe.kube.errors import KubeBadAnswer, KubeUnreachable
from fioprobe.text import printable


class Stream:
    """An answer read line by line as the API server writes it (a watch's events), until
    the server ends it, its deadline passes, or `close` is called, from any thread."""

    def __init__(
        self,
        connection: http.client.HTTPConnection,
        response: http.client.HTTPResponse,
        deadline: Deadline,
        asked: str,
        server: str,
    ) -> None:
        self._connection = connection
        self._response = response
        self._deadline = deadline
        self._asked = asked
        self._server = server
        self._closed = threading.Event()  # set by `close`, from another thread

    def readline(self, limit: int) -> bytes:
        """The next line, its newline included; b"" at the end of the answer or once
        closed. A line longer than `limit` bytes is a KubeBadAnswer."""
        if self._closed.is_set():
            return b""
        try:
            line = self._response.readline(limit + 1)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            if self._closed.is_set():
                return b""
            if self._deadline.hit() or isinstance(exc, DeadlineHit):
                raise KubeUnreachable(
                    f"{self._asked}: {self._server} kept the answer open past "
                    f"{self._deadline.seconds:g}s"
                ) from None
            raise KubeUnreachable(
                f"{self._asked}: {self._server} broke off its answer "
                f"({printable(str(exc) or type(exc).__name__, 200)})"
            ) from None
        if not line and self._deadline.hit() and not self._closed.is_set():
            # The deadline shut the socket down: to the reader, the answer just ended.
            raise KubeUnreachable(
                f"{self._asked}: {self._server} kept the answer open past "
                f"{self._deadline.seconds:g}s"
            )
        if len(line) > limit:
            raise KubeBadAnswer(
                f"{self._asked}: {self._server} sent a line longer than {limit} bytes"
            )
        return line

    def close(self) -> None:
        """Stop reading: a read in progress (in another thread) returns b"" at once."""
        self._closed.set()
        self._deadline.cut()

    def release(self) -> None:
        """Free the connection (by the thread that read it, once done)."""
        self._closed.set()
        self._connection.close()
        self._deadline.close()
