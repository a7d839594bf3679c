"""What a token costs: the GPUs' energy read where `--energy-from` says (a Prometheus, a `/metrics`
page, a fault host's NVML counters: one module each, `readings` what they share), sampled over the
run (`sampler`), and shared out per language and phase by the tokens each produced (`attribute`)."""
