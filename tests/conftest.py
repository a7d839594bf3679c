"""Hypothesis profiles for the fuzz tests: `ci` (the default, in make test) runs a fixed, repeatable
set of examples; `soak` (make fuzz) runs many fresh ones."""

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=200,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("soak", max_examples=20_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")
