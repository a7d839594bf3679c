"""A profile's modelled energy per token against the locked graphics clock: its power model
(reference_server/profile.py's `Power`) over its step model, for decode steps of a few batch sizes
(each sequence attending CONTEXT tokens: J per output token) and a prefill chunk of the profile's
max_num_batched_tokens (J per prompt token). The board draws a step's power for the whole step, its
CPU overhead included, as the sim does; the figures are the model's, no measurement.
docs/server.md's table is this command's output for the default profile.
Run: python -m reference_server.power_curve [--profile NAME|FILE]
"""

from __future__ import annotations

import argparse

from reference_server import profile
from reference_server.profile import Profile

BATCHES = (1, 8, 64, 256)
CONTEXT = 1000  # tokens each decoding sequence attends
CLOCKS = (1980.0, 1500.0, 1200.0, 990.0, 660.0, 495.0, 210.0)  # MHz, those in the profile's range


def joules_per_token(p: Profile, prefill: int, decode: int, mhz: float) -> float:
    """One step's energy over the tokens it computes, at a graphics clock of `mhz`."""
    slowdown, tokens = p.max_clock_mhz / mhz, prefill + decode
    seconds = p.step.time(prefill, decode, prefill + decode * CONTEXT, slowdown)
    return p.power.step_w(tokens, 1 / slowdown) * seconds / tokens


def table(p: Profile) -> list[str]:
    chunk = p.limits.max_num_batched_tokens
    columns = [f"decode {b}" for b in BATCHES] + [f"prefill {chunk}"]
    lines = [f"{'MHz':>6} " + " ".join(f"{c:>13}" for c in columns)]
    for mhz in (c for c in CLOCKS if p.min_clock_mhz <= c <= p.max_clock_mhz):
        cells = [joules_per_token(p, 0, b, mhz) for b in BATCHES] + [joules_per_token(p, chunk, 0, mhz)]
        lines.append(f"{mhz:6.0f} " + " ".join(f"{j:13.4f}" for j in cells))
    return lines


def report(p: Profile) -> list[str]:
    """What `main` prints: a line saying what the figures are, then the table."""
    pw = p.power
    return [
        f"power_curve: {p.name}, J per token (decode: per output token, each sequence attending {CONTEXT} "
        f"tokens; prefill: per prompt token); idle {pw.idle_w:g} W, a full step {pw.idle_w + pw.dynamic_w:g} W "
        f"at {p.max_clock_mhz:g} MHz",
        *table(p),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reference_server.power_curve", description=__doc__.split("\n")[0])
    parser.add_argument("--profile", default=profile.DEFAULT, help="a named profile or a profile file")
    p = profile.load(parser.parse_args(argv).profile)
    print("\n".join(report(p)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
