"""What a replay does with what it is given: bad log lines (strict: one line naming file, line and
field, exit 2, nothing run; otherwise counted per kind in run.json), bad options, sessions whose turns
keep their order (strict) or their offsets (timed), a window of the log looped, an impossible token
count and a long prompt, a log from a pipe."""

from __future__ import annotations

import contextlib
import json
import os
import threading

import pytest

from tests.integration.replay_helpers import replay, sides
from tests.procs import serve


@pytest.fixture(scope="module")
def server():
    with serve("--sim-time-scale", "1") as s:  # a 30-token answer takes ~0.4 s
        yield s


def write(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def line(t, user="u1", **kw):
    return {"ts": t, "user_id": user, "lang": "en", "input_tokens": 20, "output_tokens": 4, **kw}


BAD = [
    line(0),
    "{oops",
    line(0.1, lang="xx"),
    line(0.2),
    line(0.15),  # back in time
    {"ts": 0.2, "user_id": "u"},
    line(0.3, api="soap"),
    line(0.4),
]


def test_strict_stops_at_the_first_bad_line_with_exit_2(tmp_path, server):
    log = write(tmp_path / "bad.jsonl", BAD)
    proc = replay("--log", str(log), "--target-a", server.url, "--strict", "--results-dir", str(tmp_path / "r"))
    assert proc.returncode == 2
    errors = [x for x in proc.stderr.splitlines() if "error" in x.lower()]
    why = "not JSON: unexpected character, expected a string key: line 1 column 2 (char 1)"
    assert errors == [f"llmchaos: error: {log}:2: line: {why}"]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "r").exists()


def test_without_strict_bad_lines_are_counted_per_kind(tmp_path, server):
    log = write(tmp_path / "bad.jsonl", BAD)
    proc = replay("--log", str(log), "--target-a", server.url, "--results-dir", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    (side,) = sides(tmp_path / "r").values()
    assert sorted(r["replay"]["log_line"] for r in side.requests) == [1, 4, 8]
    problems = side.run["replay"]["log_problems"]
    assert problems["counts"] == {
        "not_json": 1,
        "unknown_lang": 1,
        "backwards": 1,
        "missing_field": 1,
        "unknown_api": 1,
    }
    assert problems["examples"]["backwards"] == [
        {"line": 5, "field": "ts", "error": "goes back 0.05s from the line before"}
    ]
    assert f"{log}: skipped backwards: 1 (lines 5)" in proc.stderr


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (("--split", "20"), "--split: needs --target-b"),
        (("--format", "csv"), "--format: unknown format 'csv'"),
        (("--rate", "5"), "--rate: not used by a replay"),
        (("--speed", "-1"), "--speed: must be a finite number > 0"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(tmp_path, server, argv, error):
    log = write(tmp_path / "ok.jsonl", [line(0)])
    proc = replay("--log", str(log), "--target-a", server.url, *argv)
    assert proc.returncode == 2
    (message,) = [x for x in proc.stderr.splitlines() if "error" in x.lower()]
    assert message.startswith(f"llmchaos: error: {error}")
    assert "Traceback" not in proc.stderr


def sessions(tmp_path, server, order):
    """Three sessions of two turns, the second recorded 50 ms after the first asked for 30 tokens."""
    rows = []
    for k in range(3):
        rows += [line(k, f"u{k}", session_id=f"s{k}", output_tokens=30), line(k + 0.05, f"u{k}", session_id=f"s{k}")]
    log = write(tmp_path / f"{order}.jsonl", sorted(rows, key=lambda r: r["ts"]))
    out = tmp_path / order
    proc = replay("--log", str(log), "--target-a", server.url, "--session-order", order, "--results-dir", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    (side,) = sides(out).values()
    by_line = {r["replay"]["log_line"]: r for r in side.requests}
    turns = [(by_line[2 * k + 1], by_line[2 * k + 2]) for k in range(3)]
    return turns, side.run["replay"]["fidelity"]


@pytest.mark.timing
def test_strict_sessions_send_a_turn_once_the_turn_before_has_ended(tmp_path, server):
    turns, fidelity = sessions(tmp_path, server, "strict")
    for first, second in turns:
        ended = first["intended"] + first["e2e"]
        assert second["sent"] >= ended
        assert second["schedule_lag"] < 0.05  # due when the turn before ended, sent then
    assert fidelity["held_by_session"] == 3
    timed, fidelity = sessions(tmp_path, server, "timed")
    for first, second in timed:
        assert second["sent"] < first["intended"] + first["e2e"]  # at its own offset, while the first streamed
    assert fidelity["held_by_session"] == 0


def test_a_window_of_the_log_looped(tmp_path, server):
    log = write(tmp_path / "ten.jsonl", [line(i * 0.1, f"u{i}") for i in range(10)])
    out = tmp_path / "r"
    proc = replay(
        "--log", str(log), "--target-a", server.url, "--start", "200ms", "--end", "700ms", "--loop", "3",
        "--results-dir", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    (side,) = sides(out).values()
    got = sorted((r["replay"]["loop"], r["replay"]["log_line"]) for r in side.requests)
    assert got == [(loop, n) for loop in range(3) for n in range(3, 8)]
    first = min(r["intended"] for r in side.requests)
    starts = sorted(r["intended"] - first for r in side.requests if r["replay"]["log_line"] == 3)
    assert starts == pytest.approx([0.0, 0.5, 1.0], abs=1e-6)  # each pass 500 ms after the one before


@pytest.mark.timing
def test_max_concurrency_caps_the_requests_in_flight(tmp_path, server):
    """Twelve requests due at once, each streaming 30 tokens (~0.4 s): three at a time, the rest late."""
    log = write(tmp_path / "burst.jsonl", [line(0, f"u{i}", output_tokens=30) for i in range(12)])
    out = tmp_path / "r"
    proc = replay("--log", str(log), "--target-a", server.url, "--max-concurrency", "3", "--results-dir", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    (side,) = sides(out).values()
    spans = sorted((r["sent"], r["intended"] + r["e2e"]) for r in side.requests)
    assert len(spans) == 12
    in_flight = [sum(s <= t < e for s, e in spans) for t, _ in spans]
    assert max(in_flight) == 3
    assert sum(r["schedule_lag"] > 0.2 for r in side.requests) >= 6  # waited for a user to be free


@pytest.mark.timing  # the neighbours' lag is a time: a starved process lags whatever it builds
@pytest.mark.timeout(300)
def test_an_impossible_token_count_is_skipped_and_a_long_prompt_never_holds_the_run(tmp_path, server):
    """A Mooncake line asking for 1e11 prompt tokens is counted bad with its line; one of 300,000 is
    built in parts between which the generator runs (its neighbours go on time) and `-t` holds."""
    rows = [
        {"timestamp": 0, "input_length": 1e11, "output_length": 4, "hash_ids": [1]},
        {"timestamp": 100, "input_length": 300_000, "output_length": 4, "hash_ids": [2]},
    ] + [{"timestamp": 200 + 50 * i, "input_length": 20, "output_length": 4, "hash_ids": [3 + i]} for i in range(20)]
    log = write(tmp_path / "mooncake.jsonl", rows)
    out = tmp_path / "r"
    args = ("--log", str(log), "--target-a", server.url, "-t", "8s", "--results-dir", str(out))
    proc = replay(*args, "--exit-code-on-error", "0", timeout=120)  # the sim refuses 300,000 tokens: http_400
    assert proc.returncode == 0, proc.stderr[-2000:]
    (side,) = sides(out).values()
    assert side.run["replay"]["log_problems"]["examples"]["bad_value"][0] | {"error": ""} == {
        "line": 1, "field": "input_length", "error": ""
    }  # fmt: skip
    small = [r for r in side.requests if r["replay"]["log_line"] > 2]
    assert len(small) == 20
    assert max(r["schedule_lag"] for r in small) < 1.0  # not queued behind the long prompt's building


def test_a_log_from_a_pipe_is_refused_up_front_in_one_line(tmp_path, server):
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)

    def feed() -> None:
        with contextlib.suppress(OSError):  # the reader that unblocks it below reads nothing
            fifo.write_text(json.dumps(line(0)) + "\n")

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        proc = replay("--log", str(fifo), "--target-a", server.url, "--results-dir", str(tmp_path / "r"), timeout=60)
    finally:
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))  # lets the writer's open return
        writer.join(5)
    assert proc.returncode == 2
    (message,) = [x for x in proc.stderr.splitlines() if "error" in x.lower()]
    assert message == (
        f"llmchaos: error: {fifo}: --log: not a regular file (a pipe?): a replay reads its log more than once "
        "(the master, each worker, each --loop pass); write it to a file first"
    )
