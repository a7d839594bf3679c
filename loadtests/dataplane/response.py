"""What a response means, whichever plane framed it: its outcome, its events timed, its record filled.

The Python plane (`request.Exchange`) and the native one (`native.NativeExchange`) each frame the
bytes and stamp the reads; both hand the status, headers, events and bodies to one `Response`, so a
stream is judged the same on either.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmchaos.headers import FAILOVER_HEADER, KV_HEADER, KV_WAYS, REPLICA_HEADER
from loadtests.adapters import Adapter, add_pieces
from loadtests.record import RequestRecord

ERROR_TEXT = 500  # bytes of an error body kept as the record's error
MAX_BODY = 64 << 20  # bytes: a whole (non-stream) answer past this is no API's, and is read no further
MAX_REPLICA = 200  # characters of a replica's name kept (a header's value: a router's host:port, a pod's name)
UNANSWERED = ("ttft_timeout", "timeout", "rate_limited", "connect_error", "truncated")  # and http_<code>
LATE_S = 0.001  # a read's first bytes can have waited this long or more: the generator was late to it (an
# idle one reads within 0.1 ms here); several events in a read taken on time came so from the network

Outcome = tuple[str, str | None]


@dataclass(frozen=True)
class Limits:
    """When a request is given up, in seconds from its start (latencies count from the same start):
    `ttft` for the first content event (the response headers included), `request` for the
    terminator; `stall` between two events once content flows, and the silence that strands a
    request before any (`Response.settle`); `connect` to open a connection. `replica_header`: the
    response header (lower case) that names the replica that answered."""

    connect: float = 5.0
    ttft: float = 300.0
    stall: float = 30.0
    request: float = 600.0
    replica_header: str = REPLICA_HEADER

    def silence(self, why: str) -> str:
        """The error of a request given up for `why`."""
        if why == "ttft_timeout":
            return f"no content within {self.ttft:g}s"
        if why == "stalled":
            return f"no event for {self.stall:g}s"
        return f"not done within {self.request:g}s"


def count_read(rec: RequestRecord, content: int, last_exact: bool, late: float) -> None:
    """Count a read that brought `content` content events (the record's last), its first bytes come
    at most `late` seconds before its stamp (the plane's bound: `_native.c`, timed_wait). Its events
    carry the kernel stamp of its last bytes, so each came up to `late` before it (`late_spans`: the
    validity's error bar), but the last when it was the read's last bytes (`last_exact`: no event,
    comment, field or part of a line after it). Several content events to a read are counted: late
    (LATE_S or more), the generator's doing; on time, the network's (a burst, a proxy's hold: the
    stream as it came)."""
    if content:
        rec.reads += 1
        if content > 1:
            rec.coalesced_reads += 1
            if late >= LATE_S:
                rec.late_reads += 1
        uncertain = content - last_exact
        if uncertain and late > 0:
            rec.late_spans.append((len(rec.chunks) - content, uncertain, late))


def _failovers(value: str | None) -> int:
    """A failover header's count: 0 when absent or not a whole number >= 0."""
    return int(value) if value is not None and value.strip().isdigit() else 0


class Response:
    """A request's response as it comes in: `end` (the plane's) is called once with its outcome, and
    fills the record through `settle`. The plane reports each read's arrival (`heard`, or its own
    count of the silences: the native one), so that the longest silence is known."""

    def __init__(self, adapter: Adapter, stream: bool, rec: RequestRecord, start: float, limits: Limits) -> None:
        self.adapter, self.stream, self.rec, self.start, self.limits = adapter, stream, rec, start, limits
        self.headers: dict[str, str] = {}
        self.mode = ""  # once the headers are in: "stream", "not_sse", "body" (a whole non-stream body) or "error"
        self.done = False  # the record is whole and handed back
        self.last_event = self.last_content = start
        self.seen = 0  # events decoded
        self.head = b""  # a stream's first bytes (to show what a non-stream was), an error body's text
        self._whole: list[bytes] = []  # a non-stream body's, until it ends
        self._whole_size = 0
        self.limit, self.why = self._limit() if stream else (start + limits.request, "timeout")
        self.heard_at: float | None = None  # the last byte's arrival (from the send: the request's last byte written)
        self.end_at: float | None = None  # when an end no byte brought came (a limit, a close, a connect timeout)

    def end(self, outcome: str, error: str | None) -> None:
        raise NotImplementedError

    # -- silences and the record's ending ------------------------------------------------------
    def heard(self, at: float) -> None:
        """Bytes reached the host at `at` (perf_counter): the silence before them counts."""
        self.quiet_until(at)
        self.heard_at = at

    def quiet_until(self, at: float) -> None:
        """No byte came from the last one (or the send) until `at`."""
        if self.heard_at is not None:
            self.rec.silent_s = max(self.rec.silent_s, at - self.heard_at)

    def settle(self, outcome: str, error: str | None) -> None:
        """The record's outcome, error and end (both planes' `end` start here). A request that got no
        byte for the stall limit before any content, and then no answer (an error status, a timeout, a
        close), is `stranded`; its error keeps what it ended with."""
        rec = self.rec
        if not rec.chunks and rec.silent_s >= self.limits.stall and (outcome in UNANSWERED or outcome[:5] == "http_"):
            outcome, error = "stranded", f"{outcome} after {rec.silent_s:.3g}s without a byte: {error}"
        rec.outcome, rec.error = outcome, error
        at = self.end_at if self.end_at is not None else self.heard_at
        if outcome == "ok" and rec.e2e is not None:
            rec.end_s = rec.e2e
        elif outcome != "cancelled" and at is not None:
            rec.end_s = max(0.0, at - self.start)

    # -- the head ------------------------------------------------------------------------------
    def header(self, name: str, value: str) -> None:
        key = name.lower()
        self.headers[key] = f"{self.headers[key]}, {value}" if key in self.headers else value

    def headers_complete(self, status: int) -> None:
        rec, headers = self.rec, self.headers
        rec.status = status
        rec.replica = headers.get(self.limits.replica_header, "").strip()[:MAX_REPLICA] or None
        rec.failed_over = _failovers(headers.get(FAILOVER_HEADER))
        kv = headers.get(KV_HEADER, "").strip()
        rec.kv = kv if kv in KV_WAYS else None
        if status != 200:
            self.mode = "error"
        elif not self.stream:
            self.mode = "body"
        else:
            sse = self.headers.get("content-type", "").startswith("text/event-stream")
            self.mode = "stream" if sse else "not_sse"

    # -- the body ------------------------------------------------------------------------------
    def _limit(self) -> tuple[float, str]:
        """The time this stream must show its next sign of life by, and the outcome if it does not:
        the first content by the TTFT limit (a wait for it is TTFT, never a stall), then each event
        within the stall limit of the one before, and the terminator by the request limit."""
        lim, start = self.limits, self.start
        limit, why = (self.last_event + lim.stall, "stalled") if self.rec.chunks else (start + lim.ttft, "ttft_timeout")
        return (limit, why) if limit < start + lim.request else (start + lim.request, "timeout")

    def event(self, data: str, valid_utf8: bool, now: float) -> Outcome | None:
        """One SSE event's data, timed `now`; the outcome when it ends the request."""
        rec = self.rec
        chunks = rec.chunks
        self.seen += 1
        self.last_event = now
        if not data:  # `data:` alone carries nothing to read
            return None
        if not valid_utf8:
            return "malformed", "invalid UTF-8 in an event"
        try:
            parsed = self.adapter.event(data)
        except (ValueError, KeyError, IndexError, TypeError) as e:
            return "malformed", f"event {data[:80]!r}: {e}"
        if parsed.error is not None:
            return f"http_{parsed.error_code or 500}", parsed.error
        if parsed.text or parsed.reasoning:  # tokens of either kind: thinking counts in TTFT and ITL
            if chunks:
                rec.gaps.append(now - self.last_content)
            else:
                rec.ttft = now - self.start
            if parsed.text and rec.ttfa is None:
                rec.ttfa = now - self.start
            if parsed.reasoning:
                rec.thinking[len(chunks)] = len(parsed.reasoning)
            chunks.append(parsed.reasoning + parsed.text)
            self.last_content = now
        if parsed.calls:
            add_pieces(rec.calls, parsed.calls)
        if parsed.usage_tokens is not None:
            rec.usage_tokens = parsed.usage_tokens
            rec.usage_reasoning = parsed.usage_reasoning
            rec.prompt_tokens, rec.cached_tokens = parsed.usage_prompt, parsed.usage_cached
        if parsed.done:  # the stream ended: ok, with or without text (an EOS first token)
            rec.e2e = now - self.start
            return "ok", None
        return None

    def cut(self, comments: int, pending: bool) -> None:
        """The body ended (HTTP framed it) before the terminator: was it a stream cut short, or never
        a stream at all?"""
        if not self.seen and not comments and pending:
            self.end("malformed", f"not an event stream: {self.head[:80]!r}")
        else:
            self.end("truncated", "stream ended without a terminator")

    def body_part(self, body: bytes) -> None:
        """Bytes of a whole (non-stream) body, held until it ends: past MAX_BODY it is malformed and
        let go, so an endless body cannot grow the generator until the request's timeout."""
        self._whole.append(body)
        self._whole_size += len(body)
        if self._whole_size > MAX_BODY:
            self.too_large()

    def too_large(self) -> None:
        self._whole.clear()
        self.end("malformed", f"body over {MAX_BODY >> 20} MiB")

    def whole_body(self, now: float) -> None:
        """The whole (non-stream) body is in: the answer, or what it says went wrong."""
        rec, raw = self.rec, b"".join(self._whole)
        self._whole.clear()
        try:
            ev = self.adapter.body(raw)
        except (ValueError, KeyError, IndexError, TypeError, UnicodeDecodeError) as e:
            self.end("malformed", f"body: {e}")
            return
        if ev.error is not None:
            self.end(f"http_{ev.error_code or 500}", ev.error)
            return
        rec.chunks, rec.usage_tokens, rec.usage_reasoning = (
            [ev.reasoning + ev.text],
            ev.usage_tokens,
            ev.usage_reasoning,
        )
        rec.prompt_tokens, rec.cached_tokens = ev.usage_prompt, ev.usage_cached
        add_pieces(rec.calls, ev.calls)
        rec.ttft = rec.e2e = now - self.start
        rec.ttfa = rec.ttft if ev.text else None
        rec.thinking = {0: len(ev.reasoning)} if ev.reasoning else {}
        self.end("ok", None)

    def error_status(self) -> None:
        status = self.rec.status
        self.rec.retry_after = self.headers.get("retry-after")
        outcome = "rate_limited" if status == 429 else f"http_{status}"
        self.end(outcome, self.head[:ERROR_TEXT].decode("utf-8", "replace"))

    def lost(self, error: OSError | None, at: float) -> None:
        """The connection closed (`error` None: by the peer) or failed at `at` before the response was
        whole: no byte came until then."""
        self.quiet_until(at)
        self.end_at = at
        if self.rec.status is None:
            why = f"{type(error).__name__}: {error}" if error else "connection closed before the response"
            self.end("connect_error", why)
        elif self.mode == "error":
            self.error_status()
        else:
            self.end("truncated", f"{type(error).__name__}: {error}" if error else "connection closed in the body")

    def silent(self) -> Outcome:
        """The outcome of a request that showed no sign of life by its limit (no byte since the last
        until then counts as silence)."""
        self.quiet_until(self.limit)
        self.end_at = self.limit
        return self.why, self.limits.silence(self.why)

    def give_up(self) -> None:
        self.end(*self.silent())

    def not_a_stream(self) -> None:
        """A stream was asked for; the response's content type says it is none."""
        self.end("malformed", f"content-type {self.headers.get('content-type', '')!r}")

    def http_fault(self, message: str) -> None:
        """The bytes are no HTTP response (`message` says why), before its status or within its body."""
        self.end("malformed" if self.rec.status is None else "truncated", f"HTTP: {message}")

    def upgrade(self) -> None:
        self.end("malformed", "HTTP: an upgrade where a response was due")

    def connect_timeout(self, at: float) -> None:
        self.end_at = at
        self.end("connect_error", "TimeoutError: timed out")
