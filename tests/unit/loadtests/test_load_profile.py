import math

import pytest
from hypothesis import example, given

from llmchaos.errors import UsageError
from loadtests import load_profile
from tests.yaml_documents import DOCUMENTS, load_text


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("stages:\n  - {duration: 10s, users: 5}\n  - {duration: 10x, users: 9}\n", ":3: stages[1].duration"),
        ("stages:\n  - {duration: 10s, users: -5}\n", ":2: stages[0].users"),
        ("stages:\n  - {duration: 10s}\n", ":2: stages[0]: give exactly one"),
        ("stages:\n  - {duration: 10s, users: 5, colour: red}\n", ":2: stages[0].colour: unknown field"),
        ("stage: []\n", ":1: stage: unknown field"),
        ("stages:\n  - {duration: 1s, users: 5}\n  - {duration: 1s, rate: 5}\n", ":2: stages: mixes"),
        ("stages: [\n", ":2: invalid YAML"),
        ("sessions: {turns: 3, pace: 2}\nstages:\n  - {duration: 1s, rate: 5}\n", ":1: sessions.pace: unknown field"),
        ("sessions:\n  tool_rate: 2\nstages:\n  - {duration: 1s, rate: 5}\n", ":2: sessions.tool_rate: a share"),
        (
            "sessions:\n  think: {distribution: exponential}\nstages:\n  - {duration: 1s, rate: 5}\n",
            ":2: sessions.think.average: missing",
        ),
        ("sessions: 3\nstages:\n  - {duration: 1s, rate: 5}\n", ":1: sessions: must be a mapping"),
    ],
)
def test_bad_profiles_name_file_line_and_field(tmp_path, text, where):
    p = tmp_path / "p.yaml"
    p.write_text(text)
    with pytest.raises(UsageError) as e:
        load_profile.load(str(p))
    assert str(e.value).startswith(str(p) + where.split(" ")[0])
    assert where.split(": ", 1)[-1] in str(e.value)


def test_a_profiles_sessions_state_turns_think_and_tools(tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text(
        "sessions:\n  turns: 2-6\n  think: {distribution: lognormal, average: 4s, max: 30s}\n"
        "stages:\n  - {duration: 1m, users: 8}\n"
    )
    conv = load_profile.load(str(p)).sessions
    assert conv is not None
    assert conv.turns is not None
    assert conv.think is not None
    assert (conv.turns.name, conv.turns.low, conv.turns.high, conv.turns.whole) == ("uniform", 2, 6, True)
    assert (conv.think.name, conv.think.cap, conv.tool_rate) == ("lognormal", 30.0, None)


def test_profile_stages_and_ramp(tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text("ramp: true\nstages:\n  - {duration: 10s, rate: 100}\n  - {duration: 10s, rate: 200}\n")
    prof = load_profile.load(str(p))
    assert prof.rate(5) == pytest.approx(50)
    assert prof.rate(15) == pytest.approx(150)
    assert prof.rate(25) is None
    step = load_profile.shape("step", [50, 200, 500, 1000], 30, open_loop=True)
    assert [s.rate for s in step.stages] == [50, 200, 500, 1000]
    assert step.total == 120


@pytest.mark.fuzz
@given(text=DOCUMENTS)
@example(text="? []\n: 1\n")  # was a TypeError (unhashable key)
@example(text="stages:\n  - {duration: 1s, users: .nan}\n")  # was a ValueError
@example(text="stages:\n  - {duration: .inf, rate: .inf}\n")  # was a profile that never ends at an endless rate
@example(text="stages:\n  - {duration: !!timestamp x, users: 1}\n")  # was an AttributeError
@example(text="\x1f")  # was an error without a line
@example(text="? '\n\n  '\n: null\n")  # a field name with a newline: an error of two lines
def test_any_yaml_is_a_profile_or_one_line_naming_file_and_line(text):
    got = load_text(load_profile.load, text)
    if isinstance(got, load_profile.Profile):
        assert got.stages
        for s in got.stages:
            assert 0 <= s.duration < math.inf
            assert all(0 < v < math.inf for v in (s.users, s.spawn_rate, s.rate) if v is not None)
