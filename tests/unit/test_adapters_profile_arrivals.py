import json
import statistics

import pytest

from llmchaos.errors import UsageError
from loadtests import arrivals, profile
from loadtests.adapters import ADAPTERS


def test_openai_chat_events():
    a = ADAPTERS["openai-chat"]
    assert a.event("[DONE]").done
    ev = a.event(json.dumps({"choices": [{"index": 0, "delta": {"content": "hi"}}]}))
    assert ev.text == "hi" and not ev.done
    usage = a.event(json.dumps({"choices": [], "usage": {"completion_tokens": 7}}))
    assert usage.usage_tokens == 7
    err = a.event(json.dumps({"error": {"message": "boom", "code": 503}}))
    assert (err.error, err.error_code, err.done) == ("boom", 503, True)
    with pytest.raises(ValueError):
        a.event('{"choices": [}')


def test_gemini_terminator_is_the_finish_reason_chunk():
    g = ADAPTERS["gemini"]
    mid = g.event(json.dumps({"candidates": [{"content": {"parts": [{"text": "x"}]}}]}))
    end = g.event(json.dumps({"candidates": [{"content": {"parts": [{"text": "y"}]}, "finishReason": "STOP"}],
                              "usageMetadata": {"candidatesTokenCount": 2}}))
    assert (mid.text, mid.done) == ("x", False) and (end.done, end.usage_tokens) == (True, 2)
    call = g.call("m", "p", "ja", 8, True, True, "k")
    assert call.path == "/v1beta/models/m:streamGenerateContent?alt=sse"
    assert call.headers["x-goog-api-key"] == "k" and json.loads(call.body)["labels"] == {"lang": "ja"}


def test_durations():
    assert profile.duration("150ms") == 0.15 and profile.duration("2m") == 120 and profile.duration(3) == 3.0
    with pytest.raises(UsageError, match="bad duration"):
        profile.duration("10 parsecs", "stage")


@pytest.mark.parametrize("text, where", [
    ("stages:\n  - {duration: 10s, users: 5}\n  - {duration: 10x, users: 9}\n", ":3: stages[1].duration"),
    ("stages:\n  - {duration: 10s, users: -5}\n", ":2: stages[0].users"),
    ("stages:\n  - {duration: 10s}\n", ":2: stages[0]: give exactly one"),
    ("stages:\n  - {duration: 10s, users: 5, colour: red}\n", ":2: stages[0].colour: unknown field"),
    ("stage: []\n", ":1: stage: unknown field"),
    ("stages:\n  - {duration: 1s, users: 5}\n  - {duration: 1s, rate: 5}\n", ":2: stages: mixes"),
    ("stages: [\n", ":2: invalid YAML"),
])
def test_bad_profiles_name_file_line_and_field(tmp_path, text, where):
    p = tmp_path / "p.yaml"
    p.write_text(text)
    with pytest.raises(UsageError) as e:
        profile.load(str(p))
    assert str(e.value).startswith(str(p) + where.split(" ")[0]) and where.split(": ", 1)[-1] in str(e.value)


def test_profile_stages_and_ramp(tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text("ramp: true\nstages:\n  - {duration: 10s, rate: 100}\n  - {duration: 10s, rate: 200}\n")
    prof = profile.load(str(p))
    assert prof.rate(5) == pytest.approx(50) and prof.rate(15) == pytest.approx(150) and prof.rate(25) is None
    step = profile.shape("step", [50, 200, 500, 1000], 30, open_loop=True)
    assert [s.rate for s in step.stages] == [50, 200, 500, 1000] and step.total == 120


def plan(**kw) -> arrivals.ArrivalPlan:
    base = dict(t0=0.0, rate=100.0, arrival="poisson", burstiness=1.0, seed=3, langs=("en", "zh"),
                weights=(3.0, 1.0), duration=200.0)
    return arrivals.ArrivalPlan(**{**base, **kw})


def test_workers_split_one_global_schedule():
    whole = list(arrivals.schedule(plan()))
    shares = [list(arrivals.schedule(plan(worker=i, workers=3))) for i in range(3)]
    assert sorted(x for s in shares for x in s) == whole
    assert abs(len(whole) / 200.0 - 100.0) < 3.0  # the master's rate, over all workers
    assert 0.72 < sum(1 for _, _, lang in whole if lang == "en") / len(whole) < 0.78


def test_gamma_burstiness_changes_dispersion_not_rate():
    def cv(b: float) -> tuple[float, float]:
        times = [t for _, t, _ in arrivals.schedule(plan(arrival="gamma", burstiness=b))]
        gaps = [b - a for a, b in zip(times, times[1:])]
        return len(times) / 200.0, statistics.pstdev(gaps) / statistics.mean(gaps)
    (r_bursty, cv_bursty), (r_smooth, cv_smooth) = cv(0.25), cv(4.0)
    assert abs(r_bursty - 100) < 8 and abs(r_smooth - 100) < 8
    assert cv_bursty > 1.6 and cv_smooth < 0.6
    const = [t for _, t, _ in arrivals.schedule(plan(arrival="constant", duration=1.0))]
    assert len(const) in (99, 100)  # one every 10 ms in [0, 1 s)


def test_a_profile_in_the_plan_sets_the_rate_and_ends_the_schedule():
    stepped = list(arrivals.schedule(plan(arrival="constant", stages=((2.0, 10.0), (2.0, 40.0)), duration=None)))
    assert abs(sum(1 for _, t, _ in stepped if t < 2.0) - 20) <= 1
    assert abs(sum(1 for _, t, _ in stepped if t >= 2.0) - 80) <= 1 and stepped[-1][1] < 4.0
