"""Test support: real fault injection (slow FUSE filesystem, loop devices, blkio throttling).

Import from tests as ``support.<module>``: pytest puts tests/ on sys.path (rootdir-relative
"prepend" import mode, tests/ has no __init__.py). See README.md in this folder.
"""
