"""The range of every numeric setting that both the command line and the configuration file
take: one home, so `--timeout 0.01` and `timeout_seconds: 0.01` are refused alike.

Each is (lowest, highest), inclusive. The command line checks them with the types of
`fioprobe.cli.argtypes`, the configuration file where it reads the key
(`fioprobe.target.config`).
"""

from __future__ import annotations

#: One whole Pushgateway request (`--timeout`, `pushgateway.timeout_seconds`): below 0.1 s
#: no request completes, above ten minutes a gateway is down, not slow (a run waits
#: attempts x timeout at most).
REQUEST_SECONDS = (0.1, 600.0)
#: Tries per request (`--attempts`, `pushgateway.attempts`): with the backoff doubling from
#: 0.5 s, ten tries already wait 4 minutes.
ATTEMPTS = (1, 10)
#: The writer lease (`--writer-lease`, `pushgateway.writer_lease_seconds`): at least a second;
#: at most a week, longer than any probe schedule (a lease outlives the interval between a
#: writer's pushes) and short enough to be taken over.
LEASE_SECONDS = (1.0, 7 * 86400.0)
#: The wall-clock limit around one profile run (`--probe-timeout`, a target's
#: `timeout_seconds`): a second to a day.
PROBE_SECONDS = (1.0, 86400.0)
#: Runs of one node-bound class at once (`fioprobe provision --max-parallel`,
#: `provisioning.maxParallel`): each adds five watches, and receives every other run's volume
#: and attachment changes (docs/SIZING.md).
PROVISION_PARALLEL = (1, 64)
#: Nodes one class may list (`--nodes`, `provisioning.nodes`): a run each per interval.
PROVISION_NODES = (1, 1000)
