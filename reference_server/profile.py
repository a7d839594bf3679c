"""A profile: what the stand-in server is. Its step-time model (the sim executor's), its limits, and
which seed mechanisms are on (the output pacer, a per-language policy, reasoning).

Named profiles ship as YAML beside this module (reference_server/profiles/NAME.yaml); a user's own is
a file of the same shape (`llmchaos serve --profile NAME|FILE`), every field optional over `base:`
(a named profile) or the defaults here. `llmchaos calibrate` writes them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from llmchaos.errors import UsageError

if TYPE_CHECKING:  # the YAML is read and written by functions that import it: `serve --help` needs none
    import yaml

    from llmchaos import yamlfile

NAMED = Path(__file__).with_name("profiles")
DEFAULT = "vllm-llama3-8b-h100"
POLICIES = ("fcfs", "wfq", "two-level")
REASONING_FIELDS = ("reasoning_content", "reasoning")
H100_CLOCKS = (1980.0, 210.0)  # H100 SXM's boost and lowest supported graphics clocks, MHz
H100_NAME = "NVIDIA H100 80GB HBM3"  # the name NVML gives an H100 SXM (dcgm-exporter's modelName)


@dataclass(frozen=True)
class StepModel:
    """One engine step on the simulated device, in seconds at its full clock: a roofline.

    The step's math (prefill and decode tokens) and its weight reads overlap, so the larger of the two
    bounds it; the KV reads of the context attended and the CPU's own overhead add to it. Locking the
    graphics clock stretches only the math: `time(..., slowdown)`.
    """

    overhead: float = 0.0  # every step's fixed part: the CPU's work, and whatever else the clock does not move
    memory: float = 0.0  # the weights read once per step: a floor under its math
    prefill_token: float = 0.0  # math per prompt token computed (not cached)
    decode_token: float = 0.0  # math per decoded token
    context_token: float = 0.0  # KV read per context token attended by a sequence in the step
    wake: float = 0.0  # added to a step that finds the engine idle (its loop and the GPU's clocks waking)
    jitter: float = 0.0  # sigma of a seeded log-normal factor on every step
    frontend: float = 0.0  # request received to admitted (API server, tokenizer, IPC): no device time
    frontend_sigma: float = 0.0  # sigma of its log-normal draw per request

    def time(self, prefill: int, decode: int, context: int, slowdown: float = 1.0) -> float:
        compute = slowdown * (self.prefill_token * prefill + self.decode_token * decode)
        return self.overhead + max(self.memory, compute) + self.context_token * context

    def scaled(self, factor: float, jitter: float | None = None) -> StepModel:
        """Every time multiplied by `factor` (0: every step free, admission at once)."""
        times = {f.name: getattr(self, f.name) * factor for f in fields(self) if f.name in _TIMES}
        return replace(self, **times, jitter=self.jitter if jitter is None else jitter)


_TIMES = ("overhead", "memory", "prefill_token", "decode_token", "context_token", "wake", "frontend")


@dataclass(frozen=True)
class Power:
    """The simulated board's power, in watts: `idle_w` with no step running, and during a step

        idle_w + dynamic_w * occupancy(tokens) * (locked clock / max clock) ** clock_exponent

    where a step's batch occupancy is min(1, tokens / full_batch_tokens) ** occupancy_exponent, its
    tokens the prompt tokens it computes plus its decoded ones: the share of the chip a batch of that
    many tokens keeps busy. The board saturates where the step turns compute-bound (the roofline's
    ridge: a few hundred tokens for an 8B in bf16 on an H100), whatever the scheduler's own budget
    (max_num_batched_tokens is a knob, not a property of the chip); below, even one decoded token keeps
    the HBM streaming the weights, so a small exponent gives memory-bound decode its high floor. Dynamic
    power follows the graphics clock as f x V^2 does with V falling along the DVFS curve: a
    `clock_exponent` between 1 (V at its floor) and 3 (V in proportion to f). A pure function of the
    batch and the clock; the sim integrates it over time (reference_server/executors/power.py).
    The defaults are the H100 fit of the named profiles (their `power.source` says where from)."""

    idle_w: float = 73.0
    dynamic_w: float = 615.0  # what a full step adds at the max clock: idle_w + dynamic_w <= board_limit_w
    board_limit_w: float = 700.0
    full_batch_tokens: int = 320
    occupancy_exponent: float = 0.145
    clock_exponent: float = 1.5
    source: str = ""  # where the figures come from

    def occupancy(self, tokens: int) -> float:
        return min(1.0, tokens / self.full_batch_tokens) ** self.occupancy_exponent

    def step_w(self, tokens: int, clock_ratio: float) -> float:
        """The board's power during a step of `tokens` at `clock_ratio` (locked / max clock)."""
        return self.idle_w + self.dynamic_w * self.occupancy(tokens) * clock_ratio**self.clock_exponent


@dataclass(frozen=True)
class Limits:
    max_model_len: int = 131072
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 2048
    block_size: int = 16
    num_blocks: int = 27000
    prefix_caching: bool = True
    max_waiting: int = 1024  # past this many waiting requests, 429


@dataclass(frozen=True)
class Reasoning:
    """Thinking before the answer: a request that does not say how long thinks a log-normal draw."""

    median: int = 0  # tokens (0: no thinking unless the request asks)
    sigma: float = 0.0
    max: int = 0  # 0: no cap but max_tokens
    openai_field: str = "reasoning_content"  # the chat delta's field (newer vLLM: reasoning)


@dataclass(frozen=True)
class KVCache:
    """The KV cache as a disaggregated cluster sends it: bytes per prompt token (layers x KV heads x
    head dim x K,V x bytes per value) over a prefill -> decode link of `link_gbps`."""

    bytes_per_token: int = 131072  # Llama-3-8B in fp16: 32 x 8 x 128 x 2 x 2
    link_gbps: float = 100.0  # one 100 Gb/s RDMA port between the prefill and the decode GPU


@dataclass(frozen=True)
class Profile:
    name: str = "custom"
    about: str = ""  # what it stands in for, and where its limits come from
    source: str = ""  # where its step model comes from (calibrate writes it)
    model_name: str = "llmchaos-sim-8b"
    step: StepModel = StepModel()
    gpu_name: str = H100_NAME  # the simulated device, as NVML names it
    max_clock_mhz: float = H100_CLOCKS[0]
    min_clock_mhz: float = H100_CLOCKS[1]
    power: Power = Power()
    limits: Limits = Limits()
    pacer_rate: float = 0.0  # tokens/s per stream (0: off)
    pacer_max_gap: float = 0.2
    policy: str = "fcfs"
    reasoning: Reasoning = Reasoning()
    kv: KVCache = KVCache()
    fitted: dict[str, Any] = field(default_factory=dict, compare=False)  # how the step model was fitted


def names() -> list[str]:
    return sorted(p.stem for p in NAMED.glob("*.yaml"))


def load(name_or_path: str) -> Profile:
    """A named profile, or a profile file; every error names the file, line and field."""
    path = Path(name_or_path)
    if not path.is_file():
        if "/" in name_or_path or name_or_path.endswith((".yaml", ".yml")) or name_or_path not in names():
            raise UsageError(f"no profile file or named profile {name_or_path!r} (named: {', '.join(names())})")
        path = NAMED / f"{name_or_path}.yaml"
    return _read(str(path), set())


# -- the YAML -------------------------------------------------------------------------------------
US, MS = 1e-6, 1e-3
STEP_MOST_US, TOKEN_MOST_US = 60e6, 1e6  # a step's fixed part at most a minute, its part per token a second
SIGMA_MOST = 3.0  # a log-normal sigma: e^3 at one sigma is already a factor of 20
TOKENS_MOST = 10_000_000  # the longest context any model serves (Llama 4 Scout's)
BLOCKS_MOST = 10_000_000  # KV blocks: 160 M tokens at 16 a block, beyond any one GPU (each costs ~100 B here)
WATTS_MOST = 10_000.0  # a board's power: ten times the largest data-center GPU's limit today


class Spec(NamedTuple):
    """A YAML field: its attribute, its kind (time, number, count, count0, bool, text, or a choice), the
    unit its value is multiplied by, and its largest value in the YAML's own unit."""

    attr: str
    kind: str | tuple[str, ...]
    unit: float = 1.0
    most: float = math.inf


STEP = {
    "overhead_us": Spec("overhead", "time", US, STEP_MOST_US),
    "memory_us": Spec("memory", "time", US, STEP_MOST_US),
    "prefill_token_us": Spec("prefill_token", "time", US, TOKEN_MOST_US),
    "decode_token_us": Spec("decode_token", "time", US, TOKEN_MOST_US),
    "context_token_us": Spec("context_token", "time", US, TOKEN_MOST_US),
    "wake_us": Spec("wake", "time", US, STEP_MOST_US),
    "jitter": Spec("jitter", "time", 1.0, SIGMA_MOST),
    "frontend_ms": Spec("frontend", "time", MS, STEP_MOST_US / 1000),
    "frontend_sigma": Spec("frontend_sigma", "time", 1.0, SIGMA_MOST),
}
LIMITS = {
    "max_model_len": Spec("max_model_len", "count", 1, TOKENS_MOST),
    "max_num_seqs": Spec("max_num_seqs", "count", 1, 65_536),
    "max_num_batched_tokens": Spec("max_num_batched_tokens", "count", 1, TOKENS_MOST),
    "block_size": Spec("block_size", "count", 1, 1024),
    "num_blocks": Spec("num_blocks", "count", 1, BLOCKS_MOST),
    "prefix_caching": Spec("prefix_caching", "bool"),
    "max_waiting": Spec("max_waiting", "count", 1, 1_000_000),
}
REASONING = {
    "median": Spec("median", "count0", 1, TOKENS_MOST),
    "sigma": Spec("sigma", "time", 1.0, SIGMA_MOST),
    "max": Spec("max", "count0", 1, TOKENS_MOST),
    "openai_field": Spec("openai_field", REASONING_FIELDS),
}
DEVICE = {
    "name": Spec("gpu_name", "text"),
    "max_clock_mhz": Spec("max_clock_mhz", "number", 1.0, 10_000),
    "min_clock_mhz": Spec("min_clock_mhz", "number", 1.0, 10_000),
}
POWER = {
    "idle_w": Spec("idle_w", "time", 1.0, WATTS_MOST),
    "dynamic_w": Spec("dynamic_w", "time", 1.0, WATTS_MOST),
    "board_limit_w": Spec("board_limit_w", "number", 1.0, WATTS_MOST),
    "full_batch_tokens": Spec("full_batch_tokens", "count", 1, TOKENS_MOST),
    "occupancy_exponent": Spec("occupancy_exponent", "number", 1.0, 3.0),
    "clock_exponent": Spec("clock_exponent", "number", 1.0, 3.0),
    "source": Spec("source", "text"),
}
KV = {
    "bytes_per_token": Spec("bytes_per_token", "count", 1, 1 << 30),
    "link_gbps": Spec("link_gbps", "number", 1.0, 100_000),
}
PACER = {"rate": Spec("pacer_rate", "time", 1.0, 1e6), "max_gap": Spec("pacer_max_gap", "number", 1.0, 60)}
TOP = {
    "name",
    "about",
    "source",
    "model_name",
    "base",
    "policy",
    "fitted",
    "step",
    "device",
    "power",
    "limits",
    "pacer",
    "reasoning",
    "kv",
}


def _read(path: str, seen: set[str]) -> Profile:
    from llmchaos import yamlfile

    root, r = yamlfile.compose(path), yamlfile.Reader(path)
    top = r.mapping(root, "", "a profile is a mapping (name, step, limits, ...)")
    for key, (k, _) in top.items():
        if key not in TOP:
            raise r.fail(k, key, f"unknown field (fields: {', '.join(sorted(TOP))})")
    base = Profile()
    if "base" in top:
        name = _text(r, top["base"][1], "base")
        if name not in names() or name in seen:
            raise r.fail(top["base"][1], "base", f"must name another profile ({', '.join(names())})")
        base = _read(str(NAMED / f"{name}.yaml"), seen | {name})
    texts: dict[str, Any] = {k: _text(r, top[k][1], k) for k in ("name", "about", "source", "model_name") if k in top}
    policy = _value(r, top["policy"][1], "policy", POLICIES) if "policy" in top else base.policy
    step = replace(base.step, **section(r, _node(top, "step"), "step", STEP))
    limits = replace(base.limits, **section(r, _node(top, "limits"), "limits", LIMITS))
    reasoning = replace(base.reasoning, **section(r, _node(top, "reasoning"), "reasoning", REASONING))
    kv = replace(base.kv, **section(r, _node(top, "kv"), "kv", KV))
    device = section(r, _node(top, "device"), "device", DEVICE)
    power = base.power
    if "power" in top:  # figures of its own: not the base's provenance, unless it gives its own
        power = replace(base.power, **{"source": ""} | section(r, top["power"][1], "power", POWER))
        _check_power(r, top["power"][1], power)
    pacer = {"pacer_rate": 0.0} if _off(r, top.get("pacer")) else section(r, _node(top, "pacer"), "pacer", PACER)
    if "step" in top:  # a step model of its own: the base's provenance is not its
        base = replace(base, source="", fitted={})
    fitted = r.value(top["fitted"][1], "fitted") if "fitted" in top else base.fitted
    if not isinstance(fitted, dict):
        raise r.fail(top["fitted"][1], "fitted", "must be a mapping")
    profile = replace(
        base,
        **device,
        **pacer,
        step=step,
        power=power,
        limits=limits,
        reasoning=reasoning,
        kv=kv,
        policy=policy,
        fitted=fitted,
    )
    profile = replace(profile, **texts)
    _check(r, root, profile)
    return profile


def _check(r: yamlfile.Reader, root: yaml.Node, p: Profile) -> None:
    """What no one field shows wrong: the clock range, a KV pool that cannot hold one longest request."""
    if not 0 < p.min_clock_mhz <= p.max_clock_mhz:
        raise r.fail(root, "device", "needs 0 < min_clock_mhz <= max_clock_mhz")
    need = kv_blocks_needed(p.limits)
    if p.limits.num_blocks < need:
        raise r.fail(root, "limits.num_blocks", f"must hold one max_model_len request: at least {need}")


def _check_power(r: yamlfile.Reader, node: yaml.Node, p: Power) -> None:
    if p.clock_exponent < 1:
        raise r.fail(node, "power.clock_exponent", f"must be between 1 and 3 (f x V^2), got {p.clock_exponent:g}")
    if p.idle_w + p.dynamic_w > p.board_limit_w:
        raise r.fail(
            node,
            "power.dynamic_w",
            f"idle_w + dynamic_w ({p.idle_w + p.dynamic_w:g} W) must not exceed board_limit_w ({p.board_limit_w:g} W)",
        )


def kv_blocks_needed(limits: Limits, watermark: float = 0.01) -> int:
    """The fewest blocks with which one request of max_model_len is admitted past the watermark (the
    block manager keeps int(watermark x blocks) free)."""
    per = -(-limits.max_model_len // limits.block_size)
    n = per + int(watermark * per)  # then a step or two: int() floors
    while n - int(watermark * n) < per:
        n += 1
    return n


def _block(text: str, indent: str = "  ") -> str:
    """`text` as the lines of a YAML literal block."""
    return "".join(f"{indent}{line}\n" for line in text.strip().splitlines()) or f"{indent}(none)\n"


def _node(top: dict[str, tuple[yaml.Node, yaml.Node]], name: str) -> yaml.Node | None:
    return top[name][1] if name in top else None


def _off(r: yamlfile.Reader, item: tuple[yaml.Node, yaml.Node] | None) -> bool:
    return item is not None and r.value(item[1], "pacer") in (False, "off")


def _text(r: yamlfile.Reader, node: yaml.Node, where: str) -> str:
    value = r.value(node, where)
    if not isinstance(value, str) or not value.strip():
        raise r.fail(node, where, f"must be text, got {value!r}")
    return value


def section(r: yamlfile.Reader, node: yaml.Node | None, name: str, schema: dict) -> dict[str, Any]:
    """A section's fields (none when it is not there), checked and in the units of the dataclasses."""
    if node is None:
        return {}
    out = {}
    for key, (k, v) in r.mapping(node, name).items():
        where = f"{name}.{key}"
        if key not in schema:
            raise r.fail(k, where, f"unknown field (fields: {', '.join(schema)})")
        spec = Spec(*schema[key])
        value = _value(r, v, where, spec.kind)
        if spec.kind not in ("bool", "text") and not isinstance(spec.kind, tuple) and value > spec.most:
            raise r.fail(v, where, f"must be at most {spec.most:g}, got {value!r}")
        out[spec.attr] = value * spec.unit if spec.kind in ("time", "number") else value
    return out


def _value(r: yamlfile.Reader, node: yaml.Node, where: str, kind: str | tuple[str, ...]) -> Any:  # noqa: ANN401 - the kind says
    value: Any = r.value(node, where)
    if isinstance(kind, tuple):
        if value not in kind:
            raise r.fail(node, where, f"must be one of {', '.join(kind)}, got {value!r}")
        return value
    if kind == "text":
        return _text(r, node, where)
    if kind == "bool":
        if not isinstance(value, bool):
            raise r.fail(node, where, f"must be true or false, got {value!r}")
        return value
    number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if kind in ("count", "count0"):
        if not (number and float(value).is_integer() and value >= (kind == "count")):
            raise r.fail(node, where, f"must be a whole number >= {int(kind == 'count')}, got {value!r}")
        return int(value)
    if not number or value < 0 or (kind == "number" and value == 0):
        raise r.fail(
            node, where, f"must be a {'positive' if kind == 'number' else 'non-negative'} number, got {value!r}"
        )
    return float(value)


def dump(p: Profile) -> str:
    """The profile as `load` reads it, every field with what it means."""
    import yaml

    s, lim, rs, pw = p.step, p.limits, p.reasoning, p.power
    about, source = (_block(text) for text in (p.about, p.source))
    pacer = f"{{rate: {p.pacer_rate:g}, max_gap: {p.pacer_max_gap:g}}}" if p.pacer_rate else "off"
    fitted = yaml.safe_dump({"fitted": p.fitted}, sort_keys=False, width=110) if p.fitted else ""
    return f"""\
name: {p.name}
model_name: {p.model_name}
about: |
{about}\
source: |
{source}\
# One engine step at the full clock = overhead + max(memory, prefill + decode math) + context reads;
# a locked graphics clock stretches only the math (x max/locked).
step:
  overhead_us: {s.overhead / US:.6g}         # every step's fixed part: the CPU's work, nothing the clock moves
  memory_us: {s.memory / US:.6g}           # weights read once per step: a floor under its math (roofline)
  prefill_token_us: {s.prefill_token / US:.6g}    # math per prompt token computed (not cached)
  decode_token_us: {s.decode_token / US:.6g}     # math per decoded token
  context_token_us: {s.context_token / US:.6g}    # KV read per context token each sequence attends
  wake_us: {s.wake / US:.6g}             # added to a step that finds the engine idle
  jitter: {s.jitter:g}              # sigma of a log-normal factor per step
  frontend_ms: {s.frontend / MS:.6g}         # request received to admitted (API server, tokenizer)
  frontend_sigma: {s.frontend_sigma:g}      # sigma of its log-normal draw per request
device:
  name: {json.dumps(p.gpu_name)}
  max_clock_mhz: {p.max_clock_mhz:g}
  min_clock_mhz: {p.min_clock_mhz:g}
# Board power, W: idle_w between steps; during one, idle_w + dynamic_w x occupancy x (locked/max clock)^clock_exponent,
# occupancy = min(1, tokens / full_batch_tokens)^occupancy_exponent (tokens: prompt tokens computed + decoded).
power:
  idle_w: {pw.idle_w:g}
  dynamic_w: {pw.dynamic_w:g}       # a full step at the max clock; idle_w + dynamic_w <= board_limit_w
  board_limit_w: {pw.board_limit_w:g}
  full_batch_tokens: {pw.full_batch_tokens}   # the tokens a step computes that keep the whole chip busy
  occupancy_exponent: {pw.occupancy_exponent:g}
  clock_exponent: {pw.clock_exponent:g}     # 1 (voltage at its floor) .. 3 (voltage in proportion to the clock)
  source: |
{_block(pw.source, "    ")}\
limits:
  max_model_len: {lim.max_model_len}   # longer requests get 400, as vLLM's
  max_num_seqs: {lim.max_num_seqs}
  max_num_batched_tokens: {lim.max_num_batched_tokens}   # per step; prompts longer are prefilled in chunks
  block_size: {lim.block_size}
  num_blocks: {lim.num_blocks}      # the KV pool; short of blocks, requests wait and the newest is preempted
  prefix_caching: {str(lim.prefix_caching).lower()}
  max_waiting: {lim.max_waiting}     # waiting requests past this get 429
pacer: {pacer}                # the seeds' output pacer (tokens/s per stream); off in vLLM
policy: {p.policy}               # fcfs (vLLM's) | wfq (per language) | two-level (by prompt length)
reasoning:                 # thinking before the answer, for requests that do not say how long
  median: {rs.median}
  sigma: {rs.sigma:g}
  max: {rs.max}
  openai_field: {rs.openai_field}   # the chat delta's field: reasoning_content | reasoning
kv:                        # what --disaggregate P:D sends from prefill to decode per prompt token
  bytes_per_token: {p.kv.bytes_per_token}
  link_gbps: {p.kv.link_gbps:g}
{fitted}"""
