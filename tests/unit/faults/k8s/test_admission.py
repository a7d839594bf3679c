"""The port of Chaos Mesh's admission webhooks (faults/k8s/admission) against Chaos Mesh's own test
cases (chaos_mesh/webhook_cases.yaml) and Go's own parsers' behaviour, and every object the
renderer makes admitted by it."""

from pathlib import Path

import pytest
import yaml

from faults import schedule
from faults.injectors import KINDS
from faults.k8s.admission import errors, refusal
from faults.k8s.admission.goparse import GoError, duration_string, from_human_size, parse_duration, parse_float32
from faults.k8s.admission.network import rate_unit
from faults.k8s.workflow import render
from tests.unit.faults.k8s.test_render import CLUSTER, example_schedules

CASES = yaml.safe_load((Path(__file__).parent / "chaos_mesh" / "webhook_cases.yaml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", CASES, ids=[c["test"] for c in CASES])
def test_chaos_meshs_own_webhook_cases(case):
    got = errors(case["object"])
    if "errors" in case:
        assert got == case["errors"]
    else:
        assert bool(got) == case["refused"], got


@pytest.mark.parametrize(
    ("text", "ns"),
    [  # Go's time_test.go parseDurationTests
        ("0", 0),
        ("5s", 5 * 10**9),
        ("-5s", -5 * 10**9),
        ("+5s", 5 * 10**9),
        ("5.s", 5 * 10**9),
        (".5s", 5 * 10**8),
        ("1.004s", 1_004_000_000),
        ("12µs", 12_000),
        ("3h30m", 12_600 * 10**9),
        ("10.5s4m", 250_500_000_000),
        ("-2m3.4s", -123_400_000_000),
        ("1h2m3s4ms5us6ns", 3_723_004_005_006),
        ("9223372036854775807ns", 2**63 - 1),
        ("-9223372036854775808ns", -(2**63)),
    ],
)
def test_durations_read_as_go_reads_them(text, ns):
    assert parse_duration(text) == ns


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", 'time: invalid duration ""'),
        ("3", 'time: missing unit in duration "3"'),
        (".s", 'time: invalid duration ".s"'),
        ("1d", 'time: unknown unit "d" in duration "1d"'),
        ("1S", 'time: unknown unit "S" in duration "1S"'),
        ("9223372036854775808ns", 'time: invalid duration "9223372036854775808ns"'),
    ],
)
def test_a_bad_duration_is_refused_in_gos_words(text, message):
    with pytest.raises(GoError) as e:
        parse_duration(text)
    assert str(e.value) == message


def test_durations_print_as_go_prints_them():
    seconds = [duration_string(s * 10**9) for s in (20, 60, 90, 3600, 5400)]
    assert seconds == ["20s", "1m0s", "1m30s", "1h0m0s", "1h30m0s"]
    short = [duration_string(n) for n in (0, 1_500_000_000, 500_000_000, 1500, 7)]
    assert short == ["0s", "1.5s", "500ms", "1.5µs", "7ns"]


def test_floats_rates_and_sizes_as_go_and_docker_read_them():
    assert parse_float32("25.5") == 25.5
    assert parse_float32("0x1p-2") == 0.25
    bad_floats = (("num", "invalid syntax"), ("1_0", "invalid syntax"), (" 1", "invalid syntax"))
    for bad, why in (*bad_floats, ("1e39", "value out of range")):
        with pytest.raises(GoError, match=why):
            parse_float32(bad)
    rate_unit("  10   mbPs  ")  # networkchaos_webhook_test.go's isValidRateUnit cases
    rate_unit("  10   kbit  ")
    for bad, why in ((" 10 cpbs", "invalid unit"), ("1.5mbit", 'parsing "1.5": invalid syntax')):
        with pytest.raises(GoError, match=why):
            rate_unit(bad)
    assert from_human_size("100KB") == 100_000
    assert from_human_size("100B") == 100
    for bad in ("-1", "-1Kb", "1x"):  # stresschaos_webhook_test.go's incorrect sizes
        with pytest.raises(GoError):
            from_human_size(bad)


def test_a_refusal_is_the_api_servers_answer():
    bad = {"apiVersion": "chaos-mesh.org/v1alpha1", "kind": "NetworkChaos", "metadata": {"name": "x"},
           "spec": {"action": "bandwidth", "bandwidth": {"rate": "1.5mbit", "limit": 1, "buffer": 1}}}  # fmt: skip
    assert refusal(bad) == (
        'admission webhook "vnetworkchaos.kb.io" denied the request: Spec.TcParameter.Bandwidth.Rate: '
        'Invalid value: "1.5mbit": parse rate field error:strconv.ParseUint: parsing "1.5": invalid syntax'
    )
    bad["spec"] |= {"delay": {"latency": "1S"}}
    assert refusal(bad).count("Invalid value") == 2  # two errors, bracketed
    assert refusal(bad).split("request: ")[1].startswith("[")
    assert refusal({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}) is None


@pytest.mark.parametrize("name", example_schedules())
def test_every_rendered_object_is_admitted(name):
    plan = schedule.load(name, KINDS)
    rendered = render(plan, name, CLUSTER, 600 if any(f.every for f in plan.faults) else plan.end())
    assert [refusal(o) for o in rendered.objects() if refusal(o)] == []
