"""`llmchaos stack up|down|status`: the whole loop from local processes, started by their commands
(reference server, SSE proxy, Pushgateway, Prometheus, a Locust master with its web UI and workers,
Grafana when installed), with ports, PIDs and logs under one state directory."""
