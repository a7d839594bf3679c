"""The async engine: one loop that schedules, executes and turns sampled tokens into text deltas."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import time
from collections import deque
from collections.abc import AsyncIterator

from llmchaos import tokenizer
from reference_server import corrupt
from reference_server.config import EngineConfig
from reference_server.executors import Executor, Sampled
from reference_server.metrics import EngineMetrics
from reference_server.pacer import paced
from reference_server.scheduler import Scheduler
from reference_server.sequence import Delta, SamplingParams, Sequence, Status

log = logging.getLogger("llmchaos.engine")
SEND_CHUNK = 8  # streams woken to send a step's tokens between two reads of the sockets (~20-40 us each)


class QueueFull(Exception):
    def __init__(self, retry_after: int) -> None:
        super().__init__(f"waiting queue is full; retry after {retry_after}s")
        self.retry_after = retry_after


class Unavailable(Exception):
    """The engine is starting or draining."""


class Engine:
    def __init__(self, cfg: EngineConfig, executor: Executor) -> None:
        self.cfg = cfg
        self.scheduler = Scheduler(cfg)
        self.executor = executor
        self.metrics = EngineMetrics(cfg.model_name, cfg.max_model_len, self.scheduler, executor)
        self.state = "starting"  # starting | ready | draining
        self._pieces = tokenizer.pieces()
        self._eos = tokenizer.eos_id()
        self._garbage = corrupt.garbage_ids(self._pieces)
        self.corrupt = False  # the admin fault (reference_server/corrupt.py): requests that arrive answer garbage
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._finished: deque[float] = deque(maxlen=256)
        self._arriving: set[Sequence] = set()  # received, not yet through the frontend (sim)
        self._admission_delay = getattr(executor, "admission_delay", None)
        self._thinking = random.Random(0x7417)

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="engine-loop")

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for seq in [*self.scheduler.running, *self.scheduler.waiting, *self._arriving]:
            self._finish(seq, "abort", time.monotonic())

    def has_work(self) -> bool:
        return bool(self._arriving) or self.scheduler.has_work()

    async def wait_idle(self) -> None:
        while self.has_work():
            self._idle.clear()
            await self._idle.wait()

    # -- requests --------------------------------------------------------------------------
    def submit(
        self,
        prompt_ids: list[int],
        params: SamplingParams,
        lang: str,
        internal: bool = False,
        received: float | None = None,
        external: int = 0,
    ) -> Sequence:
        """Queue a request `received` at that time.monotonic() (default: now). The sim's frontend time
        counts from then, so the server's own parsing and tokenizing are inside it, not added to it.
        `external`: prompt tokens whose KV a prefill engine sent (not computed here)."""
        if not internal:
            if self.state != "ready":
                raise Unavailable(f"server is {self.state}")
            if len(self.scheduler.waiting) + len(self._arriving) >= self.cfg.max_waiting:
                raise QueueFull(self.retry_after())
        now = time.monotonic()
        seq = Sequence(
            prompt_ids,
            params,
            lang,
            arrival=now if received is None else received,
            internal=internal,
            rng=random.Random(params.seed) if params.seed is not None else None,
            corrupt=self.corrupt and not internal,
            num_external_tokens=external,
        )
        seq.ready = seq.arrival + (self._admission_delay() if self._admission_delay else 0.0)
        if (delay := seq.ready - now) > 0:
            self._arriving.add(seq)
            asyncio.get_running_loop().call_later(delay, self._admit, seq)
        else:
            self._admit(seq)
        return seq

    def _admit(self, seq: Sequence) -> None:
        self._arriving.discard(seq)
        if seq.status is Status.WAITING:  # not aborted on its way in
            self.scheduler.add(seq)
        self._wake.set()  # the loop sees the work, or that there is none left

    def thinking(self, asked: int | None) -> int:
        """A request's reasoning tokens: what it `asked` for, else a draw from the profile's (0: none)."""
        r = self.cfg.reasoning
        if asked is not None or not r.median:
            return asked or 0
        drawn = round(r.median * math.exp(self._thinking.gauss(0.0, r.sigma)))
        return max(1, min(drawn, r.max) if r.max else drawn)

    def abort(self, seq: Sequence) -> None:
        """Cancel a request (its client went away): its KV blocks are freed at once."""
        if seq.status is not Status.FINISHED:
            self._finish(seq, "abort", time.monotonic())

    def set_corrupt(self, on: bool) -> None:
        """Set or clear the `corrupt` fault: requests that arrive while it is set answer garbage to their
        end; those already in flight keep what they had (as the SSE proxy's faults act on the streams
        that start while they are active), so a request's start says whether it was corrupted."""
        if on and not self._garbage:
            raise ValueError("this tokenizer has no punctuation-only token to make garbage of")
        self.corrupt = on

    def retry_after(self) -> int:
        """Seconds until the waiting queue drains at the recent completion rate."""
        now, done = time.monotonic(), self._finished
        recent = [t for t in done if now - t < 30.0]
        rate = len(recent) / max(now - recent[0], 1.0) if recent else 0.0
        waiting = len(self.scheduler.waiting) + len(self._arriving)
        return max(1, min(60, math.ceil(waiting / rate))) if rate else 5

    async def deltas(self, seq: Sequence) -> AsyncIterator[Delta]:
        """The request's output; deltas that piled up while the reader was busy come merged."""
        while True:
            items = await seq.outbox.get()
            d = (
                items[0]
                if len(items) == 1
                else Delta(
                    "".join(i.text for i in items),
                    sum(i.num_tokens for i in items),
                    items[-1].finish_reason,
                    "".join(i.reasoning for i in items),
                )
            )
            yield d
            if d.finish_reason is not None:
                return

    def output(self, seq: Sequence) -> AsyncIterator[Delta | None]:
        """What the API streams: paced when the pacer is on (None marks a heartbeat)."""
        if self.cfg.pacer_tokens_per_s > 0:
            return paced(seq, self.cfg.pacer_tokens_per_s, self.cfg.pacer_max_gap_s)
        return self.deltas(seq)

    async def probe_ttft(self, timeout: float = 5.0) -> float:
        """Measure a real TTFT through the engine with a one-token request."""
        seq = self.submit(tokenizer.encode("ping"), SamplingParams(max_tokens=1, temperature=0), "en", internal=True)
        try:
            await asyncio.wait_for(seq.outbox.get(), timeout)
        finally:
            self.abort(seq)
        assert seq.first_token_time is not None
        return seq.first_token_time - seq.arrival

    # -- the loop --------------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            if not self.scheduler.has_work():
                if not self._arriving:
                    self._idle.set()
                self._wake.clear()
                await self._wake.wait()
                continue
            batch = self.scheduler.schedule()
            if not batch:  # nothing fits yet (all blocks pinned); let the event loop run
                await asyncio.sleep(0.001)
                continue
            now = time.monotonic()
            for seq, _ in batch.items:
                if seq.first_scheduled is None:
                    seq.first_scheduled = now
            try:
                tokens = await self.executor.execute(batch)
            except Exception:
                log.exception("executor failed; failing the batch")
                for seq, _ in batch.items:
                    self._finish(seq, "error", time.monotonic())
                continue
            self.scheduler.commit(batch)
            now = time.monotonic()
            sampled = list(zip(batch.sampling, tokens, strict=False))
            first = [item for item in sampled if not item[0].output_token_ids]
            rest = [item for item in sampled if item[0].output_token_ids]
            # First tokens first (a request's TTFT does not wait behind every running stream's send:
            # 0.8 ms at 31 req/s, 1.5 at 62), then the rest a few streams at a time: between chunks the
            # loop reads what came in, so a request is stamped received when it comes, not after a
            # whole step's sends (2-4 ms at 92 req/s). All are sent before the next step is made.
            made = 0
            for chunk in [first, *(rest[i : i + SEND_CHUNK] for i in range(0, len(rest), SEND_CHUNK))]:
                made += self._deliver(chunk, now)
                await asyncio.sleep(0)
            self.metrics.on_step(batch, made)

    def _deliver(self, sampled: list[tuple[Sequence, Sampled]], now: float) -> int:
        """Append each sequence's token (its stream is woken), or fail it alone; how many were appended."""
        made = 0
        for seq, token in sampled:
            if isinstance(token, Exception):
                log.error("sampling failed for request %d; failing it alone", seq.seq_id, exc_info=token)
                self._finish(seq, "error", now)
            elif seq.status is Status.RUNNING:
                self._append(seq, token, now)
                made += 1
        return made

    def _append(self, seq: Sequence, token: int, now: float) -> None:
        seq.output_token_ids.append(token)
        if not seq.internal:
            self.metrics.on_token(seq, now)
        if seq.first_token_time is None:
            seq.first_token_time = now
        seq.last_token_time = now
        p, n = seq.params, len(seq.output_token_ids)
        reason = "stop" if token == self._eos else None
        if seq.corrupt and not reason:  # shown as garbage; the model keeps its own token (corrupt.py)
            piece = self._pieces[self._garbage[(n - 1) % len(self._garbage)]]
        else:
            piece = "" if reason else self._pieces[token]
        if n in (1, p.reasoning_tokens + 1):  # the first word of the thinking, and of the answer
            piece = piece.lstrip(" ")
        thought, answer = n <= p.reasoning_tokens, bool(p.stop) and n > p.reasoning_tokens
        if answer and not reason:
            reason, text = self._check_stop(seq, piece)
        else:
            text = "" if thought else piece
        if reason is None and (n >= p.max_tokens or seq.num_tokens >= self.cfg.max_model_len):
            reason = "length"
        if answer and reason is None:
            text = text[: len(text) - _holdback(seq.text, p.stop)]
            seq.num_sent_chars += len(text)
        elif answer:
            text = seq.text[seq.num_sent_chars :]
        seq.outbox.put(Delta(text, 1, reason, piece if thought else ""))
        if reason:
            self._finish(seq, reason, now, notify=False)

    @staticmethod
    def _check_stop(seq: Sequence, piece: str) -> tuple[str | None, str]:
        """Append `piece`; on a stop string cut the text before it. Returns (reason, unsent text)."""
        start = max(0, len(seq.text) - max(map(len, seq.params.stop)))
        seq.text += piece
        hits = [(i, s) for s in seq.params.stop if (i := seq.text.find(s, start)) >= 0]
        if hits:
            at, seq.stop_reason = min(hits)
            seq.text = seq.text[:at]
            return "stop", seq.text[seq.num_sent_chars :]
        return None, seq.text[seq.num_sent_chars :]

    def _finish(self, seq: Sequence, reason: str, now: float, notify: bool = True) -> None:
        self.scheduler.finish(seq, reason)
        if notify:
            seq.outbox.put(Delta("", 0, reason))
        if not seq.internal:
            self.metrics.on_finish(seq, now)
            self._finished.append(now)


def _holdback(text: str, stops: tuple[str, ...]) -> int:
    """Length of the longest tail of `text` that could begin a stop string (not sent yet)."""
    best = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(text)), best, -1):
            if text.endswith(s[:k]):
                best = k
                break
    return best
