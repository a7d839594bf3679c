"""Scripted OpenAI-style streaming server: ground truth for llmchaos's own tests.

    python -m tests.servers.scripted --port P [--seed S]

`POST /v1/chat/completions` streams like vLLM. Each request draws a TTFT and N-1 gaps
(`plan_rng`; N = max_tokens, default 16; language from `x-llmchaos-lang`), writes content event
i at processing start + TTFT + gaps[:i] and records each content write's offset from receipt.
`GET /metrics` shows a GPU's energy counter (dcgm-exporter's name, mJ) that rises by exactly
`--joules-per-token` for each word a content event carries, and by nothing else: the truth of J/token.
`GET /truth` lists finished requests (match yours by sending `x-request-id`; each with the messages it
sent and the content streamed back), `DELETE /truth`
clears the list. `x_script` in the body overrides timing (`ttft_ms`, `itl_ms`: [lo, hi]), adds
response `headers` ({name: value}, a cluster's router's) and picks a misbehaviour (`mode`, see
MODES; K is `after`, default 3). `POST /control
{"stall_for_s": X}` holds every request received in the next X s (any path but /control and
/truth) until the window ends; its truth `ttft_s` counts from receipt, so includes `stalled_s`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import itertools
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from tests.procs import ROOT, free_port, stop

TTFT_MS = {"en": (40.0, 60.0), "de": (60.0, 90.0), "zh": (80.0, 120.0), "ja": (100.0, 150.0)}
OTHER_TTFT_MS = (50.0, 80.0)
ITL_MS = (8.0, 14.0)
WORDS = {
    "en": "the quick brown fox jumps over a lazy dog",
    "de": "der schnelle braune Fuchs springt über den faulen Hund",
    "fr": "le renard brun rapide saute par-dessus le chien paresseux",
    "zh": "敏捷的 棕色 狐狸 跳过了 懒惰的 狗",
    "ja": "素早い 茶色の 狐が 怠惰な 犬を 飛び越えた",
}
MODES = {
    "ok": "a normal stream",
    "cut": 'K content events, half an event (`data: {"id":`), then the transport is aborted',
    "garbage": "200 text/event-stream of random non-SSE bytes (invalid UTF-8, no newline), ended",
    "wrong_content_type": "200 text/html with an HTML page",
    "status": "`status` CODE with an OpenAI error JSON (after `seconds`, default 0, of silence); Retry-After: 1 for "
    "429 and 503",
    "never_ending": "content events every ITL until the client leaves; no finish_reason, no [DONE]",
    "stall": "K content events, `seconds` (30) of silence, then the rest as scheduled",
    "bad_json": 'an extra event `{"choices": [}` right before content event K+1',
    "error_event": "K content events, then an error event and [DONE]",
    "bad_utf8": "an extra chunk holding invalid UTF-8 right before content event K+1",
    "no_done": "a normal stream that ends (cleanly) without [DONE]",
    "late_headers": "the response headers held `seconds` (30), then a normal stream",
    "hold_open": "a normal stream whose body never ends after [DONE] (until the client leaves)",
    "done_then_comments": "a normal stream, then a keep-alive comment every ITL after [DONE] (until the client leaves)",
    "trickle": "K content events, then one event's bytes one at a time every ITL, never a newline",
    "ping": "`event: ping` and `data:` events (no data: the SSE spec ignores them) before every content event",
    "cr": "a normal stream whose lines end in a bare CR",
    "bom": "a normal stream after a UTF-8 byte order mark",
    "huge": "a normal stream whose content event K+1 carries `size` (20,000,000) bytes of text; usage counts its words",
    "eos_first": "the role chunk, then a finish chunk with no text (finish_reason stop, usage 1 token) and [DONE]",
    "multi": "a normal stream whose content event i carries 1 + i % 4 words; usage counts them all",
    "think": "a reasoning model's: its first K events thinking (delta `field`, default reasoning_content), then "
    "the answer; usage says how many tokens were thinking (completion_tokens_details.reasoning_tokens)",
}
MODE_ARG = {"status": "status", "huge": "size", "think": "field"}  # what `--modes lang=mode:ARG` sets; else `seconds`
UNSTALLED = ("/control", "/truth", "/metrics")
DONE = b"data: [DONE]\n\n"
BOM = "\ufeff".encode()
PING = b"event: ping\n\ndata:\n\n"
HELD_OPEN = ("hold_open", "done_then_comments")


def plan_rng(seed: int | None, lang: str, n: int) -> random.Random:
    """Generator of a language's n-th chat request (0-based): TTFT first, then each gap, each
    `uniform(lo_ms, hi_ms) / 1000` seconds. Unseeded when the server has no --seed."""
    return random.Random(f"{seed}:{lang}:{n}") if seed is not None else random.Random()


@dataclass
class Record:
    """What happened to one request; offsets are monotonic seconds since receipt."""

    request_id: str
    lang: str
    n: int
    mode: str
    stream: bool
    status: int
    start_unix: float
    stalled_s: float
    intended_ttft_s: float
    intended_gaps_s: list[float] = field(default_factory=list)
    writes: list[float] = field(default_factory=list)
    tokens: int | None = None  # set when not streamed; a stream's count is len(writes)
    e2e_s: float | None = None  # offset of the last write
    disconnected: bool = False
    messages: list[dict] = field(default_factory=list)  # the request's, as sent (a conversation's history)
    text: str = ""  # the answer's content, as written

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in vars(self).items() if k not in ("writes", "tokens")}
        w = self.writes
        return {
            **out,
            "ttft_s": w[0] if w else None,
            "gaps_s": [b - a for a, b in itertools.pairwise(w)],
            "output_tokens": len(w) if self.tokens is None else self.tokens,
        }


class State:
    seed: ClassVar[int | None] = None
    counters: ClassVar[dict[str, int]] = {}
    records: ClassVar[list[Record]] = []
    stall: ClassVar[tuple[float, float, float] | None] = None  # start unix, end unix, end monotonic
    itl_ms: ClassVar[tuple[float, float]] = ITL_MS
    modes: ClassVar[dict[str, dict]] = {}  # lang -> x_script defaults (--modes)
    joules_per_token: ClassVar[float] = 0.0
    continuous_usage: ClassVar[bool] = False
    energy_mj: ClassVar[float] = 0.0


_transports: dict[tuple[str, int], asyncio.Transport] = {}


class _Protocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, indexed by peer so that `cut` can abort its own connection."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # narrowed as uvicorn narrows it
        super().connection_made(transport)
        self._peer = tuple(transport.get_extra_info("peername")[:2])
        _transports[self._peer] = transport

    def connection_lost(self, exc: Exception | None) -> None:
        _transports.pop(self._peer, None)
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        """Receipt is when the request's first bytes are parsed, before any task is scheduled."""
        super().on_message_begin()
        self.scope["llmchaos.t0"], self.scope["llmchaos.unix"] = time.monotonic(), time.time()


def _ms(value: Any, default: tuple[float, float]) -> tuple[float, float]:
    lo, hi = default if value is None else (value, value) if isinstance(value, int | float) else value
    return float(lo), float(hi)


async def _sleep_until(deadline: float) -> None:
    """Never wakes early: uvloop's timers run off a cached millisecond clock."""
    while (delay := deadline - time.monotonic()) > 0:
        await asyncio.sleep(delay)


def _word(lang: str, i: int) -> str:
    words = WORDS.get(lang, WORDS["en"]).split()
    return " " + words[i % len(words)]


def _words_in(mode: str, i: int) -> int:
    """The words content event i carries."""
    return 1 + i % 4 if mode == "multi" else 1


def _usage(body: dict, n: int) -> dict[str, int]:
    p = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
    return {"prompt_tokens": p, "completion_tokens": n, "total_tokens": p + n}


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


class Stream:
    """One streamed chat completion as an ASGI app: plays the script, then files the record."""

    def __init__(self, rec: Record, rng: random.Random, scope: Scope, body: dict, script: dict, n: int) -> None:
        self.rec, self.rng, self.body, self.script, self.n = rec, rng, body, script, n
        self.t0, self.tp, self.client = scope["llmchaos.t0"], scope["llmchaos.tp"], tuple(scope["client"])
        self.head = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model", "scripted"),
        }
        self.aborted = self.started = False
        self.send: Send

    def chunk(self, delta: dict, finish: str | None = None, **extra: Any) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return b"data: " + _dumps({**self.head, "choices": [choice], **extra}) + b"\n\n"

    async def write(self, data: bytes, last: bool = False) -> None:
        self.rec.e2e_s = time.monotonic() - self.t0
        await self.raw(data, last)

    async def raw(self, data: bytes, last: bool = False) -> None:
        """Body bytes as the mode spells them (`cr`: bare CR line ends; `bom`: the first write after a BOM)."""
        if self.rec.mode == "cr":
            data = data.replace(b"\n", b"\r")
        if self.rec.mode == "bom" and not self.started:
            data = BOM + data
        self.started = True
        await self.send({"type": "http.response.body", "body": data, "more_body": not last})

    async def token(self, i: int, final: bool, huge: bool = False) -> None:
        t, ns = time.monotonic(), time.time_ns()
        if huge:
            text = " lorem" * (int(self.script.get("size", 20_000_000)) // 6)
        else:
            text = "".join(_word(self.rec.lang, i + j) for j in range(_words_in(self.rec.mode, i)))
        thinking = self.rec.mode == "think" and i < int(self.script.get("after", 3))
        kind = str(self.script.get("field", "reasoning_content")) if thinking else "content"
        usage = {"usage": _usage(self.body, sum(_words_in(self.rec.mode, j) for j in range(i + 1)))}
        data = self.chunk(
            {kind: text}, "length" if final else None, x_sent_ns=ns, **(usage if State.continuous_usage else {})
        )
        self.rec.writes.append(t - self.t0)
        if not thinking:
            self.rec.text += text
        State.energy_mj += 1000 * State.joules_per_token * _words_in(self.rec.mode, i)
        await self.write(PING + data if self.rec.mode == "ping" else data)

    def usage(self, n: int) -> bytes:
        """The usage chunk when the request asked for it (`stream_options.include_usage`): the words
        of `n` content events."""
        if not (self.body.get("stream_options") or {}).get("include_usage"):
            return b""
        words = sum(_words_in(self.rec.mode, i) for i in range(n))
        if self.rec.mode == "huge" and n:  # its event K (or the last) carried them all
            words += int(self.script.get("size", 20_000_000)) // 6 - 1  # the huge event's words
        usage = _usage(self.body, words)
        if self.rec.mode == "think":
            usage["completion_tokens_details"] = {"reasoning_tokens": min(n, int(self.script.get("after", 3)))}
        return b"data: " + _dumps({**self.head, "choices": [], "usage": usage}) + b"\n\n"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def gone() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass

        self.send = send
        play, watch = asyncio.create_task(self.play()), asyncio.create_task(gone())
        try:
            await asyncio.wait({play, watch}, return_when=asyncio.FIRST_COMPLETED)
            if not play.done() and not self.aborted:
                self.rec.disconnected = True
                play.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await play
        finally:
            watch.cancel()
            play.cancel()
            State.records.append(self.rec)

    async def play(self) -> None:
        mode, s, n = self.rec.mode, self.script, self.n
        if mode == "late_headers":
            await _sleep_until(time.monotonic() + float(s.get("seconds", 30)))
        await self.send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream; charset=utf-8"),
                    (b"cache-control", b"no-cache"),
                    (b"x-request-id", self.rec.request_id.encode()),
                    *_headers(s),
                ],
            }
        )
        deadline = self.tp + self.rec.intended_ttft_s
        if mode == "garbage":
            await _sleep_until(deadline)
            junk = bytes(b for b in self.rng.randbytes(512) if b not in b"\r\n")
            return await self.write(b"\xff\xfe\xc3(" + junk, last=True)
        itl, k = _ms(s.get("itl_ms"), State.itl_ms), int(s.get("after", 3))
        if mode == "eos_first":
            await _sleep_until(deadline)
            await self.write(self.chunk({"role": "assistant", "content": ""}))
            return await self.write(self.chunk({}, "stop") + self.usage(1) + DONE, last=True)
        k = min(k, n - 1) if mode in ("stall", "bad_json", "bad_utf8", "huge") else k
        count = {"cut": k + 1, "error_event": k + 1, "never_ending": None}.get(mode, n)
        i, gap = 0, 0.0
        while count is None or i < count:
            if i:
                gap = self.rng.uniform(*itl) / 1000
                deadline += gap
            if i == k and mode == "stall":
                deadline += float(s.get("seconds", 30))
            await _sleep_until(deadline)
            if i == 0:
                await self.write(self.chunk({"role": "assistant", "content": ""}))
            if i == k and mode == "cut":
                return await self.abort(b'data: {"id":')
            if i == k and mode == "error_event":
                err = {"error": {"message": "boom", "type": "server_error", "code": 500}}
                return await self.write(b"data: " + _dumps(err) + b"\n\n" + DONE, last=True)
            if i == k and mode == "bad_json":
                await self.write(b'data: {"choices": [}\n\n')
            if i == k and mode == "bad_utf8":
                await self.write(self.chunk({}).replace(b'"choices"', b'"x_bad":"\xff\xfe\xe4\xb8","choices"'))
            if i == k and mode == "trickle":
                return await self.trickle(b'data: {"choices":[{"index":0,"delta":{"content":"', itl)
            if i:
                self.rec.intended_gaps_s.append(gap)
            await self.token(i, final=mode != "never_ending" and i == n - 1, huge=mode == "huge" and i == k)
            i += 1
        await self.write(self.usage(i) + (b"" if mode == "no_done" else DONE), last=mode not in HELD_OPEN)
        if mode in HELD_OPEN:
            await self.trickle(b"", itl, b": keep-alive\n\n" if mode == "done_then_comments" else b"")

    async def trickle(self, head: bytes, itl: tuple[float, float], each: bytes = b"a") -> None:
        """Write `head`, then `each` every ITL until the client leaves (nothing at all when empty)."""
        if head:
            await self.write(head)
        while True:
            await asyncio.sleep(self.rng.uniform(*itl) / 1000)
            if each:
                await self.raw(each)

    async def abort(self, half: bytes) -> None:
        """Write half an event, let it reach the socket, then drop the connection (no chunk terminator)."""
        await self.write(half)
        transport = _transports[self.client]
        while transport.get_write_buffer_size():
            await asyncio.sleep(0.001)
        self.aborted = True
        transport.abort()
        await asyncio.sleep(0.01)  # connection_lost marks the cycle disconnected, so uvicorn stays quiet


def _headers(script: dict) -> list[tuple[bytes, bytes]]:
    """The response headers `x_script.headers` adds."""
    return [(str(k).encode(), str(v).encode()) for k, v in (script.get("headers") or {}).items()]


def _error(code: int, message: str, extra: dict | None = None) -> JSONResponse:
    kind = {429: "rate_limit_error", 503: "service_unavailable"}.get(
        code, "server_error" if code >= 500 else "invalid_request_error"
    )
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": None, "code": code}},
        code,
        headers=({"Retry-After": "1"} if code in (429, 503) else {}) | (extra or {}),
    )


async def chat(request: Request) -> ASGIApp:
    body, sc = await request.json(), request.scope
    lang = request.headers.get("x-llmchaos-lang", "en")
    script = {**State.modes.get(lang, {}), **(body.get("x_script") or {})}
    mode = script.get("mode", "ok")
    if mode not in MODES:
        return _error(400, f"unknown x_script.mode {mode!r}; one of {sorted(MODES)}")
    n = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
    k = State.counters[lang] = State.counters.get(lang, -1) + 1
    rng = plan_rng(State.seed, lang, k)
    rec = Record(
        request.headers.get("x-request-id") or uuid.uuid4().hex,
        lang,
        k,
        mode,
        bool(body.get("stream")),
        int(script.get("status", 500)) if mode == "status" else 200,
        sc["llmchaos.unix"],
        sc["llmchaos.tp"] - sc["llmchaos.t0"],
        rng.uniform(*_ms(script.get("ttft_ms"), TTFT_MS.get(lang, OTHER_TTFT_MS))) / 1000,
        messages=body.get("messages") or [],
    )
    if rec.stream and mode not in ("status", "wrong_content_type"):
        return Stream(rec, rng, sc, body, script, n)
    rec.tokens = 0
    if mode == "status":
        await _sleep_until(time.monotonic() + float(script.get("seconds", 0)))
        response: ASGIApp = _error(rec.status, f"scripted status {rec.status}", script.get("headers"))
    elif mode == "wrong_content_type":
        response = HTMLResponse("<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1></body></html>")
    else:  # not streamed: the whole answer once its last token is due
        itl = _ms(script.get("itl_ms"), State.itl_ms)
        rec.intended_gaps_s = [rng.uniform(*itl) / 1000 for _ in range(n - 1)]
        await _sleep_until(sc["llmchaos.tp"] + rec.intended_ttft_s + sum(rec.intended_gaps_s))
        rec.tokens = n
        choice = {
            "index": 0,
            "logprobs": None,
            "finish_reason": "length",
            "message": {"role": "assistant", "content": "".join(_word(lang, i) for i in range(n))},
        }
        response = JSONResponse(
            {
                "id": f"chatcmpl-{uuid.uuid4().hex}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "scripted"),
                "choices": [choice],
                "usage": _usage(body, n),
            }
        )
    rec.e2e_s = time.monotonic() - sc["llmchaos.t0"]
    State.records.append(rec)
    return response


async def truth(request: Request) -> JSONResponse:
    if request.method == "DELETE":
        cleared, State.records[:] = len(State.records), []
        return JSONResponse({"cleared": cleared})
    return JSONResponse({"requests": [r.to_json() for r in State.records]})


async def control(request: Request) -> JSONResponse:
    if request.method == "POST":
        x, now = float((await request.json())["stall_for_s"]), time.time()
        State.stall = (now, now + x, time.monotonic() + x)
    start, end, end_mono = State.stall or (None, None, 0.0)
    return JSONResponse({"stall_start_unix": start, "stall_end_unix": end, "active": time.monotonic() < end_mono})


async def metrics(request: Request) -> PlainTextResponse:
    name = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
    return PlainTextResponse(f'# TYPE {name} counter\n{name}{{gpu="0",UUID="GPU-scripted"}} {State.energy_mj:.3f}\n')


async def healthz(request: Request) -> JSONResponse:
    return JSONResponse({"ok": True})


routes = Starlette(
    routes=[
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/truth", truth, methods=["GET", "DELETE"]),
        Route("/control", control, methods=["GET", "POST"]),
        Route("/healthz", healthz),
        Route("/metrics", metrics),
    ]
)


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """Stamps receipt (monotonic and unix), holds requests received in a stall window, then routes."""
    if scope["type"] == "http":
        scope.setdefault("llmchaos.t0", time.monotonic())
        scope.setdefault("llmchaos.unix", time.time())
        if State.stall and scope["path"] not in UNSTALLED:
            await _sleep_until(State.stall[2])
        scope["llmchaos.tp"] = time.monotonic()
    await routes(scope, receive, send)


@contextlib.contextmanager
def running(seed: int | None = None, *args: str, cpu: int | None = None, timeout: float = 120.0) -> Iterator[str]:
    """This server on a free loopback port (pinned to `cpu` if given): yields its URL once /healthz
    is 200, stops it by PID."""
    port = free_port()
    cmd = [sys.executable, "-m", "tests.servers.scripted", "--port", str(port)]
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            cmd + ([] if seed is None else ["--seed", str(seed)]) + list(args),
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=None if cpu is None else lambda: os.sched_setaffinity(0, {cpu}),
        )
        url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + timeout
        try:
            while True:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"scripted server not ready:\n{log.read().decode(errors='replace')}")
                with contextlib.suppress(httpx.TransportError):
                    if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                        break
                time.sleep(0.05)
            yield url
        finally:
            stop(proc)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m tests.servers.scripted")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--itl-ms", type=float, nargs=2, default=ITL_MS, metavar=("LO", "HI"))
    p.add_argument("--joules-per-token", type=float, default=0.0, help="what each word streamed adds to /metrics")
    p.add_argument("--continuous-usage", action="store_true", help="the usage so far in every content event")
    p.add_argument("--modes", default="", help="per-language misbehaviour: lang=mode[:status|size|field|seconds],...")
    args = p.parse_args(argv)
    State.seed, State.itl_ms, State.joules_per_token = args.seed, tuple(args.itl_ms), args.joules_per_token
    State.continuous_usage = args.continuous_usage
    gc.freeze()  # no 50-100 ms full collections of the imported heap while holding the truth
    gc.set_threshold(10_000, 50, 1_000)
    for item in filter(None, args.modes.split(",")):
        lang, _, spec = item.partition("=")
        mode, _, arg = spec.partition(":")
        key = MODE_ARG.get(mode, "seconds")
        State.modes[lang] = {"mode": mode, **({key: arg if key == "field" else float(arg)} if arg else {})}
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        loop="uvloop",
        http=_Protocol,
        lifespan="off",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=1,
    )


if __name__ == "__main__":
    main()
