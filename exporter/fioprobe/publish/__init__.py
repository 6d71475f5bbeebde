"""Totals across runs and the one path to the gateway. In: one outcome; out: the group's new
cumulative totals, saved (`statefile.py`, `totals.py`) and pushed (`outcome.py` calls
`gateway`).
"""
