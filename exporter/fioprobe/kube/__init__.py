"""The Kubernetes API, read-only, from inside a pod: what the probes learn from the cluster
itself (the etcd members today; PVCs and StorageClasses later). Below every stage that asks
it, above the foundation; it needs nothing of fio, metrics, the Pushgateway or the state."""
