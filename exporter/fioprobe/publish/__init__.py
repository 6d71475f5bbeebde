"""Totals across runs and the one path to the gateway. In: one outcome; out: the group's new
cumulative totals (`fioprobe.metrics.totals`), saved (`state.py`, in the files of
`statefile.py`) and pushed (`outcome.py` calls `gateway`).
"""
