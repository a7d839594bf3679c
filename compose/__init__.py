"""The whole loop put together: the local stack (`llmchaos stack`, every component started by its
command), the demo (`make demo`), the nightly gate (`make nightly`); beside them the same stack in
containers (docker-compose*.yml, Dockerfile) and the Prometheus and Grafana provisioning."""
