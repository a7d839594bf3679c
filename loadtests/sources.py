"""Where a test's requests come from. A source says which request a user sends next, when it was
due and to which side(s); the harness sends, measures and records it the same way whatever the
source. The load test's is here: the closed loop (each user's next prompt, now) or, with a rate,
the open loop (the next arrival of the user's language on the master's seeded schedule); the
replay's log is `loadtests/replay/source.py`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llmchaos.run import ReplayFields
from loadtests.adapters import Ask, Call, Message
from loadtests.arrivals import ArrivalPlan, Arrivals
from loadtests.canaries import Canaries, Canary
from loadtests.collector import Collector
from loadtests.exporters import Exporter, FaultState
from loadtests.options import Settings
from loadtests.prompts import LongContextSource, Prefixes, PromptSource
from loadtests.record import SIDE
from loadtests.results import RunWriter
from loadtests.sessions import TOOLS, Conversation, Sessions

if TYPE_CHECKING:
    from loadtests.record import RequestRecord


@dataclass(slots=True)
class Due:
    """A request ready to send: its language and API, its call (None for one that was never built:
    the test stopped first), when it was due (unix time; None: now, closed loop), the side(s) it goes
    to, and for a replayed one, what its records keep of the log."""

    lang: str
    api: str
    call: Call | None
    intended: float | None
    sides: tuple[str, ...] = (SIDE,)
    replay: ReplayFields | None = None
    prepare_s: float | None = None  # seconds its call took to build, ahead of its time (None: not timed)
    canary: Canary | None = None  # a canary: its answer is checked (loadtests/canaries.py)
    prefix: int | None = None  # --prefix-tokens: which of its language's shared prefixes it opens with
    conversation: Conversation | None = None  # --sessions: the conversation it is a turn of
    turn: int | None = None  # ... and which (1: the first)
    hop: int | None = None  # ... 0: its user message; k: its k-th sending of tools' results


class Source:
    """What every source answers: its sides (side -> base URL), a worker's share of its plan, the
    next request, what follows a request's end, what was due but never sent at stop, what a worker
    ships besides its measurements, the run's report. `on_share_done` is called once this process
    has sent, and seen end, all of its share (a source that never runs out never calls it)."""

    def __init__(self, settings: Settings, host: str) -> None:
        self.settings = settings
        self.sides = {SIDE: host}

    def configure(self, settings: Settings, host: str, is_worker: bool) -> None:
        """The run's settings and target (a worker's come with the master's spawn message)."""
        self.settings, self.sides = settings, {SIDE: host}

    def plan(self, t0: float, worker: int, workers: int) -> dict[str, Any] | None:
        """Worker `worker` of `workers`'s share from unix time `t0` (the whole of it in a single
        process), as a plan message carries it; None: nothing to plan."""
        return None

    def start(self, plan: dict[str, Any], on_share_done: Callable[[], None]) -> None:
        """Start this process's share of the plan."""

    def next(self, lang: str, user: int) -> Due:
        """The next request user `user` (its stable number: `Harness.user_number`) of `lang` sends
        (waits until it is due)."""
        raise NotImplementedError

    def ended(self, due: Due, records: dict[str, RequestRecord]) -> None:
        """`due` has ended on each side (counted, not yet added): what the source keeps of it."""

    def stop(self) -> list[Due]:
        """Stop issuing; the requests that fell due and were never sent."""
        return []

    def shipment(self) -> dict[str, Any]:
        """What a worker ships to the master besides its measurements (merged by the run's report)."""
        return {}

    def results(
        self, settings: Settings, exporter: Exporter, local: Collector | None, faults: FaultState | None
    ) -> RunWriter:
        """The run's results writer on the master or a single process (which shares its collector with it)."""
        return RunWriter(settings, exporter, local, faults)


class Loop(Source):
    """The load test's: each user's next prompt of its language, sent now (closed loop) or, with a
    rate, at its arrival on the master's seeded schedule, arrival k to worker k mod n (open loop).
    With --canary-rate, a share of them are canaries, their answers checked at their end. With
    --sessions, each prompt is a turn of the user's conversation (loadtests/sessions.py); with a
    rate too, an arrival begins a conversation and its later turns follow its answers."""

    def __init__(self, settings: Settings, host: str) -> None:
        super().__init__(settings, host)
        self.arrivals = Arrivals()
        self._prompts: dict[str, PromptSource | LongContextSource] = {}
        self._canaries: Canaries | None = None
        self._prefixes: Prefixes | None = None
        self.sessions: Sessions | None = None

    def configure(self, settings: Settings, host: str, is_worker: bool) -> None:
        super().configure(settings, host, is_worker)
        self._prompts = {}
        o = settings.options
        self._canaries = Canaries(settings.canaries, o.canary_rate, o.seed) if settings.canaries else None
        self._prefixes = Prefixes(o.prefix_tokens, o.prefixes, o.seed) if o.prefix_tokens > 0 else None
        self.sessions = Sessions(settings.sessions, o.seed) if settings.sessions is not None else None

    def plan(self, t0: float, worker: int, workers: int) -> dict[str, Any] | None:
        if not self.settings.open_loop:
            return None
        return ArrivalPlan.for_run(self.settings, t0, worker, workers).message()

    def start(self, plan: dict[str, Any], on_share_done: Callable[[], None]) -> None:
        self.arrivals.start(ArrivalPlan.from_message(plan))

    def next(self, lang: str, user: int) -> Due:
        """A prompt of `lang`'s, due now or at the language's next arrival, opened with the user's
        prefix with --prefix-tokens (a canary's never: its answer is the bare prompt's); with
        --sessions, the next turn of the user's conversation (its first opened with the prefix, and
        due at an arrival in the open loop; a later turn is due once its think time is over)."""
        s, o = self.settings, self.settings.options
        conv = self.sessions.turn(lang, user) if self.sessions is not None else None
        if conv is not None and conv.calls:
            return self._hop(lang, conv)
        opens = conv is None or not conv.sent  # a request of its own, or a conversation's first turn
        intended = self.arrivals.next(lang) if self.settings.open_loop and opens else None
        canary = self._canaries.draw(lang) if self._canaries is not None else None
        prefix = None
        if canary is None:
            prompt, max_tokens, seed = self._prompt_source(lang).next(), o.max_tokens, None
            if self._prefixes is not None and (conv is None or not conv.sent):
                prefix, prompt = self._prefixes.open(lang, user, prompt)
        else:
            prompt, max_tokens, seed = canary.prompt, canary.max_tokens, canary.seed
        history = tuple(conv.history) if conv is not None else ()
        turn = self.sessions.sent(conv, prompt) if self.sessions is not None and conv is not None else None
        tools = TOOLS if conv is not None and conv.tools else ()
        call = s.adapter.call(
            Ask(o.model, lang, prompt, max_tokens, not o.no_stream, o.lang_in_body, o.api_key, o.include_thoughts,
                greedy_seed=seed, history=history, tools=tools)
        )  # fmt: skip
        hop = 0 if turn is not None else None
        return Due(
            lang, s.adapter.name, call, intended, canary=canary, prefix=prefix, conversation=conv, turn=turn, hop=hop
        )

    @staticmethod
    def _step(conv: Conversation, hop: int | None, rec: RequestRecord) -> None:
        """The turn's step time on its answer in text: from its user message's intended start."""
        if hop == 0:
            conv.began = rec.intended
        if rec.outcome == "ok" and not rec.calls and rec.e2e is not None:
            rec.step = rec.intended + rec.e2e - conv.began

    def _hop(self, lang: str, conv: Conversation) -> Due:
        """The next request of `conv`'s turn: the results of the calls its last answer made (each a
        text of its language), with the tools offered again."""
        assert self.sessions is not None
        o, source = self.settings.options, self._prompt_source(lang)
        results = tuple(Message("tool", source.next(), call=c) for c in conv.calls)
        history = (*conv.history, *results)
        hop = self.sessions.hop(conv, results)
        call = self.settings.adapter.call(
            Ask(o.model, lang, "", o.max_tokens, not o.no_stream, o.lang_in_body, o.api_key, o.include_thoughts,
                history=history, tools=TOOLS)
        )  # fmt: skip
        return Due(lang, self.settings.adapter.name, call, None, conversation=conv, turn=conv.sent, hop=hop)

    def ended(self, due: Due, records: dict[str, RequestRecord]) -> None:
        """A conversation's turn answered (or cut); a canary whose answer came whole (`ok`) and fails
        its check is `wrong`."""
        if self.sessions is not None and due.conversation is not None:
            rec = next(iter(records.values()), None)  # None: its user was stopped before it was sent
            ok, answer = (rec.outcome == "ok", rec.answer) if rec is not None else (False, "")
            calls = rec.calls if rec is not None else []
            if rec is not None:
                self._step(due.conversation, due.hop, rec)
            self.sessions.answered(due.conversation, ok, answer, calls, rec.at_stop if rec is not None else True)
        if due.canary is None:
            return
        for rec in records.values():
            rec.canary = due.canary.name
            if rec.outcome == "ok" and (why := due.canary.fault(rec.answer)) is not None:
                rec.outcome, rec.error = "wrong", why

    def shipment(self) -> dict[str, Any]:
        return {"sessions": self.sessions.drain()} if self.sessions is not None else {}

    def results(
        self, settings: Settings, exporter: Exporter, local: Collector | None, faults: FaultState | None
    ) -> RunWriter:
        """The run's results writer; a single process's counts its own conversations."""
        writer = super().results(settings, exporter, local, faults)
        writer.local_sessions = self.sessions if local is not None else None
        return writer

    def _prompt_source(self, lang: str) -> PromptSource | LongContextSource:
        """A language's seeded prompt draws (generated prompts of a length with --long-context-tokens)."""
        if (source := self._prompts.get(lang)) is None:
            o, rng = self.settings.options, random.Random(f"{self.settings.options.seed}:{lang}")
            if o.long_context_tokens > 0:
                source = LongContextSource(lang, o.long_context_tokens, rng)
            else:
                source = PromptSource(lang, rng, self.settings.prompt_sizes or None)
            self._prompts[lang] = source
        return source

    def stop(self) -> list[Due]:
        api = self.settings.adapter.name
        if self.sessions is not None:
            self.sessions.stop()
        return [Due(lang, api, None, due) for lang, due in self.arrivals.stop()]
