"""Published curves (reference_server/calibrate/curves.py) and the shipped profiles fitted to them: their
recorded residuals are what `llmchaos calibrate --curves NAME --check` gives today."""

from dataclasses import replace

import pytest

from llmchaos.errors import UsageError
from reference_server import profile
from reference_server.calibrate import curves, fit


@pytest.mark.parametrize("name", curves.names())
def test_named_curves_load_with_their_source_and_levels(name):
    c = curves.load(name)
    assert c.name == name
    assert c.source.strip()
    assert c.start is not None
    assert len(c.levels) >= 4
    assert all(level.arrivals and level.measured.per_token for level in c.levels)


@pytest.mark.parametrize("name", sorted(set(profile.names()) & set(curves.names())))
def test_a_fitted_profiles_residuals_are_reproduced_by_checking_it_against_its_curves(name):
    p = profile.load(name)
    c = curves.load(p.name)
    rows = fit.evaluate(replace(p, limits=c.limits), p.step, c.levels)
    recorded = {r["level"]: r["errors"] for r in p.fitted["residuals"]}
    assert {r.level.name: pytest.approx(r.errors, abs=1e-4) for r in rows} == recorded
    if name == profile.DEFAULT:  # the stand-in's own target, in virtual time (B's 20 req/s is 15 % off)
        assert max(abs(e) for r in rows for e in r.errors) <= 0.10, fit.table(rows)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("name: x\nsource: y\nworkload: {prompt_tokens: 10}\nlevels: [{rate: 1, ttft_p50_ms: 5}]\n",
         ":3: workload: needs prompt_tokens and output_tokens"),
        ("name: x\nsource: y\nworkload: {prompt_tokens: 10, output_tokens: 2}\nlevels: [{ttft_p50_ms: 5}]\n",
         ":4: levels[0]: needs rate and at least one measured figure"),
        ("name: x\nsource: y\nworkload: {prompt_tokens: 10, output_tokens: 2}\nlevels: [{rate: 1, ttft: 5}]\n",
         ":4: levels[0].ttft: unknown field"),
        ("name: x\nsource: y\nworkload: {prompt_tokens: 10, output_tokens: 2}\nlevels: []\n",
         ":4: levels: must be a non-empty list"),
        ("name: x\nworkload: {prompt_tokens: 10, output_tokens: 2}\nlevels: [{rate: 1, ttft_p50_ms: 5}]\n",
         ": source: missing"),
    ],
)  # fmt: skip
def test_bad_curves_are_one_error_naming_file_line_and_field(tmp_path, text, says):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(UsageError) as e:
        curves.load(str(path))
    assert str(e.value).startswith(f"{path}{says}"), str(e.value)
