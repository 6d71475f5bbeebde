"""Test support: real fault injection (slow FUSE filesystem, loop devices, blkio throttling).

Import it as ``support.<module>``: pytest puts tests/ on the import path (``pythonpath`` in
pyproject.toml); benchmarks and scripts run with ``PYTHONPATH=tests``. It is never part of the
fioprobe package. See README.md in this folder.
"""
