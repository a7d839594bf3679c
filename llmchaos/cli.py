"""The `llmchaos` command line."""

from __future__ import annotations

import argparse
import sys

from llmchaos import __version__
from llmchaos.errors import UsageError


def _weights(text: str) -> dict[str, float]:
    try:
        pairs = [item.split("=", 1) for item in text.split(",") if item]
        weights = {k.strip(): float(v) for k, v in pairs}
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected lang=weight,... got {text!r}") from None
    if any(w <= 0 for w in weights.values()):
        raise argparse.ArgumentTypeError("weights must be positive")
    return weights


def _positive(kind: type):  # noqa: ANN202
    def parse(text: str):  # noqa: ANN202
        v = kind(text)
        if v <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return v
    return parse


def _non_negative(text: str) -> float:
    v = float(text)
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return v


def add_serve(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run the reference streaming LLM server")
    p.add_argument("--engine", choices=["sim"], default="sim", help="executor (sim: calibrated cost model)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--model-name", default="llmchaos-sim-8b")
    p.add_argument("--max-model-len", type=_positive(int), default=8192)
    p.add_argument("--max-num-seqs", type=_positive(int), default=256)
    p.add_argument("--max-num-batched-tokens", type=_positive(int), default=2048)
    p.add_argument("--block-size", type=_positive(int), default=16)
    p.add_argument("--num-blocks", type=_positive(int), default=8192)
    p.add_argument("--watermark", type=_non_negative, default=0.01)
    p.add_argument("--no-prefix-caching", action="store_true")
    p.add_argument("--max-waiting", type=_positive(int), default=1024,
                   help="waiting-queue length past which requests get 429")
    p.add_argument("--policy", choices=["fcfs", "wfq", "two-level"], default="fcfs")
    p.add_argument("--lang-weights", type=_weights, default={},
                   help="WFQ weights, e.g. en=10,zh=6,ja=4 (default: the language registry)")
    p.add_argument("--fast-max-prompt-tokens", type=_positive(int), default=8192)
    p.add_argument("--fast-weight", type=_positive(float), default=90.0)
    p.add_argument("--bulk-weight", type=_positive(float), default=10.0)
    p.add_argument("--bulk-min-slice", type=_non_negative, default=0.5, help="seconds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sim-time-scale", type=_non_negative, default=1.0,
                   help="multiply the sim cost model (0: every step is free)")
    p.add_argument("--sim-jitter", type=_non_negative, default=0.03)
    p.add_argument("--pacer-rate", type=_non_negative, default=0.0, help="tokens/s per stream (0: off)")
    p.add_argument("--pacer-max-gap", type=_positive(float), default=0.2, help="seconds between frames")
    p.add_argument("--api-key", default=None)
    p.add_argument("--admin-token", default=None)
    p.add_argument("--admin-allow-remote", action="store_true")
    p.add_argument("--startup-delay", type=_non_negative, default=0.0, help="simulated model-load seconds")
    p.add_argument("--drain-timeout", type=_non_negative, default=30.0)
    p.add_argument("--log-level", default="warning")
    p.set_defaults(func=run_serve)


def run_serve(args: argparse.Namespace) -> None:
    from dataclasses import replace

    from llmchaos import languages
    from reference_server.api.common import ServerOptions
    from reference_server.config import CostModel, EngineConfig
    from reference_server.server import serve

    for tag in args.lang_weights:
        languages.get(tag)
    if args.block_size * args.num_blocks < args.max_model_len:
        raise UsageError(f"--num-blocks x --block-size ({args.block_size * args.num_blocks}) must hold "
                         f"--max-model-len ({args.max_model_len})", field="--num-blocks")
    base = CostModel()
    scale = args.sim_time_scale
    cost = replace(base, step_overhead_s=base.step_overhead_s * scale,
                   prefill_per_token_s=base.prefill_per_token_s * scale,
                   decode_base_s=base.decode_base_s * scale, decode_per_seq_s=base.decode_per_seq_s * scale,
                   decode_per_ctx_token_s=base.decode_per_ctx_token_s * scale, jitter=args.sim_jitter)
    cfg = EngineConfig(
        model_name=args.model_name, max_model_len=args.max_model_len, max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens, block_size=args.block_size,
        num_blocks=args.num_blocks, watermark=args.watermark,
        enable_prefix_caching=not args.no_prefix_caching, max_waiting=args.max_waiting,
        policy=args.policy, lang_weights=args.lang_weights,
        fast_max_prompt_tokens=args.fast_max_prompt_tokens, fast_weight=args.fast_weight,
        bulk_weight=args.bulk_weight, bulk_min_slice_s=args.bulk_min_slice, seed=args.seed, cost=cost,
        pacer_tokens_per_s=args.pacer_rate, pacer_max_gap_s=args.pacer_max_gap)
    opts = ServerOptions(api_key=args.api_key, admin_token=args.admin_token,
                         admin_allow_remote=args.admin_allow_remote)
    serve(cfg, args.host, args.port, opts, args.startup_delay, args.drain_timeout, args.log_level)


def add_proxy(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("proxy", help="run the SSE chaos proxy in front of an upstream")
    p.add_argument("--listen", default="127.0.0.1:9100", help="HOST:PORT")
    p.add_argument("--upstream", required=True, help="base URL of the server to forward to")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=run_proxy)


def run_proxy(args: argparse.Namespace) -> None:
    from faults import sse_proxy

    if not args.listen.rpartition(":")[2].isdigit():
        raise UsageError(f"expected HOST:PORT, got {args.listen!r}", field="--listen")
    if not args.upstream.startswith(("http://", "https://")):
        raise UsageError(f"expected an http(s) URL, got {args.upstream!r}", field="--upstream")
    sse_proxy.serve(args.listen, args.upstream, args.seed)


def add_faults(sub: argparse._SubParsersAction) -> None:
    from faults import allow

    p = sub.add_parser("faults", help="run, probe or recover fault schedules")
    fsub = p.add_subparsers(dest="faults_command", required=True)
    run = fsub.add_parser("run", help="run a schedule from now")
    run.add_argument("schedule")
    run.add_argument("--dry-run", action="store_true", help="print the plan with absolute times")
    run.add_argument("--duration", type=_positive(float), default=None,
                     help="seconds to run (default: until the last window ends; needed with 'every')")
    run.add_argument("--journal", default=None)
    run.add_argument("--timeline", default=None, help="write the windows as they ran (JSON)")
    allow.add_arguments(run)
    run.set_defaults(func=run_faults)
    rec = fsub.add_parser("recover", help="revert whatever the journal still holds")
    rec.add_argument("--journal", default=None)
    rec.set_defaults(func=run_recover)
    probe = fsub.add_parser("probe", help="what this host can inject; with a schedule, whether each target can")
    probe.add_argument("schedule", nargs="?")
    allow.add_arguments(probe)
    probe.set_defaults(func=run_probe)


def _journal(path: str | None):  # noqa: ANN202
    from faults.journal import DEFAULT, Journal

    return Journal(path or DEFAULT)


def run_faults(args: argparse.Namespace) -> None:
    import json
    import signal
    import time
    from datetime import datetime, timezone

    from faults import allow, schedule
    from faults.runner import KINDS, Runner, prepare

    plan = schedule.load(args.schedule, KINDS)
    repeats = any(f.every for f in plan.faults)
    if repeats and args.duration is None:
        raise UsageError("a schedule with 'every' needs --duration", field="--duration")
    horizon = args.duration or max((w.end for w in plan.windows()), default=0.0)
    windows = plan.windows(horizon)
    if args.dry_run:
        t0 = time.time() + 0.5
        print(f"seed {plan.seed}; {len(windows)} windows from {datetime.fromtimestamp(t0, timezone.utc).isoformat()}")
        for w in windows:
            start, end = (datetime.fromtimestamp(t0 + x, timezone.utc).isoformat(timespec="milliseconds")
                          for x in (w.start, w.end))
            print(f"{start} -> {end}  {w.name:16} {w.kind:9} {json.dumps(w.target)} {json.dumps(w.params)}")
        return
    allowed = allow.from_args(args)
    journal = _journal(args.journal)
    prepare(plan, args.schedule, journal, allowed)
    runner = Runner(plan, journal, horizon, allowed)
    stop = lambda *_: runner.stop()  # noqa: E731 - the signal handler
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    t0 = runner.start(time.time() + 0.5)
    while not runner.stopping.is_set() and time.time() < t0 + horizon:
        runner.stopping.wait(0.1)
    runner.stop(timeout=5.0)
    if args.timeline:
        with open(args.timeline, "w", encoding="utf-8") as f:
            json.dump(runner.timeline_json(), f, indent=1)
    failed = [a for a in runner.timeline if a.error]
    for a in failed:
        print(f"llmchaos: {a.name}: {a.error}", file=sys.stderr)
    if failed:
        raise SystemExit(1)


def run_recover(args: argparse.Namespace) -> None:
    from faults.runner import recover

    lines = recover(_journal(args.journal))
    print("\n".join(lines) if lines else "nothing to recover")
    if any(line.startswith("could not") for line in lines):
        raise SystemExit(1)


def run_probe(args: argparse.Namespace) -> None:
    from faults import allow, schedule
    from faults.runner import KINDS

    if args.schedule is None:
        reasons = {kind: injector.probe_host() for kind, injector in KINDS.items()}
        for kind, reason in reasons.items():
            print(f"{kind:9} {'yes' if reason is None else 'no: ' + reason}")
        return
    plan = schedule.load(args.schedule, KINDS)
    allowed = allow.from_args(args)
    bad = 0
    for spec in plan.faults:
        reason = KINDS[spec.kind](spec.target, allowed).probe()
        bad += reason is not None
        print(f"{spec.name:16} {spec.kind:9} {'ok' if reason is None else 'NO: ' + reason}")
    if bad:
        raise SystemExit(1)


def add_push_delete(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("push-delete", help="delete a run's group from a Pushgateway")
    p.add_argument("--gateway", required=True, help="Pushgateway URL")
    p.add_argument("--run-id", required=True)
    p.add_argument("--job", default="llmchaos")
    p.set_defaults(func=run_push_delete)


def run_push_delete(args: argparse.Namespace) -> None:
    from prometheus_client import delete_from_gateway

    try:
        delete_from_gateway(args.gateway, job=args.job, grouping_key={"run_id": args.run_id}, timeout=10)
    except OSError as e:
        raise UsageError(f"cannot delete from {args.gateway}: {e}", field="--gateway") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llmchaos", description=__doc__)
    parser.add_argument("--version", action="version", version=f"llmchaos {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    add_serve(sub)
    add_proxy(sub)
    add_faults(sub)
    add_push_delete(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except UsageError as e:
        print(f"llmchaos: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
