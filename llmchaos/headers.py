"""The headers every request carries between the harness, the SSE chaos proxy and the servers."""

from __future__ import annotations

LANG_HEADER = "x-llmchaos-lang"  # the request's language tag, read by the reference server and the proxy
REQUEST_ID_HEADER = "x-request-id"  # sent with every request, kept in requests.jsonl to match a server's logs
# set by a cluster's router on each response it routes (reference_server/cluster; a real router's own
# header names the replica instead: --replica-header)
REPLICA_HEADER = "x-llmchaos-replica"  # the replica that streamed the answer
FAILOVER_HEADER = "x-llmchaos-failover"  # replicas tried and failed before it (absent: none)
KV_HEADER = "x-llmchaos-kv"  # disaggregated: how the decode engine got the prompt's KV cache (KV_WAYS)
KV_WAYS = ("pulled", "recomputed", "failed", "timed_out")
