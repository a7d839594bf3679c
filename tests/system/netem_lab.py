"""The host's side of the netem lab tests: read lab_probe's packets against what the kernel promises
(its own arithmetic, reproduced here, is the ground truth). conftest's `lab` runs the specs."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable

import numpy as np

from faults.injectors.netem import table

NETEM_DIST_SCALE = 8192


def probe(name: str, count: int, gap_ms: float = 1.0, **more: object) -> dict:
    return {"name": name, "from": "b", "port": 9000, "count": count, "gap_ms": gap_ms, **more}


def delays(result: dict, first_only: bool = True) -> np.ndarray:
    """One-way delays (ms) in send order: each packet's first arrival, or every arrival."""
    sent = dict(result["sent"])
    seen: dict[int, int] = {}
    every = []
    for seq, t in result["received"]:
        every.append((seq, (t - sent[seq]) / 1e6))
        seen.setdefault(seq, t)
    if not first_only:
        return np.array([d for _, d in every])
    return np.array([(seen[s] - sent[s]) / 1e6 for s, _ in result["sent"] if s in seen])


def lost(result: dict) -> np.ndarray:
    """Per packet sent, in order: whether it never arrived."""
    got = {seq for seq, _ in result["received"]}
    return np.array([seq not in got for seq, _ in result["sent"]])


def copies(result: dict) -> np.ndarray:
    """Per packet sent, in order: how many times it arrived."""
    n = Counter(seq for seq, _ in result["received"])
    return np.array([n[seq] for seq, _ in result["sent"]])


def table_delays_ms(name: str, delay_ms: float, jitter_ms: float) -> np.ndarray:
    """The delays netem draws from iproute2's table `name` (one per entry, equally likely): the
    kernel's tabledist(), integer for integer, in ns; below zero is sent at once."""
    t = np.frombuffer(table(name), dtype=np.int16).astype(np.int64)
    mu, sigma = int(delay_ms * 1e6), int(jitter_ms * 1e6)
    x = (sigma % NETEM_DIST_SCALE) * t
    x = np.where(x >= 0, x + NETEM_DIST_SCALE // 2, x - NETEM_DIST_SCALE // 2)
    ns = np.trunc(x / NETEM_DIST_SCALE).astype(np.int64) + (sigma // NETEM_DIST_SCALE) * t + mu
    return np.sort(np.maximum(ns, 0)) / 1e6


def empirical_cdf(atoms: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: np.searchsorted(atoms, x, side="right") / len(atoms)


def draws(rho_pct: float, n: int, seed: int = 7) -> np.ndarray:
    """n of netem's correlated 32-bit draws (get_crandom() with rho), the kernel's integer arithmetic."""
    rng = random.Random(seed)
    rho = int((2**32 - 1) * rho_pct / 100) + 1
    last, out = rng.getrandbits(32), np.empty(n, dtype=np.int64)
    for i in range(n):
        last = (rng.getrandbits(32) * (2**32 - rho) + last * rho) >> 32
        out[i] = last
    return out


def crandom(pct: float, rho_pct: float, n: int) -> np.ndarray:
    """n events of a correlated probability (netem's `p >= draw`): what a correlation promises."""
    return int((2**32 - 1) * pct / 100) >= draws(rho_pct, n)


def after(events: np.ndarray) -> float:
    """P(event | the previous one was an event)."""
    return float(events[1:][events[:-1]].mean())


def binomial_sd(p: float, n: int) -> float:
    return float(np.sqrt(p * (1 - p) / n))
