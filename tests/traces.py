"""The public traces shared next to the checkout (../shared/traces, see its README): read from
there, never copied into the repository; a test that needs one is skipped, saying where it looked,
when a checkout has none."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.procs import ROOT

TRACES = Path(ROOT).parent / "shared" / "traces"
AZURE = TRACES / "azure_llm_2023_conv.csv"
MOONCAKE = TRACES / "mooncake_synthetic.jsonl"


def trace(path: Path) -> Path:
    """`path` if it is there, else the test is skipped with the reason."""
    if not path.is_file():
        pytest.skip(f"public trace not found at {path} (../shared/traces next to the checkout)")
    return path


def head(path: Path, rows: int, out: Path) -> Path:
    """The first `rows` rows of a trace (a CSV's header kept) written to `out` (a test's tmp dir)."""
    with open(trace(path), "rb") as src, open(out, "wb") as dst:
        n = rows + (path.suffix == ".csv")
        for i, line in enumerate(src):
            if i >= n:
                break
            dst.write(line)
    return out
