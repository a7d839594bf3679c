"""Which replica a request goes to (`--router`): `round-robin`; `least-loaded` (fewest requests in
flight at the router); `prefix`, as KV-aware routers do (the Gateway API Inference Extension's
prefix-cache scorer, llm-d's): the prompt's leading characters hashed in chained blocks, each block
remembered on the replica it was sent to, and a request sent where the longest run of its leading
blocks went before, else to the least loaded. Each returns every candidate, first choice first:
the rest are where a failed attempt goes next."""

from __future__ import annotations

import itertools
import json
from collections import OrderedDict
from typing import Protocol

from reference_server.cluster.supervisor import Replica

BLOCK_CHARS = 64  # the scorer's default block: 64 characters of prompt
MAX_BLOCKS = 256  # leading blocks matched at most (its maxPrefixBlocksToMatch)
CAPACITY = 31250  # blocks remembered per replica (its lruCapacityPerServer)


class Policy(Protocol):
    def order(self, candidates: list[Replica], prompt: str) -> list[Replica]: ...

    def sent(self, replica: Replica, prompt: str) -> None:
        """`prompt` was answered by `replica`."""


class RoundRobin:
    def __init__(self) -> None:
        self._turn = itertools.count()

    def order(self, candidates: list[Replica], prompt: str) -> list[Replica]:
        k = next(self._turn) % len(candidates) if candidates else 0
        return candidates[k:] + candidates[:k]

    def sent(self, replica: Replica, prompt: str) -> None:
        pass


class LeastLoaded(RoundRobin):
    """Fewest in flight; ties taken in turn, so an idle cluster is used evenly."""

    def order(self, candidates: list[Replica], prompt: str) -> list[Replica]:
        return sorted(super().order(candidates, prompt), key=lambda r: r.in_flight)


def blocks(prompt: str) -> list[int]:
    """The chained hashes of `prompt`'s full leading blocks."""
    out: list[int] = []
    for i in range(min(len(prompt) // BLOCK_CHARS, MAX_BLOCKS)):
        out.append(hash((out[-1] if out else 0, prompt[i * BLOCK_CHARS : (i + 1) * BLOCK_CHARS])))
    return out


class Prefix(LeastLoaded):
    def __init__(self, replicas: int) -> None:
        super().__init__()
        self._where: OrderedDict[int, int] = OrderedDict()  # block hash -> replica index, least recent first
        self._capacity = CAPACITY * max(1, replicas)

    def holder(self, prompt: str, among: set[int] | None = None) -> tuple[int | None, int]:
        """The replica (of `among`, default any) holding the longest run of `prompt`'s leading
        blocks, and how many; (None, 0) when none holds its first."""
        best: tuple[int | None, int] = (None, 0)
        for n, h in enumerate(blocks(prompt), 1):
            i = self._where.get(h)
            if i is None or (among is not None and i not in among):
                break
            best = (i, n)  # the deepest block's: it was sent there with every block before it
        return best

    def order(self, candidates: list[Replica], prompt: str) -> list[Replica]:
        ranked = super().order(candidates, prompt)
        i, _ = self.holder(prompt, {r.index for r in candidates})
        return sorted(ranked, key=lambda r: r.index != i)  # stable: the holder first, the rest least loaded

    def sent(self, replica: Replica, prompt: str) -> None:
        for h in blocks(prompt):
            self._where[h] = replica.index
            self._where.move_to_end(h)
        while len(self._where) > self._capacity:
            self._where.popitem(last=False)

    def forget(self, index: int) -> None:
        """Replica `index` lost its cache (killed, restarted): it holds nothing now."""
        for h in [h for h, i in self._where.items() if i == index]:
            del self._where[h]


POLICIES: dict[str, type] = {"round-robin": RoundRobin, "least-loaded": LeastLoaded, "prefix": Prefix}
DEFAULT = "least-loaded"


def make(name: str, replicas: int) -> Policy:
    return Prefix(replicas) if name == "prefix" else POLICIES[name]()


def prompt_text(body: bytes) -> str:
    """The prompt of an OpenAI (chat or completions) or Gemini request body, as the engine reads it
    in order (system first); "" when the body is none of them (the engine refuses it anyway)."""
    try:
        req = json.loads(body)
    except ValueError:
        return ""
    if not isinstance(req, dict):
        return ""
    parts: list[object] = []
    if isinstance(req.get("messages"), list):
        for m in req["messages"]:
            content = m.get("content") if isinstance(m, dict) else None
            parts.extend(content if isinstance(content, list) else [content])
    elif "prompt" in req:
        parts.append(req["prompt"])
    else:
        for c in [req.get("systemInstruction"), *(req.get("contents") or [])]:
            parts.extend(c.get("parts", []) if isinstance(c, dict) else [])
    return "".join(_text(p) for p in parts)


def _text(part: object) -> str:
    if isinstance(part, str):
        return part
    if isinstance(part, dict) and isinstance(part.get("text"), str):
        return part["text"]
    if isinstance(part, list):
        return "".join(_text(p) for p in part)
    return ""
