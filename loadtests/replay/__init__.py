"""Replay: a recorded log or a public trace as the load test's source, on its recorded schedule,
against one target or two (split by user, or mirrored).

`locustfile` (the users and the shape), `settings` (its options), `source` (the log as the harness's
source), `dispatch` (when each request is due, per worker), `calls` (a log line as the request sent),
`fidelity` (what it counts besides the requests: schedule fidelity, lengths, mirrored pairs),
`sides` (one results directory per side).
"""
