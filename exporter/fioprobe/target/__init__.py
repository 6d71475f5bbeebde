"""What the scheduled probe (`probe/`) and the stream (`continuous/`) share about a target.

Its configuration (`config.py`, the sizes in it: `quantity.py`, the volume models it names:
`volumes.py`) and the safe ways to touch its volume from a child: the command line of a
child running fioprobe's own code (`childproc.py`), the marker of a child left stuck in the
kernel (`stuck.py`), the check that a directory is on etcd's filesystem
(`etcd_filesystem.py`). Below both paths, so neither borrows from the other.
"""
