"""Logs as an attacker writes them: an impossible token count, a timestamp of 1e308, a binary or
gzipped file, a pipe, a 50 MB line. Each is a result (the line counted bad, with its number) or one
line and exit status 2; never a hang, a traceback or memory that follows the file."""

from __future__ import annotations

import gzip
import json
import os
import threading
import tracemalloc

import pytest

from llmchaos import tokenizer
from llmchaos.cli import main
from llmchaos.errors import UsageError
from loadtests.logs import formats, sized_prompts, stats
from loadtests.logs.problems import Problems
from loadtests.logs.split import LangMix
from tests.unit.loadtests.logs.reading import jsonl, read, records


def mooncake(t: int, n: object = 600, out: object = 10) -> dict:
    return {"timestamp": t, "input_length": n, "output_length": out, "hash_ids": [1, 2]}


@pytest.mark.parametrize("bad", [1e11, 1e308, 2**21 + 1])
def test_an_impossible_token_count_is_a_bad_value_naming_its_line(tmp_path, bad):
    p = jsonl(tmp_path, [mooncake(0), mooncake(1, bad), mooncake(2, 600, bad)])
    recs, problems = read(p)
    assert [r.line for r in recs] == [1]
    assert [(e["line"], e["field"]) for e in problems.examples["bad_value"]] == [
        (2, "input_length"),
        (3, "output_length"),
    ]
    assert "must be a whole number from" in problems.examples["bad_value"][0]["error"]


def test_the_longest_prompt_is_built_in_parts_a_dispatcher_yields_between():
    n = 2**21  # the most a reader lets through
    sizes = [tokenizer.count(part) for part in sized_prompts.parts("en", n // 64, "0:1", (7,), n)]
    assert max(sizes) <= sized_prompts.PART_TOKENS
    assert sum(sizes) == n // 64
    assert tokenizer.count(sized_prompts.prompt("de", 20_000, "0:2")) == 20_000


@pytest.mark.timeout(60)
def test_stats_count_a_timestamp_of_1e308_bad_and_span_centuries_in_a_few_rows(tmp_path, capsys):
    line = {"user_id": "u", "lang": "en", "input_tokens": 5, "output_tokens": 5}
    p = jsonl(tmp_path, [{**line, "ts": 0}, {**line, "ts": 1e308}, {**line, "ts": 9e12}])
    assert main(["logs", "stats", str(p), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["requests"] == 2
    assert data["problems"]["examples"]["bad_value"][0]["line"] == 2
    assert data["per_minute"] == [[0, 1], [150_000_000_000, 1]]  # the minutes that hold requests
    assert main(["logs", "stats", str(p)]) == 0
    assert len(capsys.readouterr().out.splitlines()) < 80


def test_binary_garbage_is_one_line_and_exit_2(tmp_path, capsys):
    p = tmp_path / "random.bin"
    p.write_bytes(b"PK\x03\x04\r\x01\x02,x\n" + bytes(range(256)) * 40)  # a CR inside the first line: _csv.Error
    for fmt in ("auto", "azure"):
        assert main(["logs", "stats", str(p), "--format", fmt]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert err.startswith(f"llmchaos: error: {p}:1: ")
        assert "Traceback" not in err


def test_gzip_is_read_as_it_is_by_its_magic_bytes_or_its_name(tmp_path, capsys):
    rows = "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
        f"2024-01-01 00:00:{s:02d},{100 + s},{s}\n" for s in range(30)
    )
    for name in ("trace.csv.gz", "trace.csv"):  # a gzip file by its name, and one by its bytes alone
        (tmp_path / name).write_bytes(gzip.compress(rows.encode()))
        assert main(["logs", "stats", str(tmp_path / name), "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert (data["requests"], data["input_tokens"]["max"]) == (30, 129)
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(gzip.compress(b'{"ts": 1, "user_id": "u", "input_tokens": 3}\n' * 1000)[:-40])
    assert main(["logs", "stats", str(cut)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "unreadable" in err


@pytest.mark.timeout(60)
def test_a_pipe_is_read_once_from_its_first_line(tmp_path):
    rows = [{"ts": t, "user_id": f"u{t}", "lang": "en", "input_tokens": 9} for t in range(3000)]
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text("".join(json.dumps(r) + "\n" for r in rows)))
    writer.start()
    try:
        with formats.source(fifo).opened(Problems(str(fifo))) as log:
            got = [r.line for r in log.records]
            assert log.module.NAME == "llmchaos"
    finally:
        writer.join()
    assert got == list(range(1, 3001))


def test_a_replay_refuses_a_pipe_up_front(tmp_path):
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match=r"log.fifo: --log: not a regular file \(a pipe\?\)"):
        formats.source(fifo).rereadable("--log")
    formats.source(jsonl(tmp_path, [mooncake(0)])).rereadable("--log")


def test_auto_quotes_the_whole_first_line(tmp_path):
    head = '{"when": 1, "who": "a user whose first line is longer than eighty bytes, which used to be cut off"}'
    p = tmp_path / "x.jsonl"
    p.write_text(head + "\n")
    with pytest.raises(UsageError) as e:
        read(p)
    assert repr(head.encode()) in str(e.value)
    assert str(e.value).startswith(f"{p}:1: --format: cannot tell the format from the first line")


def test_a_line_over_the_limit_is_counted_with_its_number_in_memory_that_follows_the_limit(tmp_path):
    good = b'{"ts": %d, "user_id": "u", "lang": "en", "request": {"messages": [{"role": "user", "content": "hi"}]}}\n'
    p = tmp_path / "big.jsonl"
    with open(p, "wb") as f:
        f.write(good % 1)
        f.write(b'{"ts": 2, "user_id": "u", "request": {"prompt": "' + b"x" * 50_000_000 + b'"}}\n')
        f.write(good % 3)
    limit = 2**20
    tracemalloc.start()
    try:
        problems = Problems(str(p))
        recs = list(formats.source(p, max_line=limit).read(problems))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [r.line for r in recs] == [1, 3]
    assert problems.examples["too_long"] == [
        {"line": 2, "field": "line", "error": f"longer than {limit} bytes (--max-line-bytes)"}
    ]
    assert peak < 4 * limit


def test_stats_rate_rows_divide_by_the_seconds_they_cover_and_say_what_is_estimated():
    rows = [{"ts": t, "user_id": f"u{t}", "lang": "en", "input_tokens": 4} for t in range(90)]
    problems = Problems("log")
    text = stats.render(
        "log", "llmchaos", stats.gather(records(rows, problems), LangMix.parse("en=1")).to_json(problems)
    )
    table = [line.split() for line in text.splitlines() if line.startswith("    0h")]
    assert table[0][:3] == ["0h00m", "60", "1.00"]
    assert table[1][:3] == ["0h01m", "30", "1.03"]
    assert table[1][-2:] == ["(over", "29s)"]
    many = stats.LogStats(LangMix.parse("en=1"))
    for rec in records([{"ts": 0, "user_id": f"u{i}", "input_tokens": 4} for i in range(5000)]):
        many.add(rec)
    data = many.to_json(Problems("log"))
    assert data["users_estimated"]
    assert not data["sessions_estimated"]
    assert "users: ~" in stats.render("log", "llmchaos", data)


def test_a_huge_max_tokens_is_shown_as_it_is_not_as_a_histogram_clamp():
    s = stats.LogStats(LangMix.parse("en=1"))
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 10**12}
    s.add(next(records([{"ts": 0, "user_id": "u", "request": body}])))
    assert s.to_json(Problems("log"))["output_tokens"]["max"] == pytest.approx(10**12, rel=1e-3)
