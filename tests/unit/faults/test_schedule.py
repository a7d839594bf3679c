import itertools
import tracemalloc

import pytest

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
