"""Real Pushgateway, Prometheus and Alertmanager processes on this machine, and Prometheus's
HTTP API: what the demo runs and the preview evaluates dashboards against. Below both, so
neither borrows from the other.
"""
