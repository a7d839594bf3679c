"""The readers of results: `report`, `compare` and `regress`, their statistics (comparison/) and
output formats (formats/), and the generated Grafana dashboards (grafana/)."""
