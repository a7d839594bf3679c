"""Waiting-queue policies: which waiting request the scheduler admits next.

`fcfs` is arrival order. `wfq` and `two-level` are start-time fair queuing
(SFQ) over classes: each request gets a start tag max(V, F_class) and a finish
tag start + cost / weight, the head with the smallest start tag goes first, so
a backlogged class gets at most its weight's share of admitted tokens.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Protocol

from reference_server.config import EngineConfig
from reference_server.sequence import Sequence


class Policy(Protocol):
    def add(self, seq: Sequence) -> None: ...
    def push_front(self, seq: Sequence) -> None: ...
    def peek(self) -> Sequence | None: ...
    def pop(self) -> Sequence: ...
    def remove(self, seq: Sequence) -> bool: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[Sequence]: ...


class FCFS:
    def __init__(self) -> None:
        self._q: deque[Sequence] = deque()

    def add(self, seq: Sequence) -> None:
        self._q.append(seq)

    def push_front(self, seq: Sequence) -> None:
        self._q.appendleft(seq)

    def peek(self) -> Sequence | None:
        return self._q[0] if self._q else None

    def pop(self) -> Sequence:
        return self._q.popleft()

    def remove(self, seq: Sequence) -> bool:
        try:
            self._q.remove(seq)
            return True
        except ValueError:
            return False

    def __len__(self) -> int:
        return len(self._q)

    def __iter__(self) -> Iterator[Sequence]:
        return iter(self._q)


class FairQueue:
    """SFQ across classes; a class may hold the turn for a minimum slice once it gets it."""

    def __init__(
        self,
        classify: Callable[[Sequence], str],
        weights: dict[str, float],
        default_weight: float = 1.0,
        min_slice_s: dict[str, float] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.classify, self.weights, self.default_weight = classify, weights, default_weight
        self.min_slice_s = min_slice_s or {}
        self.clock = clock
        self._queues: dict[str, deque[tuple[float, Sequence]]] = {}
        self._finish: dict[str, float] = {}
        self._vtime = 0.0
        self._holder: tuple[str, float] | None = None  # class holding a slice, until when
        self._len = 0

    def add(self, seq: Sequence) -> None:
        cls = self.classify(seq)
        start = max(self._vtime, self._finish.get(cls, 0.0))
        cost = seq.num_prompt_tokens + seq.params.max_tokens
        self._finish[cls] = start + cost / self.weights.get(cls, self.default_weight)
        self._queues.setdefault(cls, deque()).append((start, seq))
        self._len += 1

    def push_front(self, seq: Sequence) -> None:
        """A preempted request goes back to the head of its class with the smallest tag there."""
        q = self._queues.setdefault(self.classify(seq), deque())
        q.appendleft((min(q[0][0], self._vtime) if q else self._vtime, seq))
        self._len += 1

    def _head_class(self) -> str | None:
        if self._holder and self._queues.get(self._holder[0]) and self.clock() < self._holder[1]:
            return self._holder[0]
        best = None
        for cls, q in self._queues.items():
            if q and (best is None or q[0][0] < self._queues[best][0][0]):
                best = cls
        return best

    def peek(self) -> Sequence | None:
        cls = self._head_class()
        return self._queues[cls][0][1] if cls is not None else None

    def pop(self) -> Sequence:
        cls = self._head_class()
        assert cls is not None, "pop from an empty queue"
        start, seq = self._queues[cls].popleft()
        self._vtime = max(self._vtime, start)
        self._len -= 1
        if (self._holder is None or self._holder[0] != cls or self.clock() >= self._holder[1]) and self.min_slice_s.get(
            cls
        ):
            self._holder = (cls, self.clock() + self.min_slice_s[cls])
        return seq

    def remove(self, seq: Sequence) -> bool:
        q = self._queues.get(self.classify(seq), deque())
        for item in q:
            if item[1] is seq:
                q.remove(item)
                self._len -= 1
                return True
        return False

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[Sequence]:
        return (seq for q in self._queues.values() for _, seq in q)


def make_policy(cfg: EngineConfig) -> Policy:
    if cfg.policy == "fcfs":
        return FCFS()
    if cfg.policy == "wfq":
        weights = cfg.lang_weights or _registry_weights()
        return FairQueue(lambda s: s.lang, weights, default_weight=min(weights.values(), default=1.0))
    if cfg.policy == "two-level":
        limit = cfg.fast_max_prompt_tokens
        return FairQueue(
            lambda s: "fast" if s.num_prompt_tokens <= limit else "bulk",
            {"fast": cfg.fast_weight, "bulk": cfg.bulk_weight},
            min_slice_s={"bulk": cfg.bulk_min_slice_s},
        )
    raise ValueError(f"unknown policy {cfg.policy!r}")


def _registry_weights() -> dict[str, float]:
    from llmchaos import languages

    return {tag: lang.weight for tag, lang in languages.registry().items()}
