import configargparse
import pytest

from llmchaos.errors import UsageError
from loadtests.options import Settings, add_arguments


def settings(*argv: str) -> Settings:
    """Our options as Locust's parser reads them (it is a configargparse parser)."""
    parser = configargparse.ArgumentParser()
    add_arguments(parser)
    parser.add_argument("-t", "--run-time", type=int)  # Locust's own, read as its parser gives it (seconds)
    return Settings.read(parser.parse_args(list(argv)))


def test_the_defaults_are_valid():
    s = settings()
    assert (s.limits.ttft, s.limits.stall, s.limits.request) == (300.0, 30.0, 600.0)
    assert not s.open_loop


@pytest.mark.parametrize(
    "argv",
    [
        ("--burstiness", "0"),
        ("--burstiness", "-1"),
        ("--burstiness", "nan"),
        ("--rate", "inf"),
        ("--rate", "-5"),
        ("--rate", "nan"),
        ("--stall-limit", "0"),
        ("--ttft-timeout", "-1"),
        ("--request-timeout", "inf"),
        ("--connect-timeout", "0"),
        ("--requests-sample", "5"),
        ("--requests-sample", "-0.1"),
        ("--max-tokens", "-3"),
        ("--max-tokens", "0"),
        ("--long-context-tokens", "-1"),
        ("--prefix-tokens", "-1"),
        ("--prefix-tokens", "100", "--prefixes", "-2"),
        ("--think-time", "inf"),
        ("--push-interval", "0"),
        ("--prometheus-port", "70000"),
        ("--fault-lease", "1"),  # under two renewals: it lapses whenever one is late (it had flapped)
        ("--fault-lease", "0.01"),
        ("--shape", "step", "--levels", "10,inf"),
        ("--shape", "step", "--levels", "10,nan"),
        ("--shape", "step", "--levels", "10", "--stage-duration", "0s"),
        ("--energy-from", "http://p:9090", "--price-per-gpu-hour", "-1"),
        ("--energy-from", "http://p:9090", "--price-per-kwh", "nan"),
        ("--energy-from", "http://p:9090", "--energy-interval", "0"),
    ],
)
def test_a_bad_number_is_one_line_naming_its_flag(argv):
    with pytest.raises(UsageError) as e:
        settings(*argv)
    flag = next(a for a in reversed(argv) if a.startswith("--"))
    assert e.value.field == flag
    assert str(e.value).startswith(f"{flag}: must be")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "argv",
    [
        ("--requests-sample", "0"),
        ("--requests-sample", "1"),
        ("--rate", "0"),
        ("--think-time", "0"),
        ("--max-tokens", "1"),
        ("--fault-lease", "2"),
    ],
)
def test_numbers_at_the_edge_of_their_range_are_valid(argv):
    settings(*argv)


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (("--price-per-gpu-hour", "2"), "--price-per-gpu-hour"),
        (("--energy-selector", '{gpu="0"}'), "--energy-selector"),
        (("--energy-from", "localhost:9090"), "--energy-from"),
        (("--energy-from", "http://p:9090", "--energy-selector", "{gpu=0}"), "--energy-selector"),
    ],
)
def test_energy_options_refused_in_one_line_naming_the_flag(argv, flag):
    with pytest.raises(UsageError) as e:
        settings(*argv)
    assert str(e.value).startswith(flag + ":")


def test_the_energy_source_and_prices_are_read():
    s = settings("--energy-from", "http://p:9090", "--energy-selector", '{gpu="0"}', "--price-per-gpu-hour", "2.5")
    assert s.energy is not None
    assert s.energy.origin == 'http://p:9090 {gpu="0"}'
    assert (s.prices.per_gpu_hour, s.prices.per_kwh) == (2.5, None)
    assert settings().energy is None


def test_prefixes_are_refused_without_their_length():
    with pytest.raises(UsageError) as e:
        settings("--prefixes", "2")
    assert str(e.value) == "--prefixes: read only with --prefix-tokens (the prefixes' length)"


def test_sessions_read_their_turns_and_think_time():
    s = settings("--sessions", "--turns", "3-6", "--turn-think", "500ms-2s")
    assert s.sessions is not None
    assert (s.sessions.turns.low, s.sessions.turns.high) == (3, 6)
    assert (s.sessions.think.low, s.sessions.think.high) == (0.5, 2.0)
    assert settings("--turns", "bad").sessions is None  # read only with --sessions
    s = settings("--sessions")
    assert s.sessions is not None
    assert (s.sessions.turns.to_json(), s.sessions.think.to_json(), s.sessions.tool_rate) == (
        {"distribution": "uniform", "min": 4, "max": 8},
        {"distribution": "constant", "value": 0},
        0.0,
    )
    assert settings("--sessions", "--rate", "2").open_loop  # conversations begun per second


def test_a_profiles_sessions_state_the_draws_and_no_flag_says_them_twice(tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text(
        "sessions:\n  turns: {distribution: poisson, alpha: 5, max: 12}\n"
        "  think: {distribution: exponential, average: 3s}\n  tool_rate: 0.25\n"
        "stages:\n  - {duration: 30s, rate: 2}\n"
    )
    s = settings("--sessions", "--load-profile", str(p), "--api", "gemini")
    assert s.open_loop
    assert s.sessions is not None
    assert (s.sessions.turns.name, s.sessions.turns.mean, s.sessions.turns.cap) == ("poisson", 5, 12)
    assert (s.sessions.think.name, s.sessions.think.mean, s.sessions.tool_rate) == ("exponential", 3.0, 0.25)
    with pytest.raises(UsageError) as e:
        settings("--sessions", "--load-profile", str(p), "--turns", "3")
    assert str(e.value) == "--turns: given by the profile's sessions: too: give one"
    with pytest.raises(UsageError) as e:
        settings("--load-profile", str(p))
    assert str(e.value) == "--load-profile: the profile states conversations (sessions:): give --sessions"
    with pytest.raises(UsageError) as e:
        settings("--sessions", "--load-profile", str(p), "--api", "openai-completions")
    assert str(e.value) == "--load-profile: a completion offers no tools: use --api openai-chat or gemini"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--turns", "0"), "--turns: give whole numbers >= 1, got '0'"),
        (("--turns", "5-2"), "--turns: the range runs backwards: '5-2'"),
        (("--turns", "1-2-3"), "--turns: give A or A-B, got '1-2-3'"),
        (("--turns", ""), "--turns: give A or A-B, got ''"),  # not the default
        (("--turn-think", ""), "--turn-think: give A or A-B, got ''"),
        (("--turn-think", "soon"), "--turn-think: bad duration 'soon' (use e.g. 500ms, 30s, 2m, 1h)"),
        (
            ("--canary-rate", "0.1"),
            "--sessions: a canary is a request of its own, never a turn: leave out --canary-rate",
        ),
    ],
)
def test_bad_session_options_are_one_line_naming_the_flag(argv, message):
    with pytest.raises(UsageError) as e:
        settings("--sessions", *argv)
    assert str(e.value) == message
