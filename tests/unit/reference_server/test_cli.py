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
