"""`make demo`: the reference server on loopback, one request per language streamed through it,
then a 20 s Locust load in every language that writes a results directory and Locust's HTML report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import httpx

from llmchaos import languages, sse_codec
from llmchaos.procs import free_port, stop
from llmchaos.wire import DONE_DATA, LANG_HEADER


def stream_one(client: httpx.Client, url: str, lang: str, prompt: str) -> dict:
    body = {
        "model": "llmchaos-sim-8b",
        "stream": True,
        "max_tokens": 48,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": prompt}],
    }
    start = time.perf_counter()
    ttft, text, decoder = None, [], sse_codec.Decoder()
    usage: dict[str, int] = {}
    with client.stream("POST", url + "/v1/chat/completions", json=body, headers={LANG_HEADER: lang}) as r:
        r.raise_for_status()
        for chunk in r.iter_raw():
            for ev in decoder.feed(chunk):
                if ev.data == DONE_DATA:
                    break
                data = json.loads(ev.data)
                usage = data.get("usage") or usage
                for choice in data["choices"]:
                    piece = choice["delta"].get("content")
                    if piece:
                        ttft = ttft or time.perf_counter() - start
                        text.append(piece)
    return {
        "lang": lang,
        "ttft_ms": 1000 * (ttft or 0),
        "e2e_ms": 1000 * (time.perf_counter() - start),
        "tokens": usage.get("completion_tokens"),
        "text": "".join(text),
    }


def run_load(url: str, results: str = "results") -> None:
    """A 20 s per-language closed-loop load; Locust prints the llmchaos summary at the end."""
    html = os.path.join(results, "locust-report.html")
    os.makedirs(results, exist_ok=True)
    before = set(os.listdir(results))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "locust",
            "-f",
            "loadtests/locustfile.py",
            "--headless",
            "--only-summary",
            "--host",
            url,
            "-u",
            "24",
            "-r",
            "12",
            "-t",
            "20s",
            "--warmup",
            "3s",
            "--think-time",
            "0.5",
            "--max-tokens",
            "64",
            "--results-dir",
            results,
            "--html",
            html,
        ],
        check=False,
    )
    runs = sorted(set(os.listdir(results)) - before - {"locust-report.html"})
    where = os.path.abspath(os.path.join(results, runs[-1])) if runs else os.path.abspath(results)
    print(
        f"\nresults: {where}/ (run.json, histograms/, requests.jsonl); again: llmchaos report {where}\n"
        f"Locust's report: {os.path.abspath(html)}"
    )


def main() -> int:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, "-m", "llmchaos.cli", "serve", "--port", str(port)])
    try:
        with httpx.Client(timeout=30) as client:
            for _ in range(300):
                try:
                    if client.get(url + "/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
            print(f"reference server (sim engine) on {url}\n")
            print(f"{'lang':4} {'ttft ms':>8} {'e2e ms':>8} {'tokens':>6}  text")
            for tag, lang in languages.registry().items():
                r = stream_one(client, url, tag, lang.prompts()[0]["prompt"])
                snippet = r["text"].replace("\n", " ")[:60]
                print(f"{tag:4} {r['ttft_ms']:8.1f} {r['e2e_ms']:8.1f} {r['tokens']:6}  {snippet}")
            print(f"\nserver metrics: {url}/metrics (vLLM names)\n")
        run_load(url)
    finally:
        stop(server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
