"""Where a fio field becomes a metric. In: a `model.Run` and the group's totals; out: Prometheus
metric families (`collector.py`), pushed by prometheus_client (`fioprobe.gateway.api`) or
written as text for `fioprobe convert` (`exposition.py`). `table.py` is the one table of every
metric; `histogram.py` turns fio's latency bins into contract buckets; `totals.py` adds runs
up into the cumulative totals every push carries. Units are converted before this stage,
by fio/parse.py: the model is in seconds and bytes (json+ bins keep fio's nanoseconds, which
`histogram.py` maps onto the buckets).
"""
