"""Our options on Locust's real command line: bad values are one line and exit 2; `llmchaos
loadtest-help` lists them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.integration.loadtest_helpers import locust
from tests.procs import ROOT
from tests.servers import scripted


@pytest.fixture(scope="module")
def url():
    with scripted.running(3) as u:
        yield u


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (("--arrival", "gamma", "--rate", "5", "--burstiness", "0"), "--burstiness"),  # was a traceback, exit 0
        (("--rate", "inf"), "--rate"),  # hung
        (("--rate", "-5"), "--rate"),  # ran closed loop
        (("--stall-limit", "0"), "--stall-limit"),  # every request connect_error
        (("--requests-sample", "5"), "--requests-sample"),
    ],
)
def test_a_bad_number_is_one_line_and_exit_2(url, argv, flag):
    proc = locust("--host", url, "-u", "2", "-r", "2", "-t", "3s", "--langs", "en", *argv, timeout=30)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(f"llmchaos: error: {flag}: must be a finite number")


def test_loadtest_help_lists_our_options():
    """Locust prints its --help before it loads the locustfile, so without ours: this lists them."""
    proc = subprocess.run(
        [sys.executable, "-m", "llmchaos.cli", "loadtest-help"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    for flag in ("--ttft-timeout", "--stall-limit", "--rate", "--schedule", "--results-dir", "--allow-interface"):
        assert flag in proc.stdout
    assert "locust -f loadtests/locustfile.py" in proc.stdout
