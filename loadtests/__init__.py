"""The load test: Locust users, the harness and its sources (closed loop, open loop, a replayed
log), the data plane, log and trace readers, exporters and the web UI tabs."""
