"""requests.jsonl: one line per request (possibly sampled), written as it goes, read as a stream."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, ClassVar, TypeVar

import orjson
from pydantic import ConfigDict, TypeAdapter, ValidationError

from llmchaos.errors import UsageError
from llmchaos.headers import KV_WAYS


@dataclass(slots=True)
class ReplayFields:
    """A replayed request: where it came from in the log, what it asked for, and, mirrored, how the
    other side answered (same request id on both sides)."""

    log_line: int
    user_id: str
    session_id: str | None = None
    loop: int = 0  # which pass over the log (--loop)
    requested_tokens: int | None = None  # the output length asked for
    text_sha256: str | None = None  # of the output text, its first 16 hex digits
    peer_output_tokens: int | None = None  # mirrored: the other side's output tokens
    identical: bool | None = None  # mirrored: both outputs the same text


Tokens = TypeVar("Tokens", int, float)
MAX_LINE_BYTES = 64 * 2**20  # a request with a million events writes ~25 MB


def itl(gaps: Sequence[float], event_tokens: Sequence[Tokens]) -> tuple[list[float], list[Tokens]]:
    """The ITL samples of a request: each gap between content events spread over the tokens of the
    event it delivered, and that count (each value stands for that many samples)."""
    per = list(event_tokens[1:])
    return [gap / k for gap, k in zip(gaps, per, strict=True)], per


@dataclass(slots=True, kw_only=True)
class RequestLine:
    """One request as the harness measured it; times are unix seconds, latencies seconds. Built by
    keyword: the fields are many, and only ever added."""

    request_id: str  # sent as x-request-id, to match the target's own logs
    lang: str
    api: str
    target: str
    phase: str
    open_loop: bool
    intended: float  # when it was due (the actual send in closed loop)
    sent: float
    schedule_lag: float
    outcome: str
    status: int | None = None
    error: str | None = None
    retry_after: str | None = None
    ttft: float | None = None  # from the intended start: the first token of any kind (thinking too)
    e2e: float | None = None  # from the intended start
    gaps: list[float] = field(default_factory=list)  # between consecutive content events (thinking too)
    usage_tokens: int | None = None  # the server's figure
    output_tokens: int = 0  # the server's figure when it sent one, else own_tokens
    own_tokens: int = 0  # our tokenizer's count of the text received
    chars: int = 0
    chars_per_token: float | None = None
    tokens_disagree: bool = False  # usage and our count differ by more than 10 % and 2 tokens
    tokens_from: str | None = None  # usage | tokenizer: the count output_tokens and the ITL samples follow
    at_stop: bool = False  # cancelled because the test stopped: apart from the requests issued
    replay: ReplayFields | None = None  # a replayed request (locust -f loadtests/replay/locustfile.py)
    reads: int = 0  # socket reads of the body that brought content events
    coalesced_reads: int = 0  # ... that brought several under one kernel receive stamp
    late_reads: int = 0  # ... of those, the ones taken late (their first bytes can have waited 1 ms or more)
    tokens_per_event: list[int] | None = None  # tokens each content event delivered; absent: one each
    ttfa: float | None = None  # from the intended start: the first answer token (after any thinking)
    reasoning_tokens: int | None = None  # thinking tokens among output_tokens; absent: no thinking seen
    unstreamed_tokens: int = 0  # of output_tokens, thinking no event delivered (hidden): out of ITL and TPOT
    canary: str | None = None  # a canary (--canary-rate): its name in the canary file; its answer was checked
    replica: str | None = None  # the replica that answered (the response header --replica-header names)
    failed_over: int = 0  # replicas the router tried and failed before the one that answered
    kv: str | None = None  # disaggregated: how decode got the KV cache (pulled, recomputed, failed, timed_out)
    silent_s: float = 0.0  # the longest wait with no byte from the server, from the send to the end
    end_s: float | None = None  # from the intended start to its end, whatever its outcome (None: cancelled)
    prefix: int | None = None  # --prefix-tokens: which of its language's shared prefixes it opened with
    session: str | None = None  # --sessions: the conversation it is a turn of
    turn: int | None = None  # ... and which turn (1: the first)
    prompt_tokens: int | None = None  # the server's count of the prompt (its usage; None: it sent none)
    cached_tokens: int | None = None  # ... of which found in its prefix cache (None: it did not say)
    tool_calls: int = 0  # the tool calls the answer made
    hop: int | None = None  # --sessions: 0 for a turn's user message, k for the k-th sending of tools' results
    step: float | None = None  # ... on the answer in text: its turn's time from the user message, hops included
    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(allow_inf_nan=False)

    def problem(self) -> tuple[str, str] | None:
        """(field, what is wrong) when the line cannot be what the harness wrote, else None."""
        if any(g < 0 for g in self.gaps):
            return "gaps", "a gap below zero"
        for name, t in (("ttft", self.ttft), ("ttfa", self.ttfa), ("e2e", self.e2e)):
            if t is not None and t < 0:
                return name, "below zero (times run from when the request was due)"
        for name, t in (
            ("silent_s", self.silent_s),
            ("end_s", self.end_s),
            ("failed_over", self.failed_over),
            ("prefix", self.prefix),
            ("tool_calls", self.tool_calls),
            ("step", self.step),
        ):
            if t is not None and t < 0:
                return name, "below zero"
        if self.cached_tokens is not None and not 0 <= self.cached_tokens <= (self.prompt_tokens or 0):
            return "cached_tokens", "must be within 0 and prompt_tokens"
        if self.turn is not None and (self.turn < 1 or self.session is None):
            return "turn", "must be 1 or more, and only with a session"
        if self.hop is not None and (self.hop < 0 or self.turn is None):
            return "hop", "must be 0 or more, and only with a turn"
        if self.kv is not None and self.kv not in KV_WAYS:
            return "kv", f"must be one of {', '.join(KV_WAYS)}"
        if self.e2e is not None and max(self.ttft or 0.0, self.ttfa or 0.0) > self.e2e:
            return "e2e", "before the first token"
        if self.output_tokens < 0 or self.own_tokens < 0:
            return "output_tokens", "below zero"
        if self.reasoning_tokens is not None and not 0 <= self.reasoning_tokens <= self.output_tokens:
            return "reasoning_tokens", "must be within 0 and output_tokens"
        if not 0 <= self.unstreamed_tokens <= self.output_tokens:
            return "unstreamed_tokens", "must be within 0 and output_tokens"
        per = self.tokens_per_event
        if per is not None and (len(per) != len(self.gaps) + 1 or min(per) < 1):
            return "tokens_per_event", f"must be one count >= 1 per event ({len(self.gaps) + 1}), got {len(per)}"
        return None

    def encode(self) -> bytes:
        """The line, without its newline (orjson writes dataclasses natively and fast)."""
        return orjson.dumps(self)

    def event_tokens(self) -> list[float]:
        """Tokens each content event delivered, as the run's ITL histograms counted them:
        `tokens_per_event`, else one each (the harness leaves the field out when the output has no
        more tokens than events); a line written before the field existed, with more tokens than
        events, gets them spread evenly (its ITL then only near the histograms')."""
        if self.tokens_per_event is not None:
            return list(map(float, self.tokens_per_event))
        n = len(self.gaps) + 1
        return [max(1.0, self.output_tokens / n)] * n

    def itl(self) -> tuple[list[float], list[float]]:
        """This request's ITL samples and how many each stands for, as its run's histograms hold them."""
        return itl(self.gaps, self.event_tokens())


_VALIDATE = TypeAdapter(RequestLine).validate_json


class RequestsWriter:
    """Appends encoded lines to a requests.jsonl and counts them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[bytes] = open(path, "wb")  # noqa: SIM115 - held open for the whole run, closed by close()
        self.written = 0

    def write(self, lines: Iterable[bytes]) -> None:
        for line in lines:
            self._file.write(line + b"\n")
            self.written += 1

    def close(self) -> None:
        self._file.close()


def read(path: Path) -> Iterator[RequestLine]:
    """Stream a requests.jsonl line by line (never loaded whole; a regular file only, each line at
    most MAX_LINE_BYTES); a bad line is a UsageError naming the file, the line and the field."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO is refused below, not waited on
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise UsageError("not a regular file", file=str(path))
            n = 0
            while raw := f.readline(MAX_LINE_BYTES + 1):
                n += 1
                if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                    raise UsageError(f"a line longer than {MAX_LINE_BYTES} bytes", file=str(path), line=n)
                if raw.strip():
                    yield _line(raw, path, n)
    except OSError as e:
        raise UsageError(e.strerror or str(e), file=str(path)) from None


def _line(raw: bytes, path: Path, n: int) -> RequestLine:
    try:
        line = _VALIDATE(raw)
    except ValidationError as e:
        err = e.errors()[0]
        raise UsageError(err["msg"], file=str(path), line=n, field=".".join(map(str, err["loc"])) or None) from None
    if (wrong := line.problem()) is not None:
        raise UsageError(wrong[1], file=str(path), line=n, field=wrong[0])
    return line
