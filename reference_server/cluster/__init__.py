"""The reference server as a cluster: `llmchaos serve --replicas N` or `--disaggregate P:D` runs the
engines as child processes (`supervisor`), health-checked (`health`), behind a router (`router`)
that picks one by its policy (`policies`), relays the stream unbuffered (`relay`), sends a
disaggregated request to a prefill then a decode engine, merges their /metrics (`metrics`) and
takes the faults' admin calls (`admin`)."""
