"""What a fresh interpreter loads: a command or a module imports a heavy or gevent-patching package only
where it is used (each in a process of its own: the test process has them all loaded)."""

import subprocess
import sys

from tests.procs import ROOT


def test_the_fault_host_command_loads_neither_locust_nor_gevent():
    """It shares the GPU host with the server: locust would gevent-patch it (faults/host/seal.py)."""
    code = (
        "import runpy, sys\n"
        "sys.argv = ['llmchaos', 'faults', 'host', '--help']\n"
        "try:\n    runpy.run_module('llmchaos.cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('locust', 'gevent')))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert "--allow-sim" in done.stdout  # it got as far as the command's own parser
    assert done.stdout.splitlines()[-1] == "[]"


def test_a_backend_is_imported_only_when_chosen():
    code = "import sys, reference_server.executors; print('reference_server.executors.sim' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_torch_and_transformers_are_imported_only_when_the_torch_engine_is_chosen():
    code = (
        "import sys; from reference_server.executors import ExecutorOptions, create; create(ExecutorOptions('sim'));"
        "print(sorted(m for m in ('torch', 'transformers', 'reference_server.executors.torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
