"""The replay's schedule: the log's offsets sped up, a window of it, passes back to back, shares of
workers that add up to the whole with each session on one; sessions in order when strict."""

import json

import configargparse
import pytest

from loadtests.replay.dispatch import timeline
from loadtests.replay.settings import ReplaySettings, add_replay_arguments


def settings(log, *argv):
    parser = configargparse.ArgumentParser()
    parser.add_argument("--host", default="http://a")
    add_replay_arguments(parser)
    return ReplaySettings.read(parser.parse_args(["--log", str(log), "--lang-mix", "en=1", *argv]))


@pytest.fixture
def log(tmp_path):
    """Twenty requests one second apart; users u0..u4, sessions s0..s9 of two turns each."""
    p = tmp_path / "log.jsonl"
    lines = [
        {"ts": 100 + i, "user_id": f"u{i % 5}", "session_id": f"s{i // 2}", "input_tokens": 8, "output_tokens": 2}
        for i in range(20)
    ]
    p.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return p


def times(s, *share):
    return [(loop, at, rec.line) for loop, at, rec, _ in timeline(s, *share)]


def test_offsets_sped_up_windowed_and_looped(log):
    assert times(settings(log))[:3] == [(0, 0.0, 1), (0, 1.0, 2), (0, 2.0, 3)]
    assert [at for _, at, _ in times(settings(log, "--speed", "4"))][:3] == [0.0, 0.25, 0.5]
    window = times(settings(log, "--start", "5s", "--end", "9s"))
    assert window == [(0, 0.0, 6), (0, 1.0, 7), (0, 2.0, 8), (0, 3.0, 9)]
    looped = times(settings(log, "--loop", "3", "--speed", "2"))
    assert len(looped) == 60
    # each pass starts where the one before ended: 19 s of log and one mean gap (1 s), sped up twice
    assert [at for loop, at, line in looped if line == 1] == [0.0, 10.0, 20.0]
    assert [loop for loop, _, _ in looped] == [0] * 20 + [1] * 20 + [2] * 20
    windowed_loop = times(settings(log, "--start", "5s", "--end", "9s", "--loop", "2"))
    assert [at for _, at, _ in windowed_loop] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]


def test_worker_shares_add_up_to_the_whole_with_sessions_kept_whole(log):
    s = settings(log)
    whole = times(s)
    shares = [times(s, w, 3) for w in range(3)]
    assert sorted(x for share in shares for x in share) == whole
    assert all(shares)
    for share in shares:
        lines = {line for _, _, line in share}
        assert all(((line - 1) ^ 1) + 1 in lines for line in lines)  # both turns of each session


def test_sampling_keeps_whole_sessions_and_languages_filter(log):
    kept = [rec.session for _, _, rec, _ in timeline(settings(log, "--sample", "0.5", "--seed", "3"))]
    sessions = set(kept)
    assert 0 < len(sessions) < 10
    assert len(kept) == 2 * len(sessions)  # both turns of a kept session
    mixed = settings(log, "--lang-mix", "en=1,de=1")
    langs = {rec.user: lang for _, _, rec, lang in timeline(mixed)}
    only_de = [rec.user for _, _, rec, _ in timeline(settings(log, "--lang-mix", "en=1,de=1", "--langs", "de"))]
    assert only_de
    assert all(langs[u] == "de" for u in only_de)
