"""How close the reference server's default profile comes to the vLLM it stands in for: dataset A of
../shared/calibration (Llama-3-8B-Instruct on one H100, vLLM 0.11.0, kubernetes-sigs/inference-perf)
replayed against `llmchaos serve` through our own harness (`locust -f loadtests/replay/locustfile.py`).

The workload is A's: prompts of 205 tokens as the server counts them (a 128-token block every prompt
shares, then its own, in the chat template, whose tokens are probed with one request and taken off the
text), 64 output tokens asked for exactly (ignore_eos), Poisson arrivals at 1, 31, 62 and 92 req/s,
then 123 req/s, past saturation, whose completion rate is the saturation rate. The server runs A's
flags (--max-model-len 512 --max-num-seqs 128 --no-prefix-caching) over the default profile.
Per level: TTFT p50 and p90 and per-token latency, (E2E p50 - TTFT p50) / 63 as A's figures are,
simulated against measured, each request timed from its send (the stand-in's, not the load
generator's: its lateness to send, `lag`, is shown apart); the server's own CPU (one core = 1.00), the
model time its steps lost running behind (`llmchaos_sim_late_seconds_total`: a CPU too busy for the
load), `path`: the mean TTFT over the server's own (vllm:time_to_first_token_seconds, from the
request's first byte read to its first token made: the HTTP path both ways and the server's send),
and the harness's validity.
Target: every figure within 10 % below saturation, the saturation rate within 10 %, each level
measured by a harness that says it kept up (run.json's validity).
The server and Locust are pinned to a core each; figures from a busy machine (the load average is
printed) say more about the machine than the server: measure again on a quiet one.
Run from the repo root: python -m benchmarks.standin_accuracy [--seconds 30] [--rates 31 62]
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil

from benchmarks._common import ROOT, llmchaos, process, template, total
from llmchaos import run

A_FLAGS = ("--max-model-len", "512", "--max-num-seqs", "128", "--no-prefix-caching")
SERVE = llmchaos("serve", "--port", "{port}", *A_FLAGS)
REPLAY = [sys.executable, "-m", "locust", "-f", "loadtests/replay/locustfile.py", "--headless", "--only-summary"]
# A's figures (ms): rate -> TTFT p50, TTFT p90, per-token; past saturation the completion rate.
MEASURED = {1: (31.0, 35.4, 7.06), 31: (29.3, 35.6, 8.16), 62: (33.5, 44.5, 10.08), 92: (44.5, 64.4, 15.23)}
OVERLOAD, SATURATION = 123, 101.2
PROMPT, SHARED, OUTPUT = 205, 128, 64  # A's tokens as its server counted them: our chat template's are in PROMPT
TOLERANCE = 0.10
WARMUP_S = 5.0
LATE = "llmchaos_sim_late_seconds_total"  # model time the sim's steps lost running behind its model
TTFT_SUM, TTFT_COUNT = "vllm:time_to_first_token_seconds_sum", "vllm:time_to_first_token_seconds_count"
PROMPT_TOKENS = "vllm:prompt_tokens_total"
SERVER = (LATE, TTFT_SUM, TTFT_COUNT, PROMPT_TOKENS)  # the server's own figures, read around each level


def write_log(path: Path, rate: float, seconds: float, seed: int, text_tokens: int) -> int:
    """Poisson arrivals at `rate` for `seconds`, prompts of `text_tokens` (A's less our chat template's)
    and A's output size, in our log format."""
    rng, t, n = random.Random(seed), 0.0, 0
    with open(path, "w") as f:
        while (t := t + rng.expovariate(rate)) < seconds:
            f.write(
                f'{{"ts":{t:.6f},"user_id":"u{n}","lang":"en","input_tokens":{text_tokens},'
                f'"output_tokens":{OUTPUT},"hash_ids":[0],"block_tokens":{SHARED}}}\n'
            )
            n += 1
    return n


def level(url: str, server: psutil.Process, rate: float, seconds: float, tmp: Path, text: int) -> dict[str, float]:
    log = tmp / f"a{rate:g}.jsonl"
    sent = write_log(log, rate, seconds, int(rate), text)
    argv = [*REPLAY, "--log", str(log), "--target-a", url, "--force-output-length", "--max-concurrency", "2000"]
    metrics = {name: total(url, name) for name in SERVER}
    before, began = server.cpu_times(), time.monotonic()
    proc = subprocess.run(
        [*argv, "--results-dir", str(tmp / f"r{rate:g}")],
        cwd=ROOT,
        capture_output=True,
        preexec_fn=lambda: os.sched_setaffinity(0, {1}),
    )
    after, elapsed = server.cpu_times(), time.monotonic() - began
    if proc.returncode not in (0, 1):  # 1: some request failed, which the table shows
        raise RuntimeError(f"replay exited {proc.returncode}: {proc.stderr.decode()[-2000:]}")
    (run_dir,) = [p for p in (tmp / f"r{rate:g}").iterdir() if p.is_dir()]
    side = run.load(run_dir / "a")
    metrics = {name: total(url, name) - value for name, value in metrics.items()}
    ok = [r for r in side.requests() if r.outcome == "ok" and r.ttft is not None and r.e2e is not None]
    lag = np.array([r.schedule_lag for r in ok])  # the generator's lateness, left out: counted from the send
    ttft, e2e = np.array([r.ttft for r in ok]) - lag, np.array([r.e2e for r in ok]) - lag
    t0 = min(r.intended for r in ok)
    done = [r.intended + r.e2e - t0 for r in ok]  # type: ignore[operator]
    return {
        "sent": sent,
        "ok": len(ok),
        "ttft_p50": float(np.percentile(ttft, 50)),
        "ttft_p90": float(np.percentile(ttft, 90)),
        "per_token": (float(np.median(e2e)) - float(np.median(ttft))) / (OUTPUT - 1),
        "throughput": sum(WARMUP_S <= t <= seconds for t in done) / (seconds - WARMUP_S),
        "server_cpu": (sum(after[:2]) - sum(before[:2])) / elapsed,
        "late": metrics[LATE],
        "lag_p50": float(np.median(lag)),
        "path": float(ttft.mean()) - metrics[TTFT_SUM] / metrics[TTFT_COUNT],
        "prompt": metrics[PROMPT_TOKENS] / metrics[TTFT_COUNT],
        "valid": side.run.validity.valid,
    }


def _cell(measured: float, simulated: float) -> tuple[str, bool]:
    error = simulated / measured - 1
    return f"{measured:7.2f} {simulated:7.2f} {100 * error:+6.1f}%", abs(error) <= TOLERANCE


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=30.0, help="each level's length (A's stages were 60 s)")
    p.add_argument(
        "--rates",
        type=float,
        nargs="+",
        choices=[*MEASURED, OVERLOAD],
        default=[*MEASURED, OVERLOAD],
        metavar="REQ_S",
        help=f"the levels to run (default all: {', '.join(map(str, [*MEASURED, OVERLOAD]))}); the target needs all",
    )
    args = p.parse_args(argv)
    load_before = os.getloadavg()
    print(f"dataset A replayed against llmchaos serve (default profile, A's flags); load average {load_before[0]:.2f}")
    met = True
    with tempfile.TemporaryDirectory() as tmp, process(SERVE, 0, "/healthz") as (url, server):
        text = PROMPT - template(url)
        print(f"prompts: {text} tokens of text + {PROMPT - text} of the chat template = {PROMPT} as A's; TTFT from "
              f"each request's send (lag: the load generator's lateness, left out; path: its mean over the server's "
              f"own, the HTTP path)")  # fmt: skip
        print(f"{'req/s':>6} {'ok':>9}  {'TTFT p50 A / sim / error':>24}  {'TTFT p90 A / sim / error':>24}  "
              f"{'per-token A / sim / error':>25}  {'server CPU':>10} {'late s':>6} {'lag ms':>6} {'path ms':>7}  "
              f"harness")  # fmt: skip
        for rate, (p50, p90, per_token) in MEASURED.items():
            if rate not in args.rates:
                continue
            seconds = max(args.seconds, 60.0) if rate == 1 else args.seconds  # enough requests for a p90
            r = level(url, server, rate, seconds, Path(tmp), text)
            cells = [
                _cell(p50, r["ttft_p50"] * 1e3),
                _cell(p90, r["ttft_p90"] * 1e3),
                _cell(per_token, r["per_token"] * 1e3),
            ]
            met &= all(ok for _, ok in cells) and r["ok"] == r["sent"] and r["valid"]
            print(
                f"{rate:6} {r['ok']:4.0f}/{r['sent']:<4.0f}  {cells[0][0]:>24}  {cells[1][0]:>24}  {cells[2][0]:>25}  "
                f"{r['server_cpu']:10.2f} {r['late']:6.2f} {r['lag_p50'] * 1e3:6.2f} {r['path'] * 1e3:7.2f}  "
                f"{'valid' if r['valid'] else 'INVALID'}"
            )
            if r["prompt"] != PROMPT:  # the workload is not A's
                met = False
                print(f"the server counted {r['prompt']:.1f} prompt tokens a request, not {PROMPT}")
        if OVERLOAD in args.rates:
            r = level(url, server, OVERLOAD, args.seconds, Path(tmp), text)
            cell, ok = _cell(SATURATION, r["throughput"])
            met &= ok and r["valid"]
            print(
                f"saturation: offered {OVERLOAD} req/s, completed (A / sim / error) {cell}; "
                f"server CPU {r['server_cpu']:.2f}, late {r['late']:.2f} s"
            )
    met &= set(args.rates) == {*MEASURED, OVERLOAD}  # a subset measures, it does not meet the target
    print(f"load average {load_before[0]:.2f} before, {os.getloadavg()[0]:.2f} after ({os.cpu_count()} CPUs)")
    print(f"target: every figure within {TOLERANCE:.0%} below saturation, the saturation rate within {TOLERANCE:.0%}: "
          f"{'met' if met else 'NOT met'}")  # fmt: skip
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
