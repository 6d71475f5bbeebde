"""`fioprobe demo`: the whole chain on this machine with real Pushgateway, Prometheus and
Alertmanager processes, and a FUSE filesystem that makes fsync slow.
"""
