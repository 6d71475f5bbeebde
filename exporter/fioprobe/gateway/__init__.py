"""The Pushgateway. In: metric families and a grouping key; out: a push, a read-back, a deletion.
The HTTP client knows no metric; `shards.py` picks the replica; `gc.py` deletes groups no longer
configured.
"""
