"""fioprobe: scheduled fio probes of Kubernetes storage, exported to Prometheus."""

__version__ = "0.1.0"
