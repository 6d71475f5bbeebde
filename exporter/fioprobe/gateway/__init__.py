"""The Pushgateway. In: metric families and a grouping key; out: a push, a read-back, a deletion.
The HTTP client (`transport.py`, `deadline.py`) knows no metric; `api.py` is the Pushgateway's API;
`readback.py` decides what a group read back may be trusted with; `shards.py` picks the replica;
`settings.py` is where the gateway is and how to reach it. Deleting the groups no configuration
names needs the configurations, so it lives with them (`fioprobe.probe.gc`).
"""
