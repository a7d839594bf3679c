"""The power model's J/token against the locked clock (reference_server/power_curve.py): the table
docs/server.md shows is what the command prints, and its curve bends the way the model says."""

from pathlib import Path

from reference_server import power_curve, profile

DOCS = Path(__file__).resolve().parents[3] / "docs" / "server.md"


def test_the_docs_table_is_what_the_command_prints():
    printed = "\n".join(power_curve.report(profile.load(profile.DEFAULT)))
    assert f"```\n{printed}\n```" in DOCS.read_text(encoding="utf-8")


def test_a_small_decode_step_costs_less_at_every_lower_clock_and_a_prefill_chunk_has_a_minimum():
    p = profile.load(profile.DEFAULT)
    clocks = sorted(power_curve.CLOCKS, reverse=True)
    decode = [power_curve.joules_per_token(p, 0, 1, mhz) for mhz in clocks]
    assert decode == sorted(decode, reverse=True)  # memory-bound: the same time at less power
    prefill = [power_curve.joules_per_token(p, 2048, 0, mhz) for mhz in clocks]
    best = prefill.index(min(prefill))
    assert 0 < best < len(clocks) - 1  # compute-bound: power falls, time grows
