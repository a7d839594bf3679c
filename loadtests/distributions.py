"""Stated distributions a test draws from (a conversation's turns, its think times): from a flag
(`N`, `A-B`: constant or uniform) or a load profile's mapping in the form `vllm bench`'s
multi-turn generator reads (`{distribution: uniform, min: 4, max: 8}`), plus `exponential` for
think times. Each draw is seeded by the caller's generator, so a run repeats its draws."""

from __future__ import annotations

import math
import random
import sys
from dataclasses import dataclass

import numpy as np
import yaml

from llmchaos import yamlfile
from llmchaos.errors import UsageError
from llmchaos.units import duration

FIELDS = {  # each distribution's fields: required, optional
    "constant": (("value",), ()),
    "uniform": (("min", "max"), ()),
    "exponential": (("average",), ("max",)),
    "lognormal": ((), ("average", "median_ratio", "mean", "sigma", "max")),
    "poisson": (("alpha",), ("max",)),
    "zipf": (("alpha",), ("max",)),
}
MEDIAN_RATIO = 0.85  # lognormal by its average: median over mean when none is given (vLLM's default)
POISSON_MAX = 1e9  # numpy's Poisson sampler refuses a mean near 1e19; no count or time wants more


@dataclass(frozen=True)
class Distribution:
    """One stated distribution. `whole`: draws are whole numbers >= 1 (counts), else seconds >= 0.
    Lognormal is `exp(N(mu, sigma))`; `cap` bounds every draw (a profile's `max`)."""

    name: str
    whole: bool
    low: float = 0.0  # constant's value, uniform's min
    high: float = 0.0  # constant's value, uniform's max
    mean: float = 0.0  # exponential's average, poisson's alpha (its mean)
    mu: float = 0.0  # lognormal
    sigma: float = 0.0  # lognormal
    alpha: float = 0.0  # zipf's exponent
    cap: float = math.inf

    def draw(self, rng: random.Random) -> float:
        """One draw (an int's value when `whole`, at most sys.maxsize)."""
        if self.name in ("constant", "uniform"):
            v: float = rng.randint(int(self.low), int(self.high)) if self.whole else rng.uniform(self.low, self.high)
        elif self.name == "exponential":
            v = rng.expovariate(1.0 / self.mean) if self.mean > 0 else 0.0
        elif self.name == "lognormal":
            try:
                v = rng.lognormvariate(self.mu, self.sigma)
            except OverflowError:  # exp() of a far tail: past any cap
                v = math.inf
        else:  # numpy's samplers, seeded from the caller's generator (random has neither)
            gen = np.random.default_rng(rng.getrandbits(64))
            v = float(gen.poisson(self.mean) if self.name == "poisson" else gen.zipf(self.alpha))
        v = min(v, self.cap)
        return float(max(1, round(min(v, sys.maxsize)))) if self.whole else v

    def draw_int(self, rng: random.Random) -> int:
        return int(self.draw(rng))

    def to_json(self) -> dict[str, str | float]:
        """As a profile states it (a lognormal by its normal's mean and sigma): run.json's record,
        which `load` reads back to the same distribution."""
        out: dict[str, str | float] = {"distribution": self.name}
        if self.name == "constant":
            out["value"] = self.low
        elif self.name == "uniform":
            out |= {"min": self.low, "max": self.high}
        elif self.name == "exponential":
            out["average"] = self.mean
        elif self.name == "lognormal":
            out |= {"mean": self.mu, "sigma": self.sigma}
        else:
            out["alpha"] = self.mean if self.name == "poisson" else self.alpha
        if math.isfinite(self.cap):
            out["max"] = self.cap
        return out


def parse(text: str, flag: str, whole: bool) -> Distribution:
    """A flag's `A` (constant) or `A-B` (uniform): whole numbers >= 1 (`whole`), else durations
    (`2s`, `500ms-3s`)."""
    parts = text.split("-")
    if len(parts) > 2 or not all(p.strip() for p in parts):
        raise UsageError(f"give A or A-B, got {text!r}", field=flag)
    if whole:
        if not all(p.strip().isdigit() and int(p) >= 1 for p in parts):
            raise UsageError(f"give whole numbers >= 1, got {text!r}", field=flag)
        values = [float(p) for p in parts]
    else:
        values = [duration(p.strip(), flag) for p in parts]
    low, high = values[0], values[-1]
    if high < low:
        raise UsageError(f"the range runs backwards: {text!r}", field=flag)
    return Distribution("constant" if len(parts) == 1 else "uniform", whole, low, high)


def load(r: yamlfile.Reader, node: yaml.Node, where: str, whole: bool) -> Distribution:
    """A profile's distribution at `node`: a flag's text (`4-8`, `2s`) or a mapping naming its
    `distribution` and that one's fields; counts are whole numbers, times durations."""
    if isinstance(node, yaml.ScalarNode):
        try:
            return parse(str(r.value(node, where)), where, whole)
        except UsageError as e:
            raise r.fail(node, where, e.message) from None
    fields = r.mapping(node, where, "give A, A-B or a mapping with 'distribution'")
    if "distribution" not in fields:
        raise r.fail(node, f"{where}.distribution", f"missing (one of {', '.join(FIELDS)})")
    name = r.value(fields["distribution"][1], f"{where}.distribution")
    if name not in FIELDS:
        raise r.fail(fields["distribution"][1], f"{where}.distribution", f"one of {', '.join(FIELDS)}, got {name!r}")
    required, optional = FIELDS[name]
    for key, (k, _) in fields.items():
        if key != "distribution" and key not in required + optional:
            raise r.fail(k, f"{where}.{key}", f"not a field of {name}")
    for key in required:
        if key not in fields:
            raise r.fail(node, f"{where}.{key}", f"missing ({name} needs {', '.join(required)})")
    v = {key: _number(r, fields[key][1], f"{where}.{key}", whole) for key in fields if key != "distribution"}
    cap = v.get("max", math.inf)
    if name == "constant":
        return Distribution(name, whole, v["value"], v["value"])
    if name == "uniform":
        if v["max"] < v["min"]:
            raise r.fail(fields["max"][0], f"{where}.max", f"below min ({v['min']:g})")
        return Distribution(name, whole, v["min"], v["max"])
    if name == "exponential":
        return Distribution(name, whole, mean=v["average"], cap=cap)
    if name == "poisson":
        if v["alpha"] > POISSON_MAX:
            raise r.fail(fields["alpha"][0], f"{where}.alpha", f"at most {POISSON_MAX:g}, got {v['alpha']:g}")
        return Distribution(name, whole, mean=v["alpha"], cap=cap)
    if name == "zipf":
        if v["alpha"] <= 1:
            raise r.fail(fields["alpha"][0], f"{where}.alpha", f"zipf needs alpha > 1, got {v['alpha']:g}")
        return Distribution(name, whole, alpha=v["alpha"], cap=cap)
    return _lognormal(r, node, where, whole, v, fields)


def _lognormal(
    r: yamlfile.Reader,
    node: yaml.Node,
    where: str,
    whole: bool,
    v: dict[str, float],
    fields: dict[str, tuple[yaml.Node, yaml.Node]],
) -> Distribution:
    """Lognormal by its `average` (and the median's share of it) or by the normal's `mean` and `sigma`."""
    cap = v.get("max", math.inf)
    if "average" in v:
        for key in ("mean", "sigma"):
            if key in v:
                raise r.fail(fields[key][0], f"{where}.{key}", "give average (and median_ratio) or mean and sigma")
        ratio = v.get("median_ratio", MEDIAN_RATIO)
        if not 0 < ratio < 1:
            raise r.fail(fields["median_ratio"][0], f"{where}.median_ratio", f"between 0 and 1, got {ratio:g}")
        if v["average"] <= 0:
            raise r.fail(fields["average"][0], f"{where}.average", "must be above 0")
        # mean = exp(mu + sigma^2/2), median = exp(mu): sigma^2 = 2 ln(mean/median)
        return Distribution("lognormal", whole, mu=math.log(v["average"] * ratio),
                            sigma=math.sqrt(-2 * math.log(ratio)), cap=cap)  # fmt: skip
    for key in ("mean", "sigma"):
        if key not in v:
            raise r.fail(node, f"{where}.{key}", "missing (lognormal needs average, or mean and sigma)")
    if "median_ratio" in v:
        raise r.fail(fields["median_ratio"][0], f"{where}.median_ratio", "read only with average")
    return Distribution("lognormal", whole, mu=v["mean"], sigma=v["sigma"], cap=cap)


def _number(r: yamlfile.Reader, node: yaml.Node, where: str, whole: bool) -> float:
    """A field's number. A draw's own values (value, min, max; a time's average too) are whole
    counts >= 1 (`whole`) or durations (`2s`; a bare number is seconds); a shape's parameter is a
    number, >= 0 but a lognormal's mean (the log of its median)."""
    raw, key = r.value(node, where), where.rsplit(".", 1)[-1]
    own = key in ("value", "min", "max") or (key == "average" and not whole)
    if own and not whole and isinstance(raw, str):
        return duration(raw, where, r.path, yamlfile.line(node))
    if not isinstance(raw, (int, float)) or isinstance(raw, bool) or not math.isfinite(raw):
        raise r.fail(node, where, f"must be a {'duration' if own and not whole else 'number'}, got {raw!r}")
    if own and whole and (raw != int(raw) or raw < 1):
        raise r.fail(node, where, f"must be a whole number >= 1, got {raw!r}")
    if raw < 0 and key != "mean":
        raise r.fail(node, where, f"must be >= 0, got {raw!r}")
    return float(raw)
