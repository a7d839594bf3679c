import itertools
import tracemalloc
from pathlib import Path

import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from faults import schedule
from faults.injectors import KINDS
from llmchaos.errors import UsageError
from tests.unit.faults.schedules import GOOD, assert_rejected, load


def test_windows_repeat_and_sort(tmp_path):
    s = load(tmp_path, GOOD)
    assert s.seed == 7
    windows = s.windows(horizon=13)
    assert [(w.name, w.start, w.end) for w in windows] == [
        ("slow-gpu", 0.5, 3.5),
        ("drop", 2.0, 3.0),
        ("drop", 7.0, 8.0),
        ("drop", 12.0, 13.0),
    ]


BAD = [
    (GOOD.replace("kind: sse", "kind: plague"), ":4: faults[0].kind: unknown kind 'plague'"),
    (
        GOOD.replace("at: 500ms", "at: 1500ms")
        .replace("kind: gpu_clock", "kind: sse")
        .replace('{sim: "http://127.0.0.1:8000"}', '{proxy: "127.0.0.1:9100"}')
        .replace("{graphics_mhz: 660}", "{}"),
        ":3: faults[0]: overlaps 'slow-gpu'",
    ),
    (GOOD.replace("duration: 3s", "duration: -3s"), ":14: faults[1].duration: bad duration '-3s'"),
    (GOOD.replace('    target: {proxy: "127.0.0.1:9100"}\n', ""), ":3: faults[0].target: missing"),
    (GOOD.replace("    every: 5s\n", "    every: 5s\n    colour: red\n"), ":9: faults[0].colour: unknown field"),
    (GOOD.replace("at: 2s", "at: 2 fortnights"), ":6: faults[0].at: bad duration"),
    (GOOD.replace("{drop_ratio: 0.15}", "{drop_ratio: 3}"), ":9: faults[0].params.drop_ratio: drop_ratio must"),
    (GOOD.replace("{graphics_mhz: 660}", "{graphics_mhz: fast}"), ":15: faults[1].params.graphics_mhz: must"),
    (
        GOOD.replace("{graphics_mhz: 660}", "{graphics_mhz: [800, 500]}"),
        ":15: faults[1].params.graphics_mhz: a range is",
    ),
    (
        GOOD.replace("{graphics_mhz: 660}", "{graphics_mhz: [500]}"),
        ":15: faults[1].params.graphics_mhz: must be a clock",
    ),
    (
        GOOD.replace("{graphics_mhz: 660}", "{graphics_mhz: [500, 8e9]}"),
        ":15: faults[1].params.graphics_mhz: must be a",
    ),
    (GOOD.replace("every: 5s", "every: 500ms"), ":8: faults[0].every: must be at least the duration"),
    (GOOD.replace("name: slow-gpu", "name: drop"), ":10: faults[1].name: duplicate name 'drop'"),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_bad_schedules_name_file_line_and_field(tmp_path, text, message):
    assert_rejected(tmp_path, text, message)


TBF = """faults:
  - name: {name}
    kind: tbf
    target: {{netns: lt, interface: veth0}}
    at: {at}
    duration: {duration}
    every: {every}
    params: {{rate: 8mbit}}
"""


def tbf(name: str = "slow", at: str = "0s", duration: str = "1s", every: str = "10s") -> str:
    return TBF.format(name=name, at=at, duration=duration, every=every)


VALUES = [
    (tbf(name="1") + tbf(name="1").removeprefix("faults:\n"), ":2: faults[0].name: must be a string"),
    (tbf(duration=".inf"), ":6: faults[0].duration: must be finite"),
    (tbf(at=".nan"), ":5: faults[0].at: must be finite"),
    (tbf(every="1.0e+400"), ":7: faults[0].every: must be finite"),
    (tbf(at="400d"), ":5: faults[0].at: bad duration"),
    (tbf(at="1.0e+12"), ":5: faults[0].at: at most"),
    (tbf(every="1us"), ":7: faults[0].every: bad duration"),
    (tbf().replace("interface: veth0", "interface: 12345"), ":4: faults[0].target.interface: must be"),
    (tbf().replace("netns: lt", "netns: [lt]"), ":4: faults[0].target.netns: must be"),
    (tbf().replace("netns: lt", "netns: /proc/1/ns/net"), ":4: faults[0].target.netns: must be"),
    (tbf().replace("kind: tbf", "kind: [tbf]"), ":3: faults[0].kind: unknown kind"),
    (tbf().replace("{rate: 8mbit}", "{rate: 8mbit, burst: .inf}"), ":8: faults[0].params.burst: must be finite"),
    (tbf().replace("{rate: 8mbit}", "{rate: 8mbit, latency: .nan}"), ":8: faults[0].params.latency: must be"),
    (tbf().replace("{rate: 8mbit}", "{rate: 0bit}"), ":8: faults[0].params.rate: must be positive"),
    (tbf().replace("{rate: 8mbit}", "{rate: 8mbit, burst: 0}"), ":8: faults[0].params.burst: at least 1514 bytes"),
    (
        tbf().replace("{rate: 8mbit}", "{rate: 8mbit, latency: 1fortnight}"),
        ":8: faults[0].params.latency: expected a time",
    ),
    (tbf().replace("{rate: 8mbit}", "{rate: 8mbit, latency: 11s}"), ":8: faults[0].params.latency: at most 10000ms"),
    (tbf().replace("name: slow", "name: slow\n    name: again"), ":3: faults[0].name: given twice"),
    (tbf().replace("name: slow", "? [name]\n    : slow"), ":2: faults[0]: a field name must be a word"),
    (tbf().replace("{rate: 8mbit}", "!!python/name:os.system x"), ":8: faults[0].params: cannot be read"),
    (GOOD.replace("{graphics_mhz: 660}", "{graphics_mhz: 1.0e-300}"), ":15: faults[1].params.graphics_mhz: must be"),
    (GOOD.replace("{graphics_mhz: 660}", "{graphics_mhz: .inf}"), ":15: faults[1].params.graphics_mhz: must be"),
    (GOOD.replace("{graphics_mhz: 660}", "{graphics_mhz: 1.0e+9}"), ":15: faults[1].params.graphics_mhz: must be"),
    (GOOD.replace('"http://127.0.0.1:8000"', "8000"), ":12: faults[1].target.sim: must be"),
]


@pytest.mark.parametrize(("text", "message"), VALUES)
def test_bad_values_name_file_line_and_field(tmp_path, text, message):
    assert_rejected(tmp_path, text, message)


def aimed(kind: str = "tbf", params: str = "{rate: 8mbit}", aim: str = "direction: both") -> str:
    """A one-fault schedule with `aim` (direction, match) beside its params, on line 8."""
    return tbf().replace("kind: tbf", f"kind: {kind}").replace("{rate: 8mbit}", params) + f"    {aim}\n"


def netem(params: str) -> str:
    return aimed("netem", params, "direction: egress")


def test_direction_and_match_are_kept_as_written_and_given_to_the_injector(tmp_path):
    text = aimed("netem", "{delay: 100ms, jitter: 30ms, distribution: normal}", "direction: ingress") + (
        "    match: {dst: 10.0.0.0/24, dport: [8000, 8001]}\n"
    )
    (spec,) = load(tmp_path, text).faults
    assert (spec.direction, spec.match) == ("ingress", {"dst": "10.0.0.0/24", "dport": [8000, 8001]})
    assert spec.params == {"delay": "100ms", "jitter": "30ms", "distribution": "normal"}
    assert (spec.lines["direction"], spec.lines["match"]) == (9, 10)
    (window, *_) = load(tmp_path, text).windows(horizon=1)
    assert window.params == {**spec.params, "direction": "ingress", "match": spec.match}
    (plain,) = load(tmp_path, tbf()).faults
    assert (plain.direction, plain.match, plain.applied_params) == (None, None, {"rate": "8mbit"})


AIMS = [
    (aimed(aim="direction: sideways"), ":9: faults[0].direction: expected one of egress, ingress, both"),
    (aimed(aim="direction: [egress]"), ":9: faults[0].direction: expected one of egress, ingress, both"),
    (aimed(aim="match: {dport: 70000}"), ":9: faults[0].match.dport: expected a port 1 to 65535"),
    (aimed(aim="match: {sport: [80, true]}"), ":9: faults[0].match.sport: expected a port 1 to 65535, got True"),
    (aimed(aim="match: {dst: 10.0.0.1/24}"), ":9: faults[0].match.dst: expected an address or a CIDR"),
    (aimed(aim="match: {src: 8000}"), ":9: faults[0].match.src: expected an address or a CIDR"),
    (aimed(aim="match: {colour: red}"), ":9: faults[0].match.colour: unknown field (one of dst, src, dport"),
    (aimed(aim="match: {dport: []}"), ":9: faults[0].match.dport: an empty list matches nothing"),
    (aimed(aim="match: {}"), ":9: faults[0].match: expected a mapping"),
    (aimed(aim="match: 8000"), ":9: faults[0].match: expected a mapping"),
    (aimed(aim="match: {dst: 10.0.0.0/8, src: 'fd00::/64'}"), ":9: faults[0].match: dst and src are of different"),
    (aimed(aim=f"match: {{dport: {list(range(1, 40))}}}"), ":9: faults[0].match: 78 combinations"),
    (
        aimed("sse", "{drop_ratio: 0.1}", "direction: ingress").replace("{netns: lt, interface: veth0}", "{proxy: x}"),
        ":9: faults[0].direction: only netem and tbf take a direction, not sse",
    ),
    (
        aimed("gpu_clock", "{graphics_mhz: 660}", "match: {dport: 80}").replace(
            "{netns: lt, interface: veth0}", "{gpu: 0}"
        ),
        ":9: faults[0].match: only netem and tbf take a match, not gpu_clock",
    ),
    (
        tbf().replace("{rate: 8mbit}", "{rate: 8mbit, direction: ingress}"),
        ":8: faults[0].params.direction: goes beside",
    ),
    (netem("{delay: 10ms, jitter: 3ms, distribution: gauss}"), ":8: faults[0].params.distribution: expected one of"),
    (netem("{delay: 10ms, distribution: normal}"), ":8: faults[0].params.distribution: needs a jitter"),
    (netem("{delay: 10ms, loss_correlation: 25%}"), ":8: faults[0].params.loss_correlation: needs a loss"),
    (netem("{duplicate_correlation: 25%}"), ":8: faults[0].params.duplicate_correlation: needs a duplicate"),
    (netem("{reorder: 25%}"), ":8: faults[0].params.reorder: needs a delay"),
    (netem("{delay: 10ms, reorder: 5%, reorder_correlation: 101%}"), ":8: faults[0].params.reorder_correlation: a"),
    (netem("{delay: 10ms, correlation: 25%}"), ":8: faults[0].params.correlation: needs a jitter"),
]


@pytest.mark.parametrize(("text", "message"), AIMS)
def test_bad_direction_match_and_netem_params_name_their_field(tmp_path, text, message):
    assert_rejected(tmp_path, text, message)


def test_repeating_windows_that_meet_on_day_eleven_are_refused(tmp_path):
    two = tbf("a", at="0s", duration="1ms", every="1000s") + tbf(
        "b", at="1s", duration="1ms", every="1001s"
    ).removeprefix("faults:\n")
    assert_rejected(tmp_path, two, ":9: faults[1]: overlaps 'a' (tbf on the same target) at 1e+06s")
    apart = two.replace("at: 1s", "at: 500ms")  # always half a second off: they never meet
    assert [f.name for f in load(tmp_path, apart).faults] == ["a", "b"]


def test_a_fast_repeating_fault_is_checked_without_listing_its_windows(tmp_path):
    # every 10 ms is 8.6 million windows a day: listing them to check overlaps took 36 s and 2.5 GB
    text = tbf("fast", duration="5ms", every="10ms") + tbf(
        "other", at="7ms", duration="2ms", every="20ms"
    ).removeprefix("faults:\n")
    tracemalloc.start()
    try:
        s = load(tmp_path, text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000, peak
    assert s.count(horizon=1.0) == 150
    assert [w.start for w in itertools.islice(s.windows(horizon=1.0), 4)] == [0.0, 0.007, 0.01, 0.02]


def test_phase_names_the_windows_a_time_falls_in(tmp_path):
    s = load(tmp_path, GOOD)
    assert [s.active(t, horizon=13) for t in (0.0, 0.5, 2.5, 3.0, 7.2, 12.5, 13.5)] == [
        [],
        ["slow-gpu"],
        ["drop", "slow-gpu"],
        ["slow-gpu"],
        ["drop"],
        ["drop"],
        [],
    ]


# -- fuzz: any document, any value in any field: a Schedule, or a UsageError naming file, line and field --

TARGETS = {
    "sse": {"proxy": "127.0.0.1:9100"},
    "gpu_clock": {"sim": "http://127.0.0.1:8000", "token_env": "TOKEN"},
    "netem": {"netns": "lt", "interface": "veth0"},
    "tbf": {"netns": "lt", "interface": "veth0"},
    "docker": {"container": "backend", "host": "unix:///run/docker.sock"},
    "corrupt": {"sim": "http://127.0.0.1:8000"},
    "replica": {"sim": "http://127.0.0.1:8000", "replica": 0},
    "kv_link": {"sim": "http://127.0.0.1:8000"},
    "router": {"sim": "http://127.0.0.1:8000", "replica": 1},
    "cache_flush": {"sim": "http://127.0.0.1:8000"},
}
PARAMS = {
    "sse": {"drop_ratio": 0.1, "first_event_delay": 0.2},
    "gpu_clock": {"graphics_mhz": 660},
    "netem": {"delay": "100ms", "jitter": "30ms", "loss": "0.5%"},
    "tbf": {"rate": "8mbit", "burst": 16384, "latency": "50ms"},
    "docker": {"action": "cpu", "cpus": 0.5},
    "corrupt": {},
    "replica": {"action": "kill"},
    "kv_link": {"action": "loss", "loss": "20%"},
    "router": {"action": "drop"},
    "cache_flush": {},
}
KEYS = sorted(
    {k for t in TARGETS.values() for k in t}
    | {k for p in PARAMS.values() for k in p}
    | {"signal", "action", "distribution", "dst", "src", "dport", "sport", "holding", "delay"}
)
TEXT = st.text(st.characters(codec="utf-8"), max_size=12)
SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | TEXT | st.sampled_from(["1s", "10ms", "2m", "1h"])
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT | st.integers(), inner, max_size=3),
    max_leaves=8,
)


@pytest.fixture(scope="module")
def fuzz_file(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "s.yaml"


def loads_or_says_where(path: Path, text: str) -> schedule.Schedule | None:
    """Load `text`: a Schedule whose windows are produced lazily (counted, listed and looked up over a
    whole day at once: an expansion would not end), or a UsageError naming the file and a line (and,
    once the YAML parses, a field); never another exception."""
    path.write_text(text, encoding="utf-8")
    try:
        s: schedule.Schedule | UsageError = schedule.load(str(path), KINDS)
    except UsageError as e:
        s = e
    if isinstance(s, UsageError):
        assert s.file == str(path), s
        assert s.line is not None, s
        assert s.field or not yaml_document(text), s
        return None
    horizon = schedule.HORIZON_S
    assert s.count(horizon) >= 0
    assert len(list(itertools.islice(s.windows(horizon), 50))) <= 50
    assert s.active(horizon / 2, horizon) == sorted(s.active(horizon / 2, horizon))
    return s


def yaml_document(text: str) -> bool:
    try:
        return yaml.compose(text) is not None
    except yaml.YAMLError:
        return False


@pytest.mark.fuzz
@given(st.text(st.characters(codec="utf-8"), max_size=200))
@example("faults: [{name: a, kind: sse, target: {proxy: x}, at: 0s, duration: 1s, params: {}}]")
@example("faults:\n- ? [name]\n  : a\n")
@example("faults: [" * 50)
def test_fuzz_any_text(fuzz_file, text):
    loads_or_says_where(fuzz_file, text)


@pytest.mark.fuzz
@given(VALUES)
def test_fuzz_any_document(fuzz_file, doc):
    loads_or_says_where(fuzz_file, yaml.safe_dump(doc))


def fault(kind: str) -> dict:
    return {
        "name": f"{kind}-fault",
        "kind": kind,
        "target": dict(TARGETS[kind]),
        "at": "1s",
        "duration": "1s",
        "every": "10s",
        "params": dict(PARAMS[kind]),
    }


@pytest.mark.fuzz
@given(
    st.sampled_from(sorted(TARGETS)),
    st.sampled_from(
        ["seed", "faults", "fault", "name", "kind", "target", "at", "duration", "every", "params", "direction", "match"]
    )
    | st.sampled_from(["target.", "params.", "match.", "new."]).flatmap(
        lambda p: (TEXT | st.sampled_from(KEYS)).map(p.__add__)
    ),
    VALUES,
)
@example("tbf", "target.interface", 12345)
@example("tbf", "duration", float("inf"))
@example("tbf", "at", float("nan"))
@example("gpu_clock", "params.graphics_mhz", 1e-300)
@example("docker", "params.signal", [[1] * 3] * 3)
@example("tbf", "params.burst", float("inf"))
@example("docker", "params.action", [])  # found: an unhashable action was a TypeError
@example("replica", "params.action", [])  # the same, in the cluster's kinds
@example("kv_link", "params.action", {})
@example("netem", "match.dst", "10.0.0.0/33")
@example("tbf", "direction", {"egress": 1})
def test_fuzz_any_value_in_any_field(fuzz_file, kind, where, value):
    doc: dict = {"seed": 1, "faults": [fault(kind), {**fault(kind), "name": "other", "at": "5s"}]}
    first = doc["faults"][0]
    if where in ("seed", "faults"):
        doc[where] = value
    elif where == "fault":
        doc["faults"][0] = value
    elif "." in where:
        part, key = where.split(".", 1)
        first.setdefault(part, {})[key] = value
    else:
        first[where] = value
    s = loads_or_says_where(fuzz_file, yaml.safe_dump(doc))
    if s is not None and where not in ("faults", "fault"):
        assert [f.name for f in s.faults] == [first["name"], "other"]


TIMES = st.floats(0, 400 * 24 * 3600) | st.integers(-5, 10**6) | st.sampled_from(["10ms", "1s", "90m", "1us", ".inf"])


@pytest.mark.fuzz
@given(st.lists(st.tuples(TIMES, TIMES, st.none() | TIMES), min_size=1, max_size=4))
@example([(0, 0.005, 0.01), (0.007, 0.002, 0.02)])
@example([(0, 0.001, 1000.0), (1.0, 0.001, 1001.0)])
def test_fuzz_windows_on_one_target(fuzz_file, trains):
    faults = [
        {
            **fault("tbf"),
            "name": f"f{i}",
            "at": at,
            "duration": length,
            **({"every": every} if every is not None else {}),
        }
        for i, (at, length, every) in enumerate(trains)
    ]
    for f in faults:
        if f.get("every") is None:
            f.pop("every")
    loads_or_says_where(fuzz_file, yaml.safe_dump({"faults": faults}))
