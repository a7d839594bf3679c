"""The public traces replayed against the reference server, the first rows of each at --speed 20:
every row sent once, prompts of exactly the recorded token counts (the server's own prompt-token
counter), the recorded output lengths asked for and delivered, shared hash_ids prefixes found in the
server's prefix cache, and the schedule's lag reported."""

from __future__ import annotations

import csv
import json
import math

from tests.integration.replay_helpers import replay, sides
from tests.procs import serve
from tests.traces import AZURE, MOONCAKE, head

ROWS = 2000  # Azure's
MOONCAKE_ROWS = 1000  # 11.9 M prompt tokens, 2.0 M of them in prefixes shared with an earlier request
# A zero-cost engine that admits everything: the server's own tokenizing of 25 M prompt tokens is its
# work; its prefix cache holds the traces' 33,000 distinct 512-token blocks (no evictions).
SERVER = (
    "--sim-time-scale",
    "0",
    "--max-num-seqs",
    "512",
    "--max-num-batched-tokens",
    "65536",
    "--max-waiting",
    "4096",
)


def common(tmp_path, log, server):
    """The log replayed in one process at 20 times its speed; whole answers (20x the traces' output
    rate is more SSE events than this generator reads on a shared core), no cap on concurrency."""
    proc = replay(
        "--log", str(log), "--target-a", server.url, "--api", "openai-completions", "--speed", "20",
        "--force-output-length", "--no-stream", "--max-concurrency", "2000", "--results-dir", str(tmp_path / "results"),
        timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    (side,) = sides(tmp_path / "results").values()
    return side


def check_sent_once(side, lines):
    assert sorted(r["replay"]["log_line"] for r in side.requests) == lines
    assert {r["outcome"] for r in side.requests} == {"ok"}
    fid = side.run["replay"]["fidelity"]
    assert fid["recorded"] == fid["sent"] == len(lines)
    assert sum(m["recorded"] for m in fid["per_minute"]) == len(lines)
    assert fid["lag"]["count"] == len(lines)
    assert math.isfinite(fid["lag"]["p99"])


def test_azure_conversation_trace(tmp_path):
    """The Azure conversation trace's first 2,000 rows: each sent once, its prompt its recorded size, its
    recorded output length asked for and delivered.

    Long (about 95 s here): the rows' 7 minutes replayed at --speed 20 (21 s), with 2.2 M prompt tokens that
    the replay writes and the server tokenizes, and 530,000 output tokens generated."""
    log = head(AZURE, ROWS, tmp_path / "azure.csv")
    with open(log, newline="") as f:
        rows = list(csv.DictReader(f))
    with serve(*SERVER) as server:
        side = common(tmp_path, log, server)
        prompt_tokens = server.metric("vllm:prompt_tokens_total")
        requests = server.metric("vllm:request_prompt_tokens_count")
    check_sent_once(side, list(range(2, ROWS + 2)))
    assert requests == ROWS
    assert prompt_tokens == sum(int(r["ContextTokens"]) for r in rows)  # every prompt exactly its recorded size
    lengths = side.run["replay"]["output_lengths"]
    asked = sum(max(1, int(r["GeneratedTokens"])) for r in rows)
    assert sum(x["requested"] for x in lengths) == sum(x["delivered"] for x in lengths) == asked
    assert sum(x["short"] for x in lengths) == 0
    assert {x["lang"] for x in lengths} == {"en", "de", "fr", "es", "it", "pt", "zh", "ja"}  # the registry's mix


def shared_prefix_tokens(rows, block=512, cache_block=16):
    """Prompt tokens a prefix cache can find: for each request, the leading blocks of its hash_ids
    some earlier request also had (in full 16-token cache blocks, one token left to compute)."""
    seen, total = set(), 0
    for r in rows:
        ids, n = r["hash_ids"], r["input_length"]
        k = 0
        while k < len(ids) and ids[k] in seen and (k + 1) * block < n:
            k += 1
        total += min(k * block, (n - 1) // cache_block * cache_block)
        seen.update(ids[: max(0, (n - 1) // block)])  # a partial last block never completes a 512-token one
    return total


def test_mooncake_trace_shares_prefixes(tmp_path):
    """The Mooncake trace's first 1,000 rows: each sent once, its prompt its recorded size, and the prefixes
    its hash_ids share found in the server's prefix cache.

    Long (about 35 s here): the rows' 4.5 minutes replayed at --speed 20 (14 s), with 11.9 M prompt tokens
    (12,000 a request) that the replay writes and the server tokenizes and hashes into its prefix cache."""
    log = head(MOONCAKE, MOONCAKE_ROWS, tmp_path / "mooncake.jsonl")
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    longest = max(r["input_length"] + r["output_length"] for r in rows)
    with serve(*SERVER, "--max-model-len", str(longest + 1), "--num-blocks", "1600000") as server:
        side = common(tmp_path, log, server)
        m = server.metrics()
        prompt_tokens = server.metric("vllm:prompt_tokens_total")
        hits = server.metric("vllm:prefix_cache_hits_total")
    check_sent_once(side, list(range(1, MOONCAKE_ROWS + 1)))
    assert prompt_tokens == sum(r["input_length"] for r in rows)
    expected = shared_prefix_tokens(rows)
    assert expected > 1_500_000, expected
    assert 0.9 * expected <= hits <= expected + 16 * MOONCAKE_ROWS, (
        hits,
        expected,
        {k: v for k, v in m.items() if "prefix" in k},
    )
