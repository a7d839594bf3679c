"""`llmchaos ...` run in the test process, read as a subprocess's result: the exit status (argparse's
usage errors are its SystemExit(2)), what it printed on stdout and on stderr. No interpreter start-up
and no imports again, so the unit tier can check a command's output and exit status by the dozen.

Only for a command that installs no signal handler, changes no directory, starts no process and
imports no locust (conftest: nothing may): checked after each call. A command that does any of these
runs as a process of its own, in tests/integration."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

import pytest

from llmchaos.cli import main
from tests.procs import ROOT

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def llmchaos(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m llmchaos.cli ARGS` in the repository root, in this process."""
    capsys.readouterr()  # what the test printed before is not the command's
    handlers = [signal.getsignal(s) for s in SIGNALS]
    with contextlib.chdir(ROOT):
        try:
            status = main(list(args))
        except SystemExit as e:
            status = 0 if e.code is None else e.code if isinstance(e.code, int) else 1
        assert os.getcwd() == ROOT, f"llmchaos {' '.join(args)} changed directory: run it as a process"
    out, err = capsys.readouterr()
    assert [signal.getsignal(s) for s in SIGNALS] == handlers, f"llmchaos {' '.join(args)} set signal handlers"
    assert "locust" not in sys.modules, f"llmchaos {' '.join(args)} imported locust into the test process"
    return subprocess.CompletedProcess(["llmchaos", *args], status, out, err)
