"""Canaries: the file read strictly (file, line, field), drawn at their rate, their answers judged
`wrong` only when whole and failing their check, sent greedily, counted in run.json and the summary."""

from __future__ import annotations

import json

import orjson
import pytest

from llmchaos import languages
from llmchaos.errors import UsageError
from llmchaos.run import CanaryCount, canary_rows
from llmchaos.run.table import canary_lines
from loadtests import canaries
from loadtests.adapters import ADAPTERS, Ask
from loadtests.record import RequestRecord
from loadtests.sources import Due, Loop
from tests.unit.loadtests.test_options import settings

LANGS = tuple(languages.registry())
ONE = """seed: 7
canaries:
  - {lang: en, prompt: "What is 17 + 25?", expect: {contains: "42"}}
"""


def write(tmp_path, text: str) -> str:
    path = tmp_path / "canaries.yaml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("api", sorted(ADAPTERS))
def test_the_reference_file_has_canaries_for_every_language_under_every_api(api):
    by_lang = canaries.load(canaries.reference_file(), LANGS, api)
    assert set(by_lang) == set(LANGS)
    for found in by_lang.values():
        assert found
        assert all(c.check == "equals" and c.seed == 1234 and c.max_tokens == 16 for c in found)
        assert all(c.fault(c.expected) is None and c.fault(c.expected + "!") is not None for c in found)


def test_the_example_for_real_models_reads_and_checks_loosely():
    by_lang = canaries.load(str(canaries.reference_file()).replace("reference", "example-real-model"), LANGS, "gemini")
    capital = next(c for c in by_lang["en"] if c.name == "en-capital")
    assert capital.fault("The capital is Paris.") is None
    assert capital.fault("PARIS") is None
    why = capital.fault("!!,;.:!?" * 20)
    assert why is not None
    assert why.startswith("canary en-capital: expected it to match '(?i)paris', answered '!!,;")
    assert why.endswith("…'")
    assert "\n" not in why


def test_defaults_and_a_canary_own_values(tmp_path):
    path = write(
        tmp_path,
        ONE + '  - {name: mine, lang: en, prompt: p, expect: {equals: "x"}, seed: 3, max_tokens: 5, api: [gemini]}\n',
    )
    first, mine = canaries.load(path, ("en",), "gemini")["en"]
    assert (first.name, first.seed, first.max_tokens, first.apis) == ("canaries[0]", 7, 16, frozenset())
    assert (mine.name, mine.seed, mine.max_tokens, mine.apis) == ("mine", 3, 5, frozenset({"gemini"}))
    assert [c.name for c in canaries.load(path, ("en",), "openai-chat")["en"]] == ["canaries[0]"]


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("canaries: []\n", "1: canaries: must be a non-empty list"),
        ("seed: 1\n", "1: canaries: missing"),
        ("canaries: [{lang: en, prompt: p, expect: {contains: x}}]\nextra: 1\n", "2: extra: unknown field"),
        ("max_tokens: 0\ncanaries: [{lang: en, prompt: p, expect: {contains: x}}]\n", "1: max_tokens: must be a whole"),
        ("canaries:\n  - {lang: en, prompt: p}\n", "2: canaries[0].expect: missing"),
        ("canaries:\n  - {lang: xx, prompt: p, expect: {contains: x}}\n", "2: canaries[0].lang: unknown language"),
        (
            "canaries:\n  - {lang: en, prompt: '', expect: {contains: x}}\n",
            "2: canaries[0].prompt: must be a non-empty",
        ),
        ("canaries:\n  - {lang: en, prompt: p, expect: {contains: x, regex: y}}\n", "2: canaries[0].expect: give"),
        ("canaries:\n  - {lang: en, prompt: p, expect: {startswith: x}}\n", "2: canaries[0].expect: give exactly"),
        ("canaries:\n  - {lang: en, prompt: p, expect: {regex: '(unclosed'}}\n", "2: canaries[0].expect.regex: not"),
        ("canaries:\n  - {lang: en, prompt: p, expect: {contains: 5}}\n", "2: canaries[0].expect.contains: must"),
        ("canaries:\n  - {lang: en, prompt: p, expect: {contains: x}, api: gemini}\n", "2: canaries[0].api: must"),
        ("canaries:\n  - {lang: en, prompt: p, expect: {contains: x}, api: [grpc]}\n", "2: canaries[0].api: must"),
        ("canaries:\n  - {lang: en, prompt: p, expect: {contains: x}, seed: -1}\n", "2: canaries[0].seed: must"),
        ("canaries:\n  - {lang: en, prompt: p, expect: {contains: x}, temp: 0}\n", "2: canaries[0].temp: unknown"),
        ("canaries:\n  - {lang: de, prompt: p, expect: {contains: x}}\n", "canaries: no canary for en under gemini"),
    ],
)
def test_a_bad_canary_file_is_one_line_naming_file_line_and_field(tmp_path, text, where):
    path = write(tmp_path, text)
    with pytest.raises(UsageError) as e:
        canaries.load(path, ("en",), "gemini")
    message = str(e.value)
    assert message.startswith(path + (":" if where[0].isdigit() else ": ")), message
    assert where in message
    assert "\n" not in message


def test_the_options_read_the_file_only_with_a_rate(tmp_path):
    assert settings().canaries is None
    assert settings("--canary-rate", "0.5", "--langs", "en,de").canaries is not None
    with pytest.raises(UsageError, match="no canary for de under openai-chat"):
        settings("--canary-rate", "0.5", "--langs", "en,de", "--canaries", write(tmp_path, ONE))
    with pytest.raises(UsageError, match="--canaries: read only with --canary-rate"):
        settings("--canaries", write(tmp_path, ONE))  # not silently ignored
    with pytest.raises(UsageError, match="--canary-rate: must be"):
        settings("--canary-rate", "1.5")


def test_canaries_are_drawn_at_their_rate_from_the_seed():
    by_lang = canaries.load(canaries.reference_file(), ("en", "de"), "openai-chat")

    def draws(rate: float, seed: int = 0) -> list[str | None]:
        drawn = canaries.Canaries(by_lang, rate, seed)
        return [c.name if (c := drawn.draw("en")) else None for _ in range(2000)]

    assert set(draws(0.0)) == {None}
    assert None not in draws(1.0)
    assert set(draws(1.0)) == {c.name for c in by_lang["en"]}
    quarter = draws(0.25)
    assert 0.2 < sum(d is not None for d in quarter) / len(quarter) < 0.3
    assert quarter == draws(0.25)
    assert quarter != draws(0.25, seed=1)


@pytest.mark.parametrize("api", sorted(ADAPTERS))
def test_a_canary_is_asked_greedily_with_its_seed(api):
    body = orjson.loads(ADAPTERS[api].call(Ask("m", "en", "p", 16, greedy_seed=1234)).body)
    asked = body.get("generationConfig", body)
    assert (asked["temperature"], asked["seed"]) == (0, 1234)
    plain = orjson.loads(ADAPTERS[api].call(Ask("m", "en", "p", 16)).body)
    assert "temperature" not in plain.get("generationConfig", plain)


def loop_with(rate: float) -> Loop:
    s = settings("--canary-rate", str(rate), "--langs", "en", "--max-tokens", "128")
    loop = Loop(s, "http://target")
    loop.configure(s, "http://target", is_worker=False)
    return loop


def test_the_loop_sends_canaries_with_their_own_length_and_judges_their_answers():
    loop = loop_with(1.0)
    due = loop.next("en", 0)
    canary = due.canary
    assert canary is not None
    assert due.call is not None
    body = orjson.loads(due.call.body)
    assert body["messages"][0]["content"] == canary.prompt
    assert (body["max_tokens"], body["temperature"], body["seed"]) == (16, 0, 1234)

    def ended(outcome: str, chunks: list[str], thinking: dict[int, int] | None = None) -> RequestRecord:
        rec = RequestRecord("en", "openai-chat", "t", outcome=outcome, chunks=chunks, thinking=thinking or {})
        loop.ended(due, {"a": rec})
        assert rec.canary == canary.name
        return rec

    assert ended("ok", [canary.expected]).outcome == "ok"
    thought = ended("ok", ["hmm, " + canary.expected[:3], canary.expected[3:]], {0: 5})
    assert thought.outcome == "ok"  # the thinking is no part of the answer checked
    wrong = ended("ok", ["!?!?"])
    assert wrong.outcome == "wrong"
    assert wrong.error == canary.fault("!?!?")
    cut = ended("truncated", ["!?"])
    assert cut.outcome == "truncated"  # a stream cut short is that, whatever it said


def test_an_ordinary_request_is_not_judged():
    loop = loop_with(0.0)
    due = loop.next("en", 0)
    rec = RequestRecord("en", "openai-chat", "t", chunks=["anything"])
    loop.ended(due, {"a": rec})
    assert due.canary is None
    assert (rec.outcome, rec.canary) == ("ok", None)
    assert Due("en", "openai-chat", None, None).canary is None


def test_run_json_counts_canaries_per_phase_and_the_summary_says_where_they_were_wrong():
    key = ("t", "en", "gemini")
    counts: dict[tuple[str, ...], int] = {
        (*key, "baseline", "canary"): 10,
        (*key, "corrupt", "canary"): 4,
        (*key, "corrupt", "issued"): 9,
    }
    outcomes: dict[tuple[str, ...], int] = {
        (*key, "corrupt", "wrong"): 3,
        (*key, "corrupt", "ok"): 6,
        (*key, "baseline", "ok"): 30,
    }
    rows = canary_rows(counts, outcomes)
    assert [(r.phase, r.sent, r.wrong) for r in rows] == [("baseline", 10, 0), ("corrupt", 4, 3)]
    with pytest.raises(ValueError, match="wrong 5 of 4 sent"):
        CanaryCount(**{**json.loads(rows[1].model_dump_json()), "wrong": 5})

    class Run:
        canaries = rows

    assert canary_lines(Run()) == [  # type: ignore[arg-type]
        "canaries: 14 sent, 3 answered wrong (200, whole, failed its check): corrupt en 3 of 4"
    ]
    Run.canaries = rows[:1]
    assert canary_lines(Run()) == ["canaries: 10 sent, none answered wrong"]  # type: ignore[arg-type]
