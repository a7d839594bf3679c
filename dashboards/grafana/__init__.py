"""Grafana dashboards generated from code (grafanalib): load, A/B and server; `llmchaos dashboards build`."""
