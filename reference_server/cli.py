"""`llmchaos serve`: the reference streaming LLM server."""

from __future__ import annotations

import argparse
import math

from llmchaos.cli import Subparsers, non_negative, positive
from llmchaos.errors import UsageError


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
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--model-name", default="llmchaos-sim-8b")
    p.add_argument("--max-model-len", type=positive(int), default=8192)
    p.add_argument("--max-num-seqs", type=positive(int), default=256)
    p.add_argument("--max-num-batched-tokens", type=positive(int), default=2048)
    p.add_argument("--block-size", type=positive(int), default=16)
    p.add_argument("--num-blocks", type=positive(int), default=8192)
    p.add_argument("--watermark", type=non_negative, default=0.01)
    p.add_argument("--no-prefix-caching", action="store_true")
    p.add_argument(
        "--max-waiting", type=positive(int), default=1024, help="waiting-queue length past which requests get 429"
    )
    p.add_argument("--policy", choices=["fcfs", "wfq", "two-level"], default="fcfs")
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
        "--sim-time-scale", type=non_negative, default=1.0, help="multiply the sim cost model (0: every step is free)"
    )
    p.add_argument("--sim-jitter", type=non_negative, default=0.03)
    p.add_argument("--pacer-rate", type=non_negative, default=0.0, help="tokens/s per stream (0: off)")
    p.add_argument("--pacer-max-gap", type=positive(float), default=0.2, help="seconds between frames")
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
    p.add_argument("--admin-token", default=None)
    p.add_argument("--admin-allow-remote", action="store_true")
    p.add_argument("--startup-delay", type=non_negative, default=0.0, help="simulated model-load seconds")
    p.add_argument("--drain-timeout", type=non_negative, default=30.0)
    p.add_argument("--log-level", default="warning")
    p.set_defaults(func=run)


FLOATS = (
    "watermark",
    "fast_weight",
    "bulk_weight",
    "bulk_min_slice",
    "sim_time_scale",
    "sim_jitter",
    "pacer_rate",
    "pacer_max_gap",
    "startup_delay",
    "drain_timeout",
    "header_timeout",
)


def _check_numbers(args: argparse.Namespace) -> None:
    """What the flags' own types let through: a port out of range, nan or inf (`> 0` holds for inf, and
    no comparison fails for nan)."""
    if not 1 <= args.port <= 65535:
        raise UsageError(f"must be in 1..65535, got {args.port}", field="--port")
    for name in FLOATS:
        if not math.isfinite(value := getattr(args, name)):
            raise UsageError(f"must be a finite number, got {value}", field="--" + name.replace("_", "-"))


def run(args: argparse.Namespace) -> None:
    from llmchaos import languages
    from reference_server.config import EngineConfig, ServerOptions
    from reference_server.executors import ExecutorOptions, create
    from reference_server.server import serve

    _check_numbers(args)
    for tag in args.lang_weights:
        languages.get(tag)
    if args.block_size * args.num_blocks < args.max_model_len:
        raise UsageError(
            f"--num-blocks x --block-size ({args.block_size * args.num_blocks}) must hold "
            f"--max-model-len ({args.max_model_len})",
            field="--num-blocks",
        )
    executor = create(
        ExecutorOptions(
            args.engine,
            args.seed,
            args.sim_time_scale,
            args.sim_jitter,
            device=args.device,
            model=args.model,
            num_blocks=args.num_blocks,
            block_size=args.block_size,
        )
    )
    cfg = EngineConfig(
        model_name=args.model_name,
        max_model_len=args.max_model_len,
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        block_size=args.block_size,
        num_blocks=args.num_blocks,
        watermark=args.watermark,
        enable_prefix_caching=not args.no_prefix_caching,
        max_waiting=args.max_waiting,
        policy=args.policy,
        lang_weights=args.lang_weights,
        fast_max_prompt_tokens=args.fast_max_prompt_tokens,
        fast_weight=args.fast_weight,
        bulk_weight=args.bulk_weight,
        bulk_min_slice_s=args.bulk_min_slice,
        pacer_tokens_per_s=args.pacer_rate,
        pacer_max_gap_s=args.pacer_max_gap,
    )
    opts = ServerOptions(
        api_key=args.api_key,
        admin_token=args.admin_token,
        admin_allow_remote=args.admin_allow_remote,
        max_body_bytes=args.max_body_bytes,
        header_timeout_s=args.header_timeout,
        max_header_bytes=args.max_header_bytes,
    )
    serve(cfg, executor, args.host, args.port, opts, args.startup_delay, args.drain_timeout, args.log_level)
