"""Prefill/decode disaggregation: a prefill engine keeps each prompt's KV cache for a decode engine,
which pulls it over a real TCP connection (`kv_server`, `kv_pull`), through a link that can be
slowed, made lossy or cut (`link`); `role` is an engine's part in it."""

FAILURES = ("fail-fast", "recompute", "hang")  # --kv-failure: here, so the CLI names them without importing a server
