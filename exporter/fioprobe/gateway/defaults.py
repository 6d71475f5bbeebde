"""How long and how often fioprobe tries each Pushgateway request, unless configured.

One home for the values the HTTP client (`transport.Transport`), the configuration file
(`pushgateway:` in config.yaml) and the command line (`--timeout`, `--attempts`) default to;
apart from the client so that parsing the command line does not import it.
"""

from __future__ import annotations

#: Deadline of one whole request: connect, send, answer.
TIMEOUT_SECONDS = 10.0
#: Tries per request; only network errors and HTTP 5xx are tried again.
ATTEMPTS = 3
#: Wait before the second try, doubled before each further one.
BACKOFF_SECONDS = 0.5
#: How long a writer's pushes make the group its own: past this, another writer may take it
#: over, and the writer itself reads the group back before pushing again. Longer than any
#: sensible probe interval; shorter than the time anyone waits for a replaced pod's probe.
WRITER_LEASE_SECONDS = 3600.0
