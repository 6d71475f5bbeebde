"""urllib's http:// and https:// handlers, each connection they make bound to one `Deadline`.

The transport (`fioprobe.gateway.transport`) reaches a Pushgateway through urllib, for its
proxies from the environment; these handlers make every connection of one opener under the
deadline of that one exchange (`fioprobe.exchange` says why a deadline, not socket timeouts).
They are the lowest layer of the transport, kept apart because they know no URL, credential
or answer.
"""

from __future__ import annotations

import functools
import http.client
import ssl
import urllib.request

from fioprobe.exchange import Deadline, DeadlineHTTPConnection, DeadlineHTTPSConnection


class DeadlineHTTPHandler(urllib.request.HTTPHandler):
    """urllib's http:// handler whose connections are made and watched by `deadline`."""

    def __init__(self, deadline: Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        connection = functools.partial(DeadlineHTTPConnection, deadline=self._deadline)
        return self.do_open(connection, req)


class DeadlineHTTPSHandler(urllib.request.HTTPSHandler):
    """urllib's https:// handler whose connections are made and watched by `deadline`."""

    def __init__(self, deadline: Deadline, context: ssl.SSLContext | None) -> None:
        super().__init__(context=context)
        self._deadline = deadline
        self._tls = context

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        connection = functools.partial(DeadlineHTTPSConnection, deadline=self._deadline)
        return self.do_open(connection, req, context=self._tls)
