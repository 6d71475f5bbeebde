"""fio outputs into Prometheus without a probe: `convert` prints one as text, `backfill` writes
archives into TSDB blocks.
"""
