"""Each record's place in its conversation, as the log carries it: a session id of its own, or, in a
trace of prompt blocks without one (Mooncake's conversation trace), a chain of prompts, each turn's
`hash_ids` beginning with every block of the turn before (the history resent, then the new
message). Turns are counted per session from 1, in the log's order, and each turn after the first
knows how long after the turn before it ended it was sent (`after`: from that turn's start plus its
recorded end-to-end time where the log has one, else from its start).

Written here because no trace reader does it: a row continues the latest conversation whose last
prompt is the longest whole prefix of its own, found by one hash per prefix length. Only the most
recent `KEEP` conversations are followed (a log of millions of them stays within memory); one
idle for longer than that starts again as a new one."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from loadtests.logs.log_record import LogRecord

KEEP = 1 << 17  # conversations followed at once


@dataclass(slots=True)
class _Thread:
    session: str
    turns: int
    last: tuple[int, ...] = ()  # its last prompt's blocks (chained sessions only)
    ended: float = 0.0  # when its last turn ended, as the log has it (its start where it has no end)


class Conversations:
    """Give each record read, in order, its `session` (chained), `turn` and `after`."""

    def __init__(self, keep: int = KEEP) -> None:
        self.keep = keep
        self._sessions: OrderedDict[str, _Thread] = OrderedDict()
        self._ends: dict[tuple[int, int], _Thread] = {}  # (blocks, hash of them) of a chain's last prompt

    def place(self, rec: LogRecord) -> None:
        if rec.session is None and rec.hash_ids:
            thread = self._continued(rec.hash_ids)
            if thread is None:
                thread = self._follow(_Thread(f"{rec.user}/{rec.line}", 0))
            else:
                self._ends.pop(_end(thread.last), None)
                self._sessions.move_to_end(thread.session)
            thread.last = rec.hash_ids
            self._ends[_end(rec.hash_ids)] = thread
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

    def _continued(self, ids: tuple[int, ...]) -> _Thread | None:
        """The conversation whose last prompt is the longest whole, shorter prefix of `ids`."""
        prefixes, h = [], 0
        for n, block in enumerate(ids[:-1], 1):
            h = hash((h, block))
            prefixes.append((n, h))
        for key in reversed(prefixes):
            thread = self._ends.get(key)
            if thread is not None and ids[: key[0]] == thread.last:
                return thread
        return None

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
