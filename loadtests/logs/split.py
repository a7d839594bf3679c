"""Who goes where, decided by the user id alone, so every process and every run agrees.

- the A/B split: FNV-1a 64-bit of the user id (the salt before it, when given) modulo 100; a user
  whose bucket is below N goes to B;
- the language of a user whose log has none, drawn by the `--lang-mix` weights;
- `--sample R`: whole users kept with probability R;
- the worker that replays a session (every turn of it on one worker, in order).

The last three use BLAKE2b keyed by their purpose and the seed, independent of the split and of
each other.
"""

from __future__ import annotations

import hashlib
import math
from bisect import bisect_right
from itertools import accumulate

from llmchaos import languages
from llmchaos.errors import UsageError

FNV_OFFSET, FNV_PRIME, MASK64 = 0xCBF29CE484222325, 0x100000001B3, (1 << 64) - 1


def fnv1a64(data: bytes) -> int:
    h = FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * FNV_PRIME) & MASK64
    return h


def bucket(user_id: str, salt: str = "") -> int:
    """The user's A/B bucket, 0-99."""
    return fnv1a64((salt + user_id).encode()) % 100


def side(user_id: str, split: float, salt: str = "") -> str:
    """'b' for a user whose bucket is below `split` (the percent sent to B), else 'a'."""
    return "b" if bucket(user_id, salt) < split else "a"


def unit(purpose: str, key: str, seed: int) -> float:
    """A uniform draw in [0, 1) fixed by (purpose, key, seed)."""
    digest = hashlib.blake2b(key.encode(), digest_size=8, key=f"{purpose}:{seed}".encode()).digest()
    return int.from_bytes(digest, "big") / 2.0**64


class LangMix:
    """Languages by weight, e.g. `en=10,zh=6,ja=4` (default: the registry's weights)."""

    def __init__(self, weights: dict[str, float]) -> None:
        self.tags = tuple(weights)
        total = sum(weights.values())
        self._cum = [c / total for c in accumulate(weights.values())]

    @classmethod
    def parse(cls, text: str, flag: str = "--lang-mix") -> LangMix:
        if not text.strip():
            return cls({t: lang.weight for t, lang in languages.registry().items()})
        weights: dict[str, float] = {}
        for item in filter(None, (i.strip() for i in text.split(","))):
            tag, eq, w = item.partition("=")
            try:
                value = float(w) if eq else math.nan
            except ValueError:
                value = math.nan
            if not (math.isfinite(value) and value > 0):
                raise UsageError(f"expected lang=weight with a weight > 0, got {item!r}", field=flag)
            if tag.strip() not in languages.registry():
                raise UsageError(f"unknown language {tag.strip()!r} (known: {', '.join(languages.tags())})", field=flag)
            weights[tag.strip()] = value
        if not weights:
            raise UsageError("no languages", field=flag)
        return cls(weights)

    def pick(self, user_id: str, seed: int = 0) -> str:
        """The user's language, the same for every request, process and run with this seed."""
        return self.tags[min(bisect_right(self._cum, unit("lang", user_id, seed)), len(self.tags) - 1)]


def sampled(user_id: str, rate: float, seed: int = 0) -> bool:
    """Whether `--sample rate` keeps this user (and every request and session of theirs)."""
    return rate >= 1.0 or unit("sample", user_id, seed) < rate


def shard(key: str, workers: int) -> int:
    """The worker (0 .. workers-1) that replays this session or user."""
    return int(unit("shard", key, 0) * workers) if workers > 1 else 0
