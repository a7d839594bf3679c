"""The KV transfer's series, on both sides of it (`role`: prefill sends, decode receives), in the
engine's registry beside vLLM's."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

ROLES = ("prefill", "decode")
RESULTS = ("pulled", "recomputed", "failed", "timed_out")  # how a decode engine's pulls ended
SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class KVMetrics:
    def __init__(self, registry: CollectorRegistry, role: str) -> None:
        self.role = role
        self.bytes = Counter(
            "llmchaos_kv_transfer_bytes",
            "KV-cache bytes sent (prefill) or received (decode).",
            ["role"],
            registry=registry,
        ).labels(role)
        self.seconds = Histogram(
            "llmchaos_kv_transfer_seconds",
            "One KV transfer, from its request to its last byte (whole transfers only).",
            ["role"],
            buckets=SECONDS_BUCKETS,
            registry=registry,
        ).labels(role)
        self.results: dict[str, Counter] = {}
        if role == "decode":
            family = Counter(
                "llmchaos_kv_transfers", "Decode's KV pulls by how they ended.", ["result"], registry=registry
            )
            self.results = {r: family.labels(r) for r in RESULTS}

    def sent(self, n: int) -> None:
        self.bytes.inc(n)

    def transferred(self, seconds: float) -> None:
        self.seconds.observe(seconds)

    def ended(self, result: str) -> None:
        self.results[result].inc()
