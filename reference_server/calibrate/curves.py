"""Published latency curves (YAML): a server measured at constant request rates, with the workload
it was driven with. Named ones ship beside this module (curves/NAME.yaml); a user's own published
figures are a file of the same shape (`llmchaos calibrate --curves NAME|FILE`).

    name: vllm-llama3-8b-h100
    source: where the figures come from
    server: {max_num_seqs: 128, prefix_caching: false}   # the measured server's limits
    workload: {prompt_tokens: 205, shared_prefix_tokens: 128, output_tokens: 64, simulate_s: 30}
    start: {overhead_us: 2000, ...}                     # the fit's first guess (a profile's step)
    levels:                                             # ms; a level may set its own prompt/output
      - {rate: 31, ttft_p50_ms: 29.3, ttft_p90_ms: 35.6, per_token_ms: 8.16}
      - {rate: 123, throughput: 101.2, per_token_ms: 19.57}   # overload: the completion rate
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmchaos import yamlfile
from llmchaos.errors import UsageError
from reference_server import profile
from reference_server.calibrate.level import Level, Stats
from reference_server.calibrate.virtual import Arrival
from reference_server.profile import Limits, StepModel

NAMED = Path(__file__).with_name("curves")
WARMUP_S = 5.0  # of an overload level: completions before this are left out of its rate
WORKLOAD = {
    "prompt_tokens": ("prompt", "count", 1),
    "shared_prefix_tokens": ("shared", "count0", 1),
    "output_tokens": ("output", "count", 1),
    "simulate_s": ("seconds", "number", 1.0),
}
LEVEL = {
    "rate": ("rate", "number", 1.0),
    "simulate_s": ("seconds", "number", 1.0),
    "prompt_tokens": ("prompt", "count", 1),
    "output_tokens": ("output", "count", 1),
    "ttft_p50_ms": ("ttft_p50", "number", 1e-3),
    "ttft_p90_ms": ("ttft_p90", "number", 1e-3),
    "per_token_ms": ("per_token", "number", 1e-3),
    "throughput": ("throughput", "number", 1.0),
}


@dataclass(frozen=True)
class Curves:
    name: str
    source: str
    limits: Limits  # the measured server's
    start: StepModel | None  # the fit's first guess
    levels: tuple[Level, ...]


def names() -> list[str]:
    return sorted(p.stem for p in NAMED.glob("*.yaml"))


def load(name_or_path: str, seed: int = 0) -> Curves:
    path = Path(name_or_path)
    if not path.is_file():
        if name_or_path not in names():
            raise UsageError(f"no curves file or named curves {name_or_path!r} (named: {', '.join(names())})")
        path = NAMED / f"{name_or_path}.yaml"
    r = yamlfile.Reader(str(path))
    top = r.mapping(yamlfile.compose(str(path)), "", "curves are a mapping (name, source, levels, ...)")
    for key, (k, _) in top.items():
        if key not in ("name", "source", "server", "workload", "start", "levels"):
            raise r.fail(k, key, "unknown field")
    for key in ("name", "source", "workload", "levels"):
        if key not in top:
            raise UsageError("missing", file=str(path), field=key)
    work = {"shared": 0, "seconds": 30.0, **profile.section(r, top["workload"][1], "workload", WORKLOAD)}
    if "prompt" not in work or "output" not in work:
        raise r.fail(top["workload"][1], "workload", "needs prompt_tokens and output_tokens")
    items = top["levels"][1]
    if not isinstance(items, yamlfile.yaml.SequenceNode) or not items.value:
        raise r.fail(items, "levels", "must be a non-empty list")
    levels = tuple(_level(r, node, f"levels[{i}]", work, seed + i) for i, node in enumerate(items.value))
    start = profile.section(r, top["start"][1], "start", profile.STEP) if "start" in top else {}
    return Curves(
        str(r.value(top["name"][1], "name")),
        str(r.value(top["source"][1], "source")),
        Limits(**(profile.section(r, top["server"][1], "server", profile.LIMITS) if "server" in top else {})),
        StepModel(**start) if start else None,
        levels,
    )


def _level(r: yamlfile.Reader, node: yamlfile.yaml.Node, where: str, work: dict[str, Any], seed: int) -> Level:
    v = {**work, **profile.section(r, node, where, LEVEL)}
    if "rate" not in v or ("ttft_p50" not in v and "per_token" not in v and "throughput" not in v):
        raise r.fail(node, where, "needs rate and at least one measured figure")
    if v["shared"] >= v["prompt"]:
        raise r.fail(node, where, "shared_prefix_tokens must be fewer than prompt_tokens")
    rng, t, arrivals = random.Random(seed), 0.0, []
    while (t := t + rng.expovariate(v["rate"])) < v["seconds"]:
        arrivals.append(Arrival(t, v["prompt"], v["output"], v["shared"]))
    measured = Stats(v.get("ttft_p50"), v.get("ttft_p90"), v.get("per_token"), v.get("throughput"))
    return Level(f"{v['rate']:g} req/s", tuple(arrivals), measured, "p50_difference", WARMUP_S)
