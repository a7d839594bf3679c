"""The SSE chaos proxy (`llmchaos proxy`): forwards HTTP/1.1 to an upstream and, while a fault is
active, misbehaves per SSE event the way real gateways and networks do.

A fault is set, read back and cleared over the proxy's own loopback-only control API
(`PUT|GET|DELETE /_llmchaos/fault`), so the schedule runner can apply and revert it like any
other injector; `--control-listen` answers it alone on a port of its own, from any peer (on a
cluster, where a NetworkPolicy keeps that port inside the namespace). With no fault active, each
read from the upstream is written to the client in
the same callback: asyncio protocols and httptools' parser, by hand, because a framework's
per-chunk task hand-offs (aiohttp's cost 1.7 ms at p99 here) are more than the proxy may add.

The pieces: `fault` (what a fault does, checked), `events` (SSE event boundaries across reads),
`misbehave` (one stream through a fault), `wire` (HTTP pieces), `address` (the command line's
addresses), `upstream` (connections and their pool), `exchange` (one request and its answer),
`client` (one client connection), `server` (the shared state, the control API, `serve`).
The package imports none of them: `llmchaos faults` builds its parser without the proxy's server.
"""
