"""`llmchaos serve`'s flags (reference_server/cli.py), run as the real command."""

import subprocess
import sys

import pytest


@pytest.mark.parametrize("port", ["99999", "65536", "0", "-1"])
def test_a_port_outside_1_65535_is_one_line_and_exit_2(port):
    """--port 99999 was accepted and the server listened on some other port."""
    proc = subprocess.run(
        [sys.executable, "-m", "llmchaos.cli", "serve", "--port", port], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("llmchaos: error: --port: "), proc.stderr
    assert "1..65535" in proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--header-timeout", "nan"), ("--sim-time-scale", "inf"), ("--pacer-max-gap", "inf"), ("--drain-timeout", "nan")],
)
def test_a_number_that_is_not_finite_is_one_line_and_exit_2(flag, value):
    """nan passed every `> 0` check and reached the timers (a header timeout of nan, a step of inf)."""
    proc = subprocess.run(
        [sys.executable, "-m", "llmchaos.cli", "serve", flag, value], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"llmchaos: error: {flag}: must be a finite number, got {value}\n"
