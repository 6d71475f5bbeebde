"""Where a fio field becomes a metric. In: a `model.Run` and the group's totals; out: Prometheus
metric families (`collector.py`), written as text (`exposition.py`). `table.py` is the one table
of every metric; `histogram.py` turns fio's latency bins into contract buckets;
`totals.py` adds runs up into the cumulative totals every push carries.
"""
