"""The readers of results: reports now; Grafana dashboards, A/B comparison and the regression gate to come."""
