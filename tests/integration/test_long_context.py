"""Long prompts against the reference server's defaults (issue 26): it takes what the 8B it stands in for
takes (128K tokens) and gives vLLM's 400 past it; short of KV blocks it queues and preempts, as vLLM
does, rather than refusing; a public long-context trace (Mooncake) is served `ok` within 128K, and the
sim server's memory stays bounded (it holds token ids, not KV tensors)."""

from __future__ import annotations

import asyncio
import json

import httpx
import psutil
import pytest

from llmchaos import languages, tokenizer
from tests.integration.replay_helpers import replay, sides
from tests.procs import Server, serve
from tests.traces import MOONCAKE, trace

MODEL = "llmchaos-sim-8b"
LIMIT = 131072
QUICK = ("--sim-time-scale", "0.02")  # the default profile, its steps 50x faster


@pytest.fixture(scope="module")
def server() -> Server:
    with serve(*QUICK) as s:
        yield s


def prompt_of(tokens: int) -> str:
    """Running text of about `tokens` tokens (the English corpus, repeated; give or take one where the
    cut joins two tokens)."""
    text = languages.get("en").text()
    body = text * (tokens // tokenizer.count(text) + 1)
    return body[: tokenizer.load().encode(body, add_special_tokens=False).offsets[tokens - 1][1]]


def complete(server: Server, prompt: str, max_tokens: int = 4) -> httpx.Response:
    body = {"model": MODEL, "prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True}
    return httpx.post(server.url + "/v1/completions", json=body, timeout=120)


def test_the_default_takes_a_128k_context_and_gives_vllms_400_past_it(server: Server):
    models = httpx.get(server.url + "/v1/models").json()
    assert models["data"][0]["max_model_len"] == LIMIT
    long = prompt_of(LIMIT - 200)
    n = tokenizer.count(long)
    r = complete(server, long)
    assert r.status_code == 200, r.text
    assert r.json()["usage"] == {"prompt_tokens": n, "completion_tokens": 4, "total_tokens": n + 4}
    over = prompt_of(LIMIT + 10)
    r = complete(server, over)
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["message"].startswith(f"This model's maximum context length is {LIMIT} tokens. However, your prompt has")
    assert err["param"] == "prompt"
    r = complete(server, long, max_tokens=1000)  # fits alone, not with the answer asked for
    assert r.status_code == 400
    assert r.json()["error"]["message"].startswith(f"This model's maximum context length is {LIMIT} tokens.")


@pytest.mark.timing
def test_short_of_kv_blocks_requests_wait_and_are_preempted_never_refused():
    """600 blocks of 16 hold 9,600 tokens; four requests of 2,000 prompt tokens and 1,500 answer
    tokens need 14,000 (any three, 10,500): they all start, run out of blocks mid-answer, are preempted
    and recomputed, and all finish whole."""
    # Steps at a fifth of the profile's time: a request's 1,500 tokens take two seconds at the least (a
    # busy machine only adds), so three of the four, sent at once and tokenized in milliseconds, overlap.
    args = ("--num-blocks", "600", "--max-model-len", "8192", "--sim-time-scale", "0.2", "--seed", "3")
    prompts = [f"Request {i}. " + prompt_of(2000) for i in range(4)]  # no two alike: no prefix shared
    with serve(*args) as s:

        async def go() -> list[httpx.Response]:
            async with httpx.AsyncClient(base_url=s.url, timeout=120) as c:
                body = {"model": MODEL, "max_tokens": 1500, "ignore_eos": True, "temperature": 0}
                return await asyncio.gather(*(c.post("/v1/completions", json=body | {"prompt": p}) for p in prompts))

        answers = asyncio.run(go())
        preemptions = s.metric("vllm:num_preemptions_total")
    assert [r.status_code for r in answers] == [200] * 4, [r.text for r in answers]
    assert [r.json()["usage"]["completion_tokens"] for r in answers] == [1500] * 4
    assert preemptions > 0


def test_the_mooncake_trace_is_served_ok_within_128k_with_memory_bounded(tmp_path):
    """The trace's first 120 rows (prompts up to 40K tokens, 1.2 M in all) and its three rows over 128K,
    at 10 times its speed through our replay, twice, against the default profile (steps 50x faster):
    the rows within 128K all `ok` with prompts of their recorded size, those over it vLLM's 400. The
    server holds token ids, never KV tensors (an 8B model's would be 128 KiB a token: 150 GiB here):
    its RSS stays under 1 GiB, and the second pass grows it by less than half what the first did."""
    rows = [json.loads(line) for line in trace(MOONCAKE).read_text().splitlines()]
    head = rows[:120]
    over = [r for r in rows if r["input_length"] > LIMIT][:3]
    for i, r in enumerate(over):  # the long rows, put among the first ones
        r["timestamp"] = head[20 * (i + 1)]["timestamp"]
    rows = sorted(head + over, key=lambda r: r["timestamp"])
    log = tmp_path / "mooncake.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with serve(*QUICK) as s:
        proc = psutil.Process(s.proc.pid)
        rss = [proc.memory_info().rss]
        for n in range(2):
            done = replay(
                "--log", str(log), "--target-a", s.url, "--api", "openai-completions", "--speed", "10",
                "--force-output-length", "--no-stream", "--max-concurrency", "500",
                "--results-dir", str(tmp_path / f"results{n}"), timeout=240,
            )  # fmt: skip
            assert done.returncode in (0, 1), done.stderr[-3000:]  # 1: the 400s
            rss.append(proc.memory_info().rss)
        prompt_tokens = s.metric("vllm:prompt_tokens_total")
    (side,) = sides(tmp_path / "results0").values()
    outcomes = {r["replay"]["log_line"]: r["outcome"] for r in side.requests}
    long_lines = {i + 1 for i, r in enumerate(rows) if r in over}
    assert len(outcomes) == len(rows)
    assert {outcomes[i] for i in long_lines} == {"http_400"}
    assert {o for i, o in outcomes.items() if i not in long_lines} == {"ok"}
    assert prompt_tokens == 2 * sum(r["input_length"] for r in head)  # completions: no template
    assert max(rss) < 1 << 30, rss
    assert rss[2] - rss[1] < 0.5 * (rss[1] - rss[0]), rss
