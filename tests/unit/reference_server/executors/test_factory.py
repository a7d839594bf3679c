"""The executor factory (reference_server/executors/__init__.py)."""

import subprocess
import sys

import pytest

from llmchaos.errors import UsageError
from reference_server.executors import ENGINES, ExecutorOptions, create
from reference_server.executors.sim import SimExecutor


def test_sim_is_built_by_the_factory_with_its_own_options():
    executor = create(ExecutorOptions("sim", seed=3, sim_time_scale=0.0, sim_jitter=0.0))
    assert isinstance(executor, SimExecutor)
    assert executor.cost.decode_base_s == 0.0
    assert executor.cost.jitter == 0.0


def test_an_unknown_engine_is_refused_with_the_list():
    with pytest.raises(UsageError) as e:
        create(ExecutorOptions("nosuch"))
    assert str(e.value) == f"--engine: unknown engine 'nosuch' (engines: {', '.join(ENGINES)})"


def test_a_backend_is_imported_only_when_chosen():
    code = "import sys, reference_server.executors; print('reference_server.executors.sim' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
