"""Dashboards evaluated against a real Prometheus and drawn, for places without Grafana."""
