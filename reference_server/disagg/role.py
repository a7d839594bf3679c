"""An engine's part in a disaggregated cluster (`--role`, given by the router) and what admitting a
request means for it: a prefill engine computes the prompt (one token) and offers its KV under the
router's transfer id; a decode engine pulls the KV first, and when the pull fails does what
`--kv-failure` says, the three behaviours engines have shipped:

- `fail-fast`: 503 once no KV byte came for `--kv-stall` (an error at once);
- `recompute`: prefill the prompt here instead (ok, the prefill's time later);
- `hang`: wait for the KV until `--kv-timeout` from the request's arrival, no response head
  meanwhile, then 504 (SGLang's and vLLM's waits on a transfer that never comes)."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from prometheus_client import CollectorRegistry
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reference_server.disagg import kv_pull
from reference_server.disagg.kv_server import KVServer, Wire
from reference_server.disagg.metrics import KVMetrics

KV_TRANSFER = "x-llmchaos-kv-transfer"  # router -> prefill: prefill, and keep the KV under this id
KV_FROM = "x-llmchaos-kv-from"  # router -> decode: pull the KV from HOST:PORT/ID first
KV_HEADER = "x-llmchaos-kv"  # decode -> client: pulled | recomputed | failed | timed_out
log = logging.getLogger("llmchaos.kv")
STALL_S = 0.25  # the default --kv-stall: decode gives a transfer up after this long without a byte


@dataclass(frozen=True)
class Options:
    role: str  # prefill | decode
    failure: str = "recompute"
    timeout_s: float = 300.0
    host: str = "127.0.0.1"
    kv_port: int = 0  # prefill: where its KV server listens
    stall_s: float = STALL_S  # fail-fast, recompute: no byte for this long and the transfer failed


class KVFailed(Exception):
    """A pull failed and the request fails with it: `status` (503, 504), the KV's way `kv`."""

    def __init__(self, kv: str, status: int, message: str) -> None:
        super().__init__(message)
        self.kv, self.status = kv, status


class Role:
    def __init__(self, opts: Options, wire: Wire, registry: CollectorRegistry) -> None:
        self.opts = opts
        self.metrics = KVMetrics(registry, opts.role)
        self.server = KVServer(wire, self.metrics) if opts.role == "prefill" else None

    async def start(self) -> None:
        if self.server is not None:
            await self.server.start(self.opts.host, self.opts.kv_port)

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop()

    def offer(self, transfer_id: str, tokens: int) -> None:
        assert self.server is not None, "a prefill engine's"
        self.server.offer(transfer_id, tokens)

    async def pull(self, header: str, tokens: int, arrived: float) -> tuple[int, str]:
        """The prompt tokens whose KV came (all but the last, which decode computes for its first
        token's logits, as vLLM's connectors leave it) and the KV's way; KVFailed when it fails."""
        hang, deadline = self.opts.failure == "hang", arrived + self.opts.timeout_s
        try:
            stall = self.opts.timeout_s if hang else self.opts.stall_s
            await kv_pull.pull(header, tokens, stall, deadline, self.metrics)
        except kv_pull.KVFailure as e:
            log.warning("KV transfer %s failed (%s): %s", header, self.opts.failure, e)
            if self.opts.failure == "recompute":
                return self._ended(0, "recomputed")
            if not hang:
                self._ended(0, "failed")
                raise KVFailed("failed", 503, f"KV transfer from {header} failed: {e}") from None
            await asyncio.sleep(max(0.0, deadline - time.monotonic()))
            self._ended(0, "timed_out")
            raise KVFailed(
                "timed_out", 504, f"KV transfer from {header} not done in {self.opts.timeout_s:g} s: {e}"
            ) from None
        return self._ended(tokens - 1, "pulled")

    def _ended(self, external: int, kv: str) -> tuple[int, str]:
        self.metrics.ended(kv)
        return external, kv


class KVOutcome:
    """Adds `x-llmchaos-kv` (how the request's KV came: `request.state.kv`) to the response's head."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start" and (kv := scope.get("state", {}).get("kv")):
                message = {**message, "headers": [*message.get("headers", []), (KV_HEADER.encode(), kv.encode())]}
            await send(message)

        await self.app(scope, receive, sending)
