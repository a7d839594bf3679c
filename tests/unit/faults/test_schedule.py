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
