"""One request's measurement and what it contributes to the histograms (definitions in DESIGN.md)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from functools import cache

from gevent.threadpool import ThreadPool

from llmchaos import slo, tokenizer
from llmchaos.metrics import per_turn
from llmchaos.run import ReplayFields, RequestLine, itl
from loadtests.adapters import ToolCall

SIDE = "a"  # the one side of a test with one target (an A/B replay has a and b)
DISAGREEMENT = 0.10  # server usage vs our count: flagged beyond 10 % and 2 tokens
OFF_LOOP_CHARS = 100_000  # longer texts are counted in a native thread (~0.5 s a MB)


def _count_behind(texts: list[str], stop: tokenizer.Stop | None) -> list[int] | None:
    """Count at the lowest CPU priority (Linux: per thread): a second's records take tens of ms to
    count, which must never delay a read of a stream on the same core. None: given up."""
    if sys.platform == "linux":
        os.setpriority(os.PRIO_PROCESS, 0, 19)
    try:
        return tokenizer.count_batch(texts, stop)
    except tokenizer.Abandoned:  # raised here, the pool's hub would print it as a crash
        return None


@cache
def _counting_pool() -> ThreadPool:
    """A native thread of its own for counting: the hub's shared pool (DNS lookups too) keeps its
    priority."""
    return ThreadPool(1)


def count_batch(texts: list[str], off_loop: bool, stop: tokenizer.Stop | None = None) -> list[int]:
    """Our tokenizer's counts of `texts`; in a native thread when `off_loop` (the tokenizer releases
    the GIL, so the event loop and every stream in flight go on meanwhile). `stop` set: given up
    before the next batch (`tokenizer.Abandoned`)."""
    if off_loop:
        counts: list[int] | None = _counting_pool().apply(_count_behind, (texts, stop))
        if counts is None:
            raise tokenizer.Abandoned
        return counts
    return tokenizer.count_batch(texts, stop)


def shares(total: int, weights: list[int]) -> list[int]:
    """`total` (at least len(weights)) in whole parts: one each, the rest in proportion to each
    weight beyond one (evenly when none is), by largest remainder, so they sum to `total` exactly."""
    beyond = [max(0, w - 1) for w in weights]
    if not any(beyond):
        beyond = [1] * len(weights)
    rest, whole = total - len(weights), sum(beyond)
    parts = [rest * b // whole for b in beyond]
    by_remainder = sorted(range(len(parts)), key=lambda i: -(rest * beyond[i] % whole))
    for i in by_remainder[: rest - sum(parts)]:
        parts[i] += 1
    return [1 + p for p in parts]


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
    ttft: float | None = None  # from the intended start: the first token of any kind (thinking too)
    ttfa: float | None = None  # from the intended start: the first answer token
    e2e: float | None = None  # from the intended start
    gaps: list[float] = field(default_factory=list)  # between consecutive content events (thinking too)
    chunks: list[str] = field(default_factory=list)  # text of each content event, its thinking first
    thinking: dict[int, int] = field(default_factory=dict)  # events that carried thinking: index -> its chars
    usage_tokens: int | None = None
    usage_reasoning: int | None = None  # the server's count of the thinking tokens within usage_tokens
    reads: int = 0  # socket reads of the body that brought content events
    coalesced_reads: int = 0  # ... that brought several (one kernel receive stamp for all: gaps lost)
    late_reads: int = 0  # ... of those, the ones whose first bytes can have waited LATE_S or more: taken late
    # content events stamped with bytes that came after them (their read's later events or bytes), up to `late` s
    # after them: (first content event, events, late); the validity's error bar (`late_errors`)
    late_spans: list[tuple[int, int, float]] = field(default_factory=list)
    at_stop: bool = False  # cancelled because the test stopped: not the target's doing, not issued
    own_total: int | None = None  # our tokenizer's count of the text, when the server sent no usage
    own_each: list[int] | None = None  # ... of each content event, when its tokens are to be shared out
    own_reasoning: int | None = None  # ... of the thinking, when the server sent no count of it
    replay: ReplayFields | None = None  # a replayed request: its log line, user, what it asked for
    side: str = SIDE  # which of the test's targets: a, or b in an A/B replay
    prepare_s: float | None = None  # open loop: its call's build, ahead of its time (a replay's prompt)
    send_s: float | None = None  # from its send to its last byte written (connecting included)
    canary: str | None = None  # a canary (--canary-rate): its name; its answer was checked
    replica: str | None = None  # the replica that answered, from the response header --replica-header names
    failed_over: int = 0  # replicas the router tried and failed before it (x-llmchaos-failover)
    kv: str | None = None  # disaggregated: how decode got the KV cache (x-llmchaos-kv: one of KV_WAYS)
    silent_s: float = 0.0  # the longest wait with no byte from the server (after the send; to the end if given up)
    end_s: float | None = None  # from the intended start to its end, whatever its outcome (None: cancelled)
    prefix: int | None = None  # --prefix-tokens: which of its language's shared prefixes it opened with
    session: str | None = None  # --sessions: the conversation it is a turn of
    turn: int | None = None  # ... and which (1: the first)
    prompt_tokens: int | None = None  # the server's count of the prompt, from its usage
    cached_tokens: int | None = None  # ... of which found in its prefix cache (None: it did not say)
    calls: list[ToolCall] = field(default_factory=list)  # the tool calls the answer made
    hop: int | None = None  # --sessions: 0 for a turn's user message, k for its k-th tools' results
    step: float | None = None  # ... the answer in text: its turn's time, from the user message's intended start
    counted: bool = field(default=False, repr=False)  # count_tokens has run
    uncounted: bool = False  # ... and was given up at the stop: own_* stay None

    @property
    def schedule_lag(self) -> float:
        return self.sent - self.intended

    @property
    def text(self) -> str:
        return "".join(self.chunks)

    @property
    def answer(self) -> str:
        """The answer's text, without the thinking."""
        return "".join(chunk[self.thinking.get(i, 0) :] for i, chunk in enumerate(self.chunks))

    @property
    def thought(self) -> str:
        """The thinking text, all of it."""
        return "".join(self.chunks[i][:chars] for i, chars in self.thinking.items())

    def _to_count(self) -> tuple[bool, bool, bool, int]:
        """Which texts `count_tokens` counts: the whole text (when the server sent no usage, with
        other texts, or long: else the collector counts it with others), each event's, the
        thinking; and their characters."""
        n, usage, chars = len(self.chunks), self.usage_tokens, sum(map(len, self.chunks))
        each = n > 1 and (usage is None or usage - self.unstreamed > n)
        thinking = bool(self.thinking) and self.usage_reasoning is None
        whole = n > 0 and (usage is None or each or thinking or chars > OFF_LOOP_CHARS)
        return whole, each, thinking, chars * (whole + each) + (sum(self.thinking.values()) if thinking else 0)

    @property
    def counts_long(self) -> bool:
        """Whether `count_tokens` has long texts to count (off the event loop: a second a MB)."""
        return not self.counted and self._to_count()[3] > OFF_LOOP_CHARS

    def count_tokens(self, stop: tokenizer.Stop | None = None) -> None:
        """Our tokenizer's counts this request needs, once it has ended, in one batch (off the event
        loop when the text is long): the whole text's, each content event's when the output has more
        tokens than events, the thinking's when the server did not count it. Long texts are given up
        once `stop` is set (the test stopped: they are never waited for): the request is then cut at
        the stop (`uncounted`)."""
        if self.counted:
            return
        whole, each, thinking, chars = self._to_count()
        texts = ([self.text] if whole else []) + (self.chunks if each else []) + ([self.thought] if thinking else [])
        if texts:
            long = chars > OFF_LOOP_CHARS
            try:  # a short text is counted whatever happens: at once, on the loop
                counts = count_batch(texts, off_loop=long, stop=stop if long else None)
            except tokenizer.Abandoned:
                self._cut_uncounted()
                return
            self.own_total = counts[0] if whole else None
            self.own_each = counts[whole : whole + len(self.chunks)] if each else None
            self.own_reasoning = counts[-1] if thinking else None
        self.counted = True

    def _cut_uncounted(self) -> None:
        """The test stopped before this request's text was counted: cancelled at the stop, apart from
        the requests issued (its latencies stand for no tokens), its tokens never counted."""
        before = "in flight" if self.outcome == "cancelled" else f"ended {self.outcome}"
        chars = sum(map(len, self.chunks))
        self.outcome, self.at_stop, self.counted, self.uncounted = "cancelled", True, True, True
        self.error = f"test stopped before its {chars:,} characters were counted ({before})"

    @property
    def output_tokens(self) -> int:
        """The server's usage figure when it sent one, else our own count (see `tokens_from`)."""
        if self.usage_tokens is not None:
            return self.usage_tokens
        self.count_tokens()
        return self.own_total or 0

    @property
    def reasoning_tokens(self) -> int | None:
        """Thinking tokens among `output_tokens`: the server's count when it sent one, else our own
        count of the thinking text (at most the output); None when the request showed no thinking."""
        if self.usage_reasoning is not None:
            return self.usage_reasoning
        if not self.thinking:
            return None
        self.count_tokens()
        return min(self.own_reasoning or 0, self.output_tokens)

    @property
    def unstreamed(self) -> int:
        """Tokens the server counted and never streamed: its thinking, counted in usage while no event
        showed any (Gemini without includeThoughts, a model that hides its reasoning). They are output
        tokens, and no event's: no gap delivered them."""
        if self.usage_tokens is None or not self.usage_reasoning or self.thinking:
            return 0
        return min(self.usage_reasoning, self.usage_tokens)

    @property
    def streamed_tokens(self) -> int:
        """The output tokens the stream's events delivered (`output_tokens` less `unstreamed`)."""
        return self.output_tokens - self.unstreamed

    @property
    def tokens_from(self) -> str | None:
        """Which count `output_tokens` (and so the ITL samples) came from: usage, tokenizer, or none
        (no usage and the text never counted: `uncounted`)."""
        if self.usage_tokens is not None:
            return "usage"
        return None if self.uncounted else "tokenizer"

    def tokens_per_chunk(self) -> list[int]:
        """Tokens each content event delivered, summing exactly to `streamed_tokens`: one each, the
        rest shared out in proportion to our tokenizer's count of each event (see `shares`); one
        each when the stream has no more tokens than events."""
        n, total = len(self.chunks), self.streamed_tokens
        if total <= n:
            return [1] * n
        self.count_tokens()
        return shares(total, self.own_each or [1] * n)

    def itl_spread(self, per_chunk: list[int] | None = None) -> tuple[list[float], list[int]]:
        """The ITL samples (the core's `itl`: each gap over the tokens of the chunk it delivered) and
        how many each stands for (recorded so: one event may carry a million); as many as output
        tokens after the first event's. `per_chunk`: `tokens_per_chunk`, when the caller has it."""
        return itl(self.gaps, self.tokens_per_chunk() if per_chunk is None else per_chunk)

    def token_times(self, per_chunk: list[int] | None = None) -> list[tuple[float, int]]:
        """When (unix time) each content event delivered how many output tokens (those never streamed
        with the first): what the energy of each sampling interval is shared out by. `per_chunk`:
        `tokens_per_chunk`, when the caller has it."""
        if self.ttft is None or not self.chunks:
            return []
        t, tokens = self.intended + self.ttft, self.tokens_per_chunk() if per_chunk is None else per_chunk
        out = [(t, tokens[0] + self.unstreamed)]
        for gap, n in zip(self.gaps, tokens[1:], strict=False):
            t += gap
            out.append((t, n))
        return out

    def late_errors(self) -> tuple[float, list[tuple[float, float, float, int]]]:
        """How far an ok request's samples can be from the truth by the generator's doing: a read
        stamps its events with its last bytes' arrival, and its first came at most its `late` before,
        so each event of `late_spans` came up to `late` before its stamp, never after. So TTFT
        can have been up to its first event's `late` less (never more), and each ITL sample
        (`itl_spread`'s: value, then how much less and how much more, then count) up to the `late` of
        the event its gap ends at less and that of the one it starts at more, over the tokens it
        stands for. Only samples off by something are listed."""
        if self.outcome != "ok" or not self.late_spans:
            return 0.0, []
        late = [0.0] * len(self.chunks)
        for first, events, seconds in self.late_spans:
            late[first : first + events] = [seconds] * events
        tokens, gaps = self.tokens_per_chunk(), self.gaps
        itl = [
            (gaps[i - 1] / tokens[i], late[i] / tokens[i], late[i - 1] / tokens[i], tokens[i])
            for i in range(1, len(late))
            if late[i - 1] or late[i]
        ]
        return (late[0] if self.ttft is not None else 0.0), itl

    def tpot(self) -> float | None:
        """Time per output token after the first, of the tokens streamed (hidden thinking came before
        the first token: in TTFT, not between tokens)."""
        n = self.streamed_tokens
        if self.ttft is None or self.e2e is None or n < 2:
            return None
        return (self.e2e - self.ttft) / (n - 1)

    def attains(self, slo_limits: dict[str, float]) -> bool:
        """Whether this request met its language's SLO (a failure never does)."""
        ok = self.outcome == "ok"
        met = slo.attained(
            slo_limits,
            ok=ok,
            ttft=self.ttft,
            e2e=self.e2e,
            tpot=self.tpot() if ok else None,
            max_gap=max(self.gaps, default=0.0),
        )
        return bool(met)

    def samples(self) -> dict[str, list[float]]:
        """Values this request adds to each metric's histogram (latencies only when it succeeded),
        but ITL's: `itl_spread`."""
        out: dict[str, list[float]] = {}
        if self.open_loop:
            out["schedule_lag"] = [max(0.0, self.schedule_lag)]
            if self.prepare_s is not None:
                out["prepare"] = [self.prepare_s]
            if self.send_s is not None:
                out["send"] = [self.send_s]
        if self.outcome != "ok":
            return out
        out["ttft"] = [self.ttft] if self.ttft is not None else []
        out["ttfa"] = [self.ttfa] if self.ttfa is not None else []
        out["e2e"] = [self.e2e] if self.e2e is not None else []
        out["inter_chunk"] = list(self.gaps)
        out["output_tokens"] = [self.output_tokens]
        if (thinking := self.reasoning_tokens) is not None:
            out["reasoning_tokens"] = [thinking]
        if (tpot := self.tpot()) is not None:
            out["tpot"] = [tpot]
        if self.turn is not None and self.ttft is not None:
            out[per_turn("ttft", self.turn)] = [self.ttft]
        if self.step is not None:
            out["step"] = [self.step]
        if self.open_loop and self.ttft is not None and self.e2e is not None:
            out["ttft_sent"] = [self.ttft - self.schedule_lag]
            out["e2e_sent"] = [self.e2e - self.schedule_lag]
        return out

    @property
    def own_tokens(self) -> int:
        """Our tokenizer's count of the whole text (the collector counts many at once: see `encode`
        there); 0 when it was never counted (`uncounted`)."""
        if self.own_total is None and self.chunks and not self.uncounted:
            self.own_total = tokenizer.count(self.text)
        return self.own_total or 0

    def line(self) -> RequestLine:
        """The requests.jsonl line. Events carrying several tokens keep their shares, so a reader's
        ITL is the histograms'."""
        own = self.own_tokens
        chars = sum(map(len, self.chunks))
        per = self.tokens_per_chunk()
        return RequestLine(
            request_id=self.request_id,
            lang=self.lang,
            api=self.api,
            target=self.target,
            phase=self.phase,
            open_loop=self.open_loop,
            intended=self.intended,
            sent=self.sent,
            schedule_lag=self.schedule_lag,
            outcome=self.outcome,
            status=self.status,
            error=self.error,
            retry_after=self.retry_after,
            ttft=self.ttft,
            ttfa=self.ttfa,
            e2e=self.e2e,
            gaps=self.gaps,
            usage_tokens=self.usage_tokens,
            output_tokens=self.usage_tokens if self.usage_tokens is not None else own,
            reasoning_tokens=self.reasoning_tokens,
            own_tokens=own,
            chars=chars,
            chars_per_token=round(chars / own, 3) if own else None,
            tokens_disagree=self.usage_tokens is not None
            and own > 0
            and abs(self.streamed_tokens - own) > max(2, DISAGREEMENT * self.streamed_tokens),
            tokens_from=self.tokens_from,
            at_stop=self.at_stop,
            replay=self.replay,
            reads=self.reads,
            coalesced_reads=self.coalesced_reads,
            late_reads=self.late_reads,
            tokens_per_event=per if any(k != 1 for k in per) and not self.uncounted else None,
            unstreamed_tokens=self.unstreamed,
            canary=self.canary,
            replica=self.replica,
            failed_over=self.failed_over,
            kv=self.kv,
            silent_s=self.silent_s,
            end_s=self.end_s,
            prefix=self.prefix,
            session=self.session,
            turn=self.turn,
            prompt_tokens=self.prompt_tokens,
            cached_tokens=self.cached_tokens,
            tool_calls=len(self.calls),
            hop=self.hop,
            step=self.step,
        )
