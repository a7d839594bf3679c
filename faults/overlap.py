"""Whether two trains of fault windows ever overlap, worked out from their offsets, lengths and
periods alone (never by listing windows), in whole microseconds so the arithmetic is exact.

A train is the windows [at + k*every, at + k*every + length) for k = 0, 1, 2, ... (k = 0 only when
it does not repeat). Two repeating trains with periods p and q meet wherever the gap between two of
their starts, (b.at + j*q) - (a.at + i*p), falls inside (-b.length, a.length); over all i, j >= 0
those gaps are exactly the numbers congruent to b.at - a.at modulo gcd(p, q).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

US = 1_000_000


@dataclass(frozen=True)
class Train:
    at: int  # microseconds from the schedule's start
    length: int
    every: int | None  # None: one window

    @classmethod
    def of(cls, at: float, length: float, every: float | None) -> Train:
        """From seconds; a length is rounded up, so windows that touch within a microsecond count as overlapping."""
        return cls(round(at * US), max(1, math.ceil(length * US)), None if every is None else round(every * US))


def _one_and_many(one: Train, many: Train) -> tuple[int, int] | None:
    """(start of `one`, start of a window of the repeating `many`) that overlap, or None."""
    assert many.every is not None
    k = max(0, (one.at - many.at - many.length) // many.every + 1)  # the first window ending after `one` starts
    start = many.at + k * many.every
    return (one.at, start) if start < one.at + one.length else None


def _many_and_many(a: Train, b: Train) -> tuple[int, int] | None:
    assert a.every is not None
    assert b.every is not None
    g = math.gcd(a.every, b.every)
    r = b.at - a.at
    rest = (r + b.length) % g
    gap = -b.length + (rest or g)  # the smallest gap > -b.length in r's class
    if gap >= a.length:
        return None
    # j*q' - i*p' = k with p' = a.every/g, q' = b.every/g coprime: the least j >= 0 whose i is >= 0 too
    p, q, k = a.every // g, b.every // g, (gap - r) // g
    j = k * pow(q, -1, p) % p if p > 1 else 0
    i = (j * q - k) // p
    if i < 0:
        steps = -(i // q)  # ceil(-i / q)
        i, j = i + steps * q, j + steps * p
    return a.at + i * a.every, b.at + j * b.every


def first_overlap(a: Train, b: Train) -> tuple[int, int] | None:
    """The starts of one window of `a` and one of `b` that overlap, or None when none ever does."""
    if a.every is None and b.every is None:
        return (a.at, b.at) if a.at < b.at + b.length and b.at < a.at + a.length else None
    if a.every is None:
        return _one_and_many(a, b)
    if b.every is None:
        found = _one_and_many(b, a)
        return None if found is None else (found[1], found[0])
    return _many_and_many(a, b)
