"""One request's measurement and what it contributes to the histograms (definitions in DESIGN.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from llmchaos import slo, tokenizer
from llmchaos.run import RequestLine

DISAGREEMENT = 0.10  # server usage vs our count: flagged beyond 10 % and 2 tokens


@dataclass
class RequestRecord:
    lang: str
    api: str
    target: str
    phase: str = "baseline"
    request_id: str = ""  # sent as x-request-id, to match the target's own logs
    open_loop: bool = False
    intended: float = 0.0  # unix time the request was due (the actual send in closed loop)
    sent: float = 0.0  # unix time of the actual send
    outcome: str = "ok"
    status: int | None = None
    error: str | None = None
    retry_after: str | None = None
    ttft: float | None = None  # from the intended start
    e2e: float | None = None  # from the intended start
    gaps: list[float] = field(default_factory=list)  # between consecutive content events
    chunks: list[str] = field(default_factory=list)  # text of each content event
    usage_tokens: int | None = None

    @property
    def schedule_lag(self) -> float:
        return self.sent - self.intended

    @property
    def text(self) -> str:
        return "".join(self.chunks)

    def own_tokens(self) -> int:
        return tokenizer.count(self.text) if self.chunks else 0

    @cached_property
    def output_tokens(self) -> int:
        """The server's usage figure when it sent one, else our own count (read once the request
        has ended; counted once, as several metrics use it)."""
        return self.usage_tokens if self.usage_tokens is not None else self.own_tokens()

    def tokens_per_chunk(self) -> list[float]:
        """Tokens each content event delivered: one each when the server says so, else our
        tokenizer's count per event scaled to the total."""
        n, total = len(self.chunks), self.output_tokens
        if total == n or n == 0:
            return [1.0] * n
        counts = [max(1, tokenizer.count(c)) for c in self.chunks]
        scale = total / sum(counts)
        return [c * scale for c in counts]

    def itl(self) -> list[float]:
        """Each inter-chunk gap spread over the tokens of the chunk it delivered."""
        out: list[float] = []
        for gap, k in zip(self.gaps, self.tokens_per_chunk()[1:], strict=True):
            k_int = max(1, round(k))
            out.extend([gap / k_int] * k_int)
        return out

    def tpot(self) -> float | None:
        n = self.output_tokens
        if self.ttft is None or self.e2e is None or n < 2:
            return None
        return (self.e2e - self.ttft) / (n - 1)

    def attains(self, slo_limits: dict[str, float]) -> bool:
        """Whether this request met its language's SLO (a failure never does)."""
        ok = self.outcome == "ok"
        return slo.attained(
            slo_limits,
            ok=ok,
            ttft=self.ttft,
            e2e=self.e2e,
            tpot=self.tpot() if ok else None,
            max_gap=max(self.gaps, default=0.0),
        )

    def samples(self) -> dict[str, list[float]]:
        """Values this request adds to each metric's histogram (latencies only when it succeeded)."""
        out: dict[str, list[float]] = {}
        if self.open_loop:
            out["schedule_lag"] = [max(0.0, self.schedule_lag)]
        if self.outcome != "ok":
            return out
        out["ttft"] = [self.ttft] if self.ttft is not None else []
        out["e2e"] = [self.e2e] if self.e2e is not None else []
        out["inter_chunk"] = list(self.gaps)
        out["itl"] = self.itl()
        out["output_tokens"] = [self.output_tokens]
        if (tpot := self.tpot()) is not None:
            out["tpot"] = [tpot]
        if self.open_loop and self.ttft is not None and self.e2e is not None:
            out["ttft_sent"] = [self.ttft - self.schedule_lag]
            out["e2e_sent"] = [self.e2e - self.schedule_lag]
        return out

    def line(self, own: int) -> RequestLine:
        """The requests.jsonl line; `own` is our tokenizer's count of the text (counted in batches)."""
        chars = sum(map(len, self.chunks))
        return RequestLine(
            self.request_id,
            self.lang,
            self.api,
            self.target,
            self.phase,
            self.open_loop,
            self.intended,
            self.sent,
            self.schedule_lag,
            self.outcome,
            self.status,
            self.error,
            self.retry_after,
            self.ttft,
            self.e2e,
            self.gaps,
            self.usage_tokens,
            self.usage_tokens if self.usage_tokens is not None else own,
            own,
            chars,
            round(chars / own, 3) if own else None,
            self.usage_tokens is not None
            and own > 0
            and abs(self.usage_tokens - own) > max(2, DISAGREEMENT * self.usage_tokens),
        )
