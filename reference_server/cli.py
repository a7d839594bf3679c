"""`llmchaos serve`: the reference streaming LLM server."""

from __future__ import annotations

import argparse
import math
import socket
from dataclasses import replace
from typing import TYPE_CHECKING

from llmchaos.cli import Subparsers, non_negative, pools, positive
from llmchaos.errors import UsageError
from reference_server.profile import Limits, Profile

if TYPE_CHECKING:
    from reference_server.config import ServerOptions


def _weights(text: str) -> dict[str, float]:
    try:
        pairs = [item.split("=", 1) for item in text.split(",") if item]
        weights = {k.strip(): float(v) for k, v in pairs}
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected lang=weight,... got {text!r}") from None
    if not all(0 < w < math.inf for w in weights.values()):  # nan fails this too
        raise argparse.ArgumentTypeError("weights must be positive and finite")
    return weights


def register(sub: Subparsers) -> None:
    from reference_server.config import ServerOptions
    from reference_server.executors import ENGINES
    from reference_server.profile import DEFAULT, POLICIES, REASONING_FIELDS

    p = sub.add_parser("serve", help="run the reference streaming LLM server")
    p.add_argument("--engine", default="sim", help=f"executor: {', '.join(ENGINES)} (sim: calibrated cost model)")
    p.add_argument(
        "--device", choices=["auto", "cuda", "cpu"], default="auto", help="torch: auto is CUDA when there is one"
    )
    p.add_argument(
        "--model",
        default="tiny",
        help="torch: tiny or small (Llama shapes, seeded random weights) or a local model directory "
        "(safetensors and tokenizer.json)",
    )
    p.add_argument(
        "--profile",
        default=None,
        help="what the server stands in for: a named profile or a YAML file (default: "
        f"{DEFAULT} for sim); the flags below override it",
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--model-name", default=None)
    p.add_argument("--max-model-len", type=positive(int), default=None)
    p.add_argument("--max-num-seqs", type=positive(int), default=None)
    p.add_argument("--max-num-batched-tokens", type=positive(int), default=None)
    p.add_argument("--block-size", type=positive(int), default=None)
    p.add_argument("--num-blocks", type=positive(int), default=None)
    p.add_argument("--watermark", type=non_negative, default=0.01)
    p.add_argument("--no-prefix-caching", dest="prefix_caching", action="store_const", const=False, default=None)
    p.add_argument(
        "--max-waiting", type=positive(int), default=None, help="waiting-queue length past which requests get 429"
    )
    p.add_argument("--policy", choices=POLICIES, default=None)
    p.add_argument(
        "--lang-weights",
        type=_weights,
        default={},
        help="WFQ weights, e.g. en=10,zh=6,ja=4 (default: the language registry)",
    )
    p.add_argument("--fast-max-prompt-tokens", type=positive(int), default=8192)
    p.add_argument("--fast-weight", type=positive(float), default=90.0)
    p.add_argument("--bulk-weight", type=positive(float), default=10.0)
    p.add_argument("--bulk-min-slice", type=non_negative, default=0.5, help="seconds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--sim-time-scale", type=non_negative, default=1.0, help="multiply the step-time model (0: every step is free)"
    )
    p.add_argument("--sim-jitter", type=non_negative, default=None, help="sigma of the log-normal factor per step")
    p.add_argument("--pacer-rate", type=non_negative, default=None, help="tokens/s per stream (0: off)")
    p.add_argument("--pacer-max-gap", type=positive(float), default=None, help="seconds between frames")
    p.add_argument(
        "--reasoning-field",
        choices=REASONING_FIELDS,
        default=None,
        help="the chat delta's field for thinking (vLLM's reasoning_content; newer: reasoning)",
    )
    p.add_argument(
        "--max-body-bytes",
        type=positive(int),
        default=ServerOptions.max_body_bytes,
        help="request bodies over this many bytes get 413 (default 4 MiB: a 128K-token prompt fits)",
    )
    p.add_argument(
        "--header-timeout",
        type=positive(float),
        default=ServerOptions.header_timeout_s,
        help="seconds a request's headers may take to arrive before 408 and close (slowloris)",
    )
    p.add_argument(
        "--max-header-bytes",
        type=positive(int),
        default=ServerOptions.max_header_bytes,
        help="a request head over this many bytes gets 431 and close",
    )
    p.add_argument("--api-key", default=None)
    p.add_argument(
        "--enable-prompt-tokens-details",
        action="store_true",
        help="OpenAI usage: prompt_tokens_details.cached_tokens, the prompt tokens found in the prefix cache (vLLM's)",
    )
    p.add_argument("--admin-token", default=None)
    p.add_argument("--admin-allow-remote", action="store_true")
    p.add_argument("--startup-delay", type=non_negative, default=0.0, help="simulated model-load seconds")
    p.add_argument("--drain-timeout", type=non_negative, default=30.0)
    p.add_argument("--log-level", default="warning")
    cluster(p)
    p.set_defaults(func=run)


def cluster(p: argparse.ArgumentParser) -> None:
    """The flags that make `serve` a router over engines it starts (reference_server/cluster)."""
    from reference_server.cluster.policies import DEFAULT, POLICIES
    from reference_server.disagg import FAILURES

    c = p.add_argument_group("cluster", "a router over engine processes it starts, each on its own loopback port")
    c.add_argument("--replicas", type=positive(int), default=1, help="engines behind the router")
    c.add_argument(
        "--disaggregate", type=pools, default=None, metavar="P:D", help="P prefill and D decode engines (KV over TCP)"
    )
    c.add_argument("--router", choices=POLICIES, default=None, help=f"the router's policy (default {DEFAULT})")
    c.add_argument(
        "--kv-failure",
        choices=FAILURES,
        default=None,
        help="decode, when a KV transfer fails: 503 at once, prefill itself, or wait --kv-timeout (default recompute)",
    )
    c.add_argument("--kv-timeout", type=positive(float), default=None, help="seconds (hang; default 300)")
    c.add_argument(
        "--kv-stall",
        type=positive(float),
        default=None,
        help="seconds without a KV byte before decode gives a transfer up (fail-fast, recompute; default 0.25)",
    )
    c.add_argument(
        "--kv-bytes-scale",
        type=positive(float),
        default=None,
        help="the share of the KV's bytes sent (its time still the full size's; default 1)",
    )
    c.add_argument("--role", choices=("prefill", "decode"), default=None, help=argparse.SUPPRESS)  # the router's
    c.add_argument("--kv-port", type=positive(int), default=None, help=argparse.SUPPRESS)
    c.add_argument("--replica-index", type=int, default=None, help=argparse.SUPPRESS)


def _check_cluster(args: argparse.Namespace) -> None:
    """Flags that contradict each other, or that nothing would read."""
    if args.replicas > 1 and args.disaggregate:
        raise UsageError("give --replicas or --disaggregate, not both", field="--disaggregate")
    engines = sum(args.disaggregate) if args.disaggregate else args.replicas
    if engines > MAX_ENGINES:  # each is a process with its own KV pool: past this, a typo, not a cluster
        field = "--disaggregate" if args.disaggregate else "--replicas"
        raise UsageError(f"at most {MAX_ENGINES} engines, got {engines}", field=field)
    if args.router and args.replicas == 1 and not args.disaggregate:
        raise UsageError("a router needs --replicas N (N >= 2) or --disaggregate P:D", field="--router")
    for name in ("kv_failure", "kv_timeout", "kv_stall", "kv_bytes_scale"):
        if getattr(args, name) is not None and not (args.disaggregate or args.role):
            raise UsageError("only a disaggregated cluster sends KV: add --disaggregate P:D", field=_flag(name))
    if args.kv_bytes_scale is not None and args.kv_bytes_scale > 1:
        raise UsageError(
            f"must be at most 1 (a share of the bytes), got {args.kv_bytes_scale:g}", field="--kv-bytes-scale"
        )


MAX_ENGINES = 64


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _check_numbers(args: argparse.Namespace) -> None:
    """What the flags' own types let through: a port out of range."""
    if not 1 <= args.port <= 65535:
        raise UsageError(f"must be in 1..65535, got {args.port}", field="--port")


def chosen(args: argparse.Namespace) -> Profile:
    """The profile the flags name (sim: the default one; torch: today's limits alone, unless named), with
    every flag given overriding it."""
    from reference_server import profile

    base = profile.load(args.profile or profile.DEFAULT) if args.profile or args.engine == "sim" else TORCH
    flags = {name: getattr(args, name) for name in LIMIT_FLAGS if getattr(args, name) is not None}
    bounded = {**{n: profile.LIMITS[n].most for n in flags}, "sim_jitter": profile.SIGMA_MOST, "sim_time_scale": 1000}
    bounded |= {"pacer_rate": profile.PACER["rate"].most, "pacer_max_gap": profile.PACER["max_gap"].most}
    for name, most in bounded.items():  # as a profile's own fields are bounded
        if (value := getattr(args, name)) is not None and value > most:
            raise UsageError(f"must be at most {most:g}, got {value:g}", field="--" + name.replace("_", "-"))
    p = replace(base, limits=replace(base.limits, **flags))
    step = p.step.scaled(args.sim_time_scale, args.sim_jitter)
    pacer = {k: v for k, v in (("pacer_rate", args.pacer_rate), ("pacer_max_gap", args.pacer_max_gap)) if v is not None}
    p = replace(p, step=step, **pacer, model_name=args.model_name or p.model_name, policy=args.policy or p.policy)
    if args.reasoning_field:
        p = replace(p, reasoning=replace(p.reasoning, openai_field=args.reasoning_field))
    blocks = profile.kv_blocks_needed(p.limits, args.watermark)
    if p.limits.num_blocks < blocks:
        raise UsageError(
            f"the KV pool ({p.limits.num_blocks} blocks of {p.limits.block_size}) must hold one request of "
            f"--max-model-len ({p.limits.max_model_len}) past the watermark: at least {blocks} blocks",
            field="--num-blocks",
        )
    return p


LIMIT_FLAGS = (
    "max_model_len",
    "max_num_seqs",
    "max_num_batched_tokens",
    "block_size",
    "num_blocks",
    "prefix_caching",
    "max_waiting",
)
TORCH = Profile(
    name="torch", source="a real transformer's forward passes: no step-time model", limits=Limits(8192, num_blocks=8192)
)


def run(args: argparse.Namespace) -> None:
    from llmchaos import languages
    from reference_server.config import EngineConfig
    from reference_server.disagg.kv_server import Wire
    from reference_server.disagg.role import STALL_S, Options
    from reference_server.executors import ExecutorOptions, create
    from reference_server.server import serve

    _check_numbers(args)
    _check_cluster(args)
    for tag in args.lang_weights:
        languages.get(tag)
    p = chosen(args)
    if args.replicas > 1 or args.disaggregate:
        return _route(args)
    executor = create(
        ExecutorOptions(
            args.engine,
            args.seed,
            p.step,
            (p.max_clock_mhz, p.min_clock_mhz),
            p.power,
            p.name,
            p.gpu_name,
            device=args.device,
            model=args.model,
            num_blocks=p.limits.num_blocks,
            block_size=p.limits.block_size,
        )
    )
    cfg = EngineConfig.of(
        p,
        watermark=args.watermark,
        lang_weights=args.lang_weights,
        fast_max_prompt_tokens=args.fast_max_prompt_tokens,
        fast_weight=args.fast_weight,
        bulk_weight=args.bulk_weight,
        bulk_min_slice_s=args.bulk_min_slice,
    )
    opts = _options(args)
    disagg = None
    if args.role:
        wire = Wire(p.kv.bytes_per_token, p.kv.link_gbps, args.kv_bytes_scale or 1.0)
        kv = Options(
            args.role,
            args.kv_failure or "recompute",
            args.kv_timeout or 300.0,
            args.host,
            args.kv_port or 0,
            args.kv_stall or STALL_S,
        )
        disagg = (kv, wire)
    serve(cfg, executor, args.host, args.port, opts, args.startup_delay, args.drain_timeout, args.log_level, disagg)


def _options(args: argparse.Namespace) -> ServerOptions:
    from reference_server.config import ServerOptions

    return ServerOptions(
        api_key=args.api_key,
        admin_token=args.admin_token,
        admin_allow_remote=args.admin_allow_remote,
        max_body_bytes=args.max_body_bytes,
        header_timeout_s=args.header_timeout,
        max_header_bytes=args.max_header_bytes,
        replica=args.replica_index,
        prompt_tokens_details=args.enable_prompt_tokens_details,
    )


def _route(args: argparse.Namespace) -> None:
    """Be the router over the engines the flags ask for."""
    from reference_server.cluster import plan
    from reference_server.cluster.policies import DEFAULT
    from reference_server.cluster.router import Cluster, serve

    try:  # before any engine starts: a router that cannot listen leaves none behind
        socket.create_server((args.host, args.port)).close()
    except OSError as e:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}", field="--port") from None
    cluster = Cluster(plan.replicas(args), args.router or DEFAULT)
    serve(cluster, args.host, args.port, _options(args), args.drain_timeout, args.log_level)
