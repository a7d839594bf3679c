"""Conversations as load (--sessions): each user runs one conversation after another (with a rate,
each begins at an arrival of its language, so the users bound how many are open at once). A
turn's request is the conversation so far (the earlier prompts and the answers the target actually
gave) and a new user message of its language; the next turn waits for that answer, then a think
time. A turn that fails cuts its conversation (it cannot go on without the answer); the test's end
cuts those in progress. Both are counted so, never as short conversations (run.json `sessions`).

With --tool-rate, that share of turns offers tools (an agent's: TOOLS). An answer that calls them
is sent back at once with each call's result (a text of the language's), and the turn goes on
until an answer is text: its hops. A model still calling after MAX_HOPS cuts its conversation."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

import gevent
from gevent.event import Event

from llmchaos.run import SessionCount
from loadtests.adapters import Message, Tool, ToolCall
from loadtests.distributions import Distribution

ENDINGS = ("completed", "cut_failed", "cut_stop")
MAX_HOPS = 4  # tool round trips in one turn
TOOLS = (
    Tool(
        "search",
        "Search the web; returns the most relevant passage.",
        {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "what to look for"}},
            "required": ["query"],
        },
    ),
    Tool(
        "lookup",
        "Look a term up in the knowledge base; returns its entry.",
        {"type": "object", "properties": {"term": {"type": "string", "description": "the term"}}, "required": ["term"]},
    ),
)


@dataclass(frozen=True)
class SessionOptions:
    """Turns per conversation, the think time before each turn after the first, and the share of
    turns that offer tools."""

    turns: Distribution
    think: Distribution
    tool_rate: float = 0.0

    def to_json(self) -> dict[str, object]:
        """run.json's record, in a profile's `sessions:` form."""
        return {"turns": self.turns.to_json(), "think": self.think.to_json(), "tool_rate": self.tool_rate}


@dataclass
class Conversation:
    """One user's conversation: its id, turns planned and sent, its history, and whether the last
    answer is in (the next request waits for it)."""

    id: str
    lang: str
    user: int
    turns: int
    rng: random.Random
    sent: int = 0
    hop: int = 0  # the turn's requests after its first
    began: float = 0.0  # unix time the turn's user message was due
    tools: bool = False  # the turn offers tools
    history: list[Message] = field(default_factory=list)
    asked: tuple[Message, ...] = ()  # the request in flight's new messages: the user's, or the tools' results
    calls: tuple[ToolCall, ...] = ()  # the last answer's calls, which the next request answers
    answered: Event = field(default_factory=Event)

    def __post_init__(self) -> None:
        self.answered.set()


class Sessions:
    """Every conversation of this process's users, and how those that ended ended (per language)."""

    def __init__(self, options: SessionOptions, seed: int) -> None:
        self.options, self.seed = options, seed
        self._open: dict[tuple[str, int], Conversation] = {}  # (lang, user) -> its conversation
        self._started: Counter[tuple[str, int]] = Counter()  # conversations each user began
        self.tally: Counter[tuple[str, str]] = Counter()  # (lang, ending or "turns") -> count

    def turn(self, lang: str, user: int) -> Conversation:
        """The user's conversation for its next request (a new one when none is open), once the last
        answer is in and, for a new turn, its think time has passed; one with `calls` is a hop."""
        conv = self._open.get((lang, user))
        if conv is not None:
            conv.answered.wait()
            conv = self._open.get((lang, user))  # the answer may have ended it
        if conv is not None and conv.calls:
            return conv
        if conv is None:
            k = self._started[lang, user]
            self._started[lang, user] += 1
            rng = random.Random(f"{self.seed}:{lang}:{user}:{k}")
            conv = Conversation(f"{lang}-{user}-{k}", lang, user, self.options.turns.draw_int(rng), rng)
            self._open[lang, user] = conv
        elif (think := self.options.think.draw(conv.rng)) > 0:
            gevent.sleep(think)
        return conv

    def sent(self, conv: Conversation, prompt: str) -> int:
        """A turn of `conv` with the user message `prompt` goes out (its tools drawn): its number (1: the first)."""
        conv.answered.clear()
        conv.asked, conv.sent, conv.hop = (Message("user", prompt),), conv.sent + 1, 0
        conv.tools = self.options.tool_rate > 0 and conv.rng.random() < self.options.tool_rate
        self.tally[conv.lang, "turns"] += 1
        if conv.sent == 1:
            self.tally[conv.lang, "started"] += 1
        return conv.sent

    def hop(self, conv: Conversation, results: tuple[Message, ...]) -> int:
        """The results of the last answer's calls go out: the turn's hop (1: the first)."""
        conv.answered.clear()
        conv.asked, conv.calls, conv.hop = results, (), conv.hop + 1
        self.tally[conv.lang, "tool_hops"] += 1
        return conv.hop

    def answered(self, conv: Conversation, ok: bool, answer: str, calls: list[ToolCall], at_stop: bool) -> None:
        """The request in flight ended: its answer (text, or the calls it made) joins the history,
        or the conversation is cut (a failure, the test's end, a model still calling tools after
        MAX_HOPS); the last turn's text answer completes it. One the stop has already counted is
        not counted again."""
        if ok:
            said = Message("assistant", calls=tuple(calls)) if calls else Message("assistant", answer)
            conv.history.extend((*conv.asked, said))
            ok = not calls or conv.hop < MAX_HOPS
            conv.calls = tuple(calls) if ok else ()
        if not ok or (conv.sent >= conv.turns and not conv.calls):
            ending = "completed" if ok else "cut_stop" if at_stop else "cut_failed"
            if self._open.get((conv.lang, conv.user)) is conv:
                del self._open[conv.lang, conv.user]
                self.tally[conv.lang, ending] += 1
        conv.answered.set()

    def stop(self) -> None:
        """The test stopped: every conversation still open (a turn of it sent) is cut by it."""
        for conv in self._open.values():
            if conv.sent:
                self.tally[conv.lang, "cut_stop"] += 1
        self._open.clear()

    def drain(self) -> dict[str, dict[str, int]]:
        """The counts since the last drain, per language (a shipment's)."""
        out: dict[str, dict[str, int]] = {}
        for (lang, what), n in self.tally.items():
            out.setdefault(lang, {})[what] = n
        self.tally.clear()
        return out


def merge(into: dict[str, Counter[str]], shipped: dict[str, dict[str, int]]) -> None:
    """A drained count into the run's totals."""
    for lang, counts in shipped.items():
        into.setdefault(lang, Counter()).update(counts)


def rows(totals: dict[str, Counter[str]], target: str, api: str) -> list[SessionCount]:
    """run.json's `sessions`, per language."""
    return [
        SessionCount(
            target=target,
            lang=lang,
            api=api,
            started=c["started"],
            **{e: c[e] for e in ENDINGS},
            turns=c["turns"],
            tool_hops=c["tool_hops"],
        )
        for lang, c in sorted(totals.items())
    ]
