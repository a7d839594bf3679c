"""Long-context replay: the first rows of the public Mooncake trace (../shared/traces, prompts of
tens of thousands of tokens) replayed, sped up, against `llmchaos serve` with its defaults (the sim,
128K context), by one Locust process and by `--processes 2`, with a user for every request on any
worker (`--max-concurrency 400`: the sim queues this load, TTFT grows to seconds, and a worker out of
users would hold requests back for its own reason).

Each request's prompt is built to the trace's exact size ahead of its time (loadtests/replay/ahead.py),
so the schedule's lag does not depend on prompt length. Measured: every request ok, the server's
prompt tokens (its /metrics counter, before and after) against the trace's plus its chat template
(probed with one request of a known size), schedule lag p50/p99 and, apart from it, the build and
the send of each request (run.json's replay fidelity), and the largest harness process's RSS
(sampled every 0.5 s) against a reference replay of the same schedule with one-token prompts run
just before (the ready requests are bounded at 64 MiB of bodies).
Targets: every request ok, prompt tokens exact, lag p99 under 5 ms, RSS over the reference's under
128 MiB.
Run from the repo root: python -m benchmarks.long_context_replay
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
import psutil

from benchmarks._common import ROOT, llmchaos, process, template, total
from llmchaos import run

TRACE = ROOT.parent / "shared" / "traces" / "mooncake_synthetic.jsonl"
ROWS, SPEED = 100, 3.0  # about 10 s of schedule; ~13k-token prompts, several in flight
REPLAY = [sys.executable, "-m", "locust", "-f", "loadtests/replay/locustfile.py", "--headless", "--only-summary"]
MIB = 1 << 20
LAG_TARGET, RSS_TARGET = 0.005, 128 * MIB


def replay(url: str, log: Path, tmp: Path, processes: int) -> dict[str, float]:
    argv = [*REPLAY, "--log", str(log), "--target-a", url, "--speed", str(SPEED), "--results-dir", str(tmp)]
    argv += ["--max-concurrency", str(4 * ROWS)]  # a user for every request on any worker: the sim queues them
    if processes > 1:
        argv += ["--processes", str(processes)]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ps, rss = psutil.Process(proc.pid), []
    while proc.poll() is None:
        try:
            rss.append(max(p.memory_info().rss for p in [ps, *ps.children(recursive=True)]))
        except psutil.NoSuchProcess:
            break
        time.sleep(0.5)
    _, err = proc.communicate(timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"replay exited {proc.returncode}: {err.decode()[-2000:]}")
    (run_dir,) = [p for p in tmp.iterdir() if p.is_dir()]
    side = run.load(run_dir / "a")
    assert side.run.replay is not None
    f = side.run.replay.fidelity
    lines = list(side.requests())

    def ms(lag: run.Lag | None, pct: str) -> float:
        value = getattr(lag, pct, None) if lag is not None else None
        return value * 1000 if value is not None else float("nan")

    return {
        "requests": len(lines),
        "ok": sum(r.outcome == "ok" for r in lines),
        "lag_p50": ms(f.lag, "p50"),
        "lag_p99": ms(f.lag, "p99"),
        "prepare_p99": ms(f.prepare, "p99"),
        "send_p99": ms(f.send, "p99"),
        "rss_max": max(rss, default=0),
    }


def main() -> int:
    if not TRACE.is_file():
        print(f"long_context_replay: no trace at {TRACE} (../shared/traces next to the checkout)")
        return 1
    ok = True
    print(f"{'processes':>9} {'requests':>8} {'ok':>5} {'prompt tokens':>14} {'expected':>10} {'lag p50 ms':>10} "
          f"{'lag p99 ms':>10} {'built p99':>9} {'sent p99':>9} {'RSS max':>8} {'over ref':>8}")  # fmt: skip
    for processes in (1, 2):
        with (
            tempfile.TemporaryDirectory() as tmp,
            process(llmchaos("serve", "--port", "{port}"), None, "/healthz") as (
                url,
                _,
            ),
        ):
            log, short = Path(tmp) / "mooncake.jsonl", Path(tmp) / "short.jsonl"
            with open(TRACE, "rb") as src:
                rows = [orjson.loads(line) for line, _ in zip(src, range(ROWS), strict=False)]
            log.write_bytes(b"\n".join(map(orjson.dumps, rows)) + b"\n")
            tiny = [{**row, "input_length": 1, "hash_ids": []} for row in rows]
            short.write_bytes(b"\n".join(map(orjson.dumps, tiny)) + b"\n")
            reference = replay(url, short, Path(tmp) / "ref", processes)
            extra = template(url)
            before = total(url, "vllm:prompt_tokens_total")
            r = replay(url, log, Path(tmp) / "long", processes)
            got = total(url, "vllm:prompt_tokens_total") - before
        over = r["rss_max"] - reference["rss_max"]
        want = sum(row["input_length"] + extra for row in rows)
        met = r["ok"] == r["requests"] == ROWS and got == want
        met &= r["lag_p99"] < LAG_TARGET * 1000 and over < RSS_TARGET
        ok &= met
        print(
            f"{processes:9d} {r['requests']:8.0f} {r['ok']:5.0f} {got:14.0f} {want:10d} {r['lag_p50']:10.2f} "
            f"{r['lag_p99']:10.2f} {r['prepare_p99']:9.2f} {r['send_p99']:9.2f} {r['rss_max'] / MIB:7.0f}M "
            f"{over / MIB:7.0f}M  {'met' if met else 'NOT met'}"
        )
    print(
        f"targets: every request ok with the server's defaults, prompt tokens = the trace's + the template's, "
        f"lag p99 < {LAG_TARGET * 1000:g} ms, RSS < {RSS_TARGET // MIB} MiB over one-token prompts"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
