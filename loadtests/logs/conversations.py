"""Each record's place in its conversation, as the log carries it: a session id of its own, or, in a
trace of prompt blocks without one (Mooncake's traces), a chain of prompts: a turn's `hash_ids`
begin with every whole block of the turn before (its history resent; the turn before's last block,
cut short, is whole now and hashes anew), then the new message's. Turns are counted per session
from 1, in the log's order, and each turn after the first knows how long after the turn before it
ended it was sent (`after`: from that turn's start plus its recorded end-to-end time where the log
has one, else from its start).

Written here because no trace reader does it: a row continues the latest conversation whose last
prompt's whole blocks are the longest shorter prefix of its own (found by one hash per prefix
length) and whose prompt it outgrows by at least half the answer that turn recorded. In Mooncake's
conversation trace 99 % of the turns its blocks alone chain grew by 0.69 of it or more (median 1.13);
prompts on one shared document grow by a few tokens. Blocks every prompt opens with (a shared
system prompt: Mooncake's block 0) are no one's history: a prompt can be continued only where its
last whole block was first seen in its own conversation. Only the most recent `KEEP` conversations
(and `SEEN` blocks) are followed, so a log of millions stays within memory; one idle for longer than
that starts again as a new one."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from loadtests.logs.log_record import LogRecord

KEEP = 1 << 17  # conversations followed at once
SEEN = 1 << 21  # blocks whose first row is remembered


@dataclass(slots=True)
class _Thread:
    session: str
    turns: int
    born: int = 0  # the row it began on (chained sessions only)
    last: tuple[int, ...] = ()  # its last prompt's whole blocks, where they are its own (chained only)
    grown: int = 0  # the least prompt its next turn sends: its last prompt and half its answer (chained only)
    ended: float = 0.0  # when its last turn ended, as the log has it (its start where it has no end)


class Conversations:
    """Give each record read, in order, its `session` (chained), `turn` and `after`."""

    def __init__(self, keep: int = KEEP, seen: int = SEEN) -> None:
        self.keep, self.seen = keep, seen
        self._sessions: OrderedDict[str, _Thread] = OrderedDict()
        self._ends: dict[tuple[int, int], _Thread] = {}  # (blocks, hash of them) of a chain's last prompt
        self._first: OrderedDict[int, int] = OrderedDict()  # block -> the row it was first seen on
        self._rows = 0

    def place(self, rec: LogRecord) -> None:
        if rec.session is None and rec.hash_ids:
            self._rows += 1
            thread = self._continued(rec.hash_ids, rec.input_tokens or 0)
            if thread is None:
                thread = self._follow(_Thread(f"{rec.user}/{rec.line}", 0, self._rows))
            else:
                self._ends.pop(_end(thread.last), None)
                self._sessions.move_to_end(thread.session)
            self._see(rec.hash_ids)
            ids, n, size = rec.hash_ids, rec.input_tokens, rec.block_tokens
            whole = ids[: n // size] if n and size else ids  # without sizes, every block is whole
            thread.last = whole if whole and self._first.get(whole[-1], 0) >= thread.born else ()
            thread.grown = (n or 0) + (rec.output_tokens or 0) // 2
            if thread.last:
                self._ends[_end(thread.last)] = thread
            rec.session = thread.session
        elif rec.session is None:
            return
        else:
            thread = self._sessions.get(rec.session) or self._follow(_Thread(rec.session, 0))
            self._sessions.move_to_end(rec.session)
        thread.turns += 1
        rec.turn = thread.turns
        rec.after = max(0.0, rec.ts - thread.ended) if thread.turns > 1 else None
        e2e = rec.response.e2e_ms if rec.response is not None else None
        thread.ended = rec.ts + (e2e or 0.0) / 1000

    def _continued(self, ids: tuple[int, ...], tokens: int) -> _Thread | None:
        """The conversation whose last prompt's whole blocks are the longest shorter prefix of `ids`,
        where `tokens` hold at least that prompt and half its answer (`grown`): a prompt resent, or
        another on a shared document, is not its next turn."""
        prefixes, h = [], 0
        for n, block in enumerate(ids[:-1], 1):
            h = hash((h, block))
            prefixes.append((n, h))
        for key in reversed(prefixes):
            thread = self._ends.get(key)
            if thread is not None and ids[: key[0]] == thread.last and (tokens > thread.grown or not tokens):
                return thread
        return None

    def _see(self, ids: tuple[int, ...]) -> None:
        """Note the row each new block was first seen on (the oldest forgotten past `seen`)."""
        for block in ids:
            if block not in self._first:
                self._first[block] = self._rows
                if len(self._first) > self.seen:
                    self._first.popitem(last=False)

    def _follow(self, thread: _Thread) -> _Thread:
        self._sessions[thread.session] = thread
        if len(self._sessions) > self.keep:
            _, old = self._sessions.popitem(last=False)
            if old.last and self._ends.get(_end(old.last)) is old:
                del self._ends[_end(old.last)]
        return thread


def _end(ids: tuple[int, ...]) -> tuple[int, int]:
    h = 0
    for block in ids:
        h = hash((h, block))
    return len(ids), h
