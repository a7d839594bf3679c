"""The A/B split of a replay against two reference servers: each user goes to the side FNV-1a 64 of
its id says, every request once, and the same user to the same side in two runs and in one process
versus a master with two workers (or Locust's --processes); results in DIR/<run_id>/a and /b, one run id."""

from __future__ import annotations

import pytest

from llmchaos.cli import main
from loadtests.logs.split import side
from tests.integration.replay_helpers import replay, sides
from tests.procs import serve


@pytest.fixture(scope="module")
def servers():
    with serve("--sim-time-scale", "0") as a, serve("--sim-time-scale", "0") as b:
        yield a, b


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    path = tmp_path_factory.mktemp("log") / "synth.jsonl"
    args = ["--duration", "20s", "--rate", "15", "--users", "3000", "--sessions", "0", "--output-median", "6"]
    assert main(["logs", "synth", "--tokens-only", *args, "--out", str(path)]) == 0
    return path


def assignment(tmp_path, log, servers, workers, *more):
    a, b = servers
    proc = replay(
        "--log", str(log), "--target-a", a.url, "--target-b", b.url, "--split", "30", "--speed", "10",
        "--results-dir", str(tmp_path), *more, workers=workers,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = sides(tmp_path)
    assert set(out) == {"a", "b"}
    assert out["a"].run["run_id"] == out["b"].run["run_id"]
    assert out["a"].run["targets"] == [a.url]
    assert out["b"].run["targets"] == [b.url]
    users: dict[str, str] = {}
    lines = []
    for name, s in out.items():
        assert {r["target"] for r in s.requests} == {s.run["targets"][0]}
        assert {r["outcome"] for r in s.requests} == {"ok"}
        for r in s.requests:
            assert users.setdefault(r["replay"]["user_id"], name) == name  # a user never on both sides
            lines.append(r["replay"]["log_line"])
        assert s.run["replay"]["mode"] == "split"
        assert s.run["replay"]["split"] == 30.0
    assert sorted(lines) == list(range(1, len(log.read_text().splitlines()) + 1))  # every request, once
    return users


def test_a_user_lands_on_the_same_side_every_time(tmp_path, log, servers):
    """Each user goes to the side its id's hash says, the same in two runs, with two workers and with --processes 2.

    Long (about 85 s here): four replays of the 20 s log (2 s each at --speed 10), each a fresh Locust that starts,
    reads the log and writes both sides' results, two of them a master with two worker processes."""
    once = assignment(tmp_path / "one", log, servers, workers=0)
    again = assignment(tmp_path / "two", log, servers, workers=0)
    spread = assignment(tmp_path / "workers", log, servers, workers=2)
    forked = assignment(tmp_path / "processes", log, servers, 0, "--processes", "2")  # Locust's own fork
    assert once == again == spread == forked
    assert once == {u: side(u, 30) for u in once}  # FNV-1a 64 of the user id, modulo 100, below 30: B
    on_b = sum(s == "b" for s in once.values()) / len(once)
    assert 0.2 < on_b < 0.4
