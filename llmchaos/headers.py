"""The headers every request carries between the harness, the SSE chaos proxy and the servers."""

from __future__ import annotations

LANG_HEADER = "x-llmchaos-lang"  # the request's language tag, read by the reference server and the proxy
REQUEST_ID_HEADER = "x-request-id"  # sent with every request, kept in requests.jsonl to match a server's logs
