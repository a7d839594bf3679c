"""The executor factory (reference_server/executors/__init__.py). That a backend is imported only when
chosen: tests/integration/test_lazy_imports.py (a fresh interpreter each)."""

import pytest

from llmchaos.errors import UsageError
from reference_server.executors import ENGINES, ExecutorOptions, create
from reference_server.executors.sim import SimExecutor
from reference_server.profile import StepModel


def test_sim_is_built_by_the_factory_with_its_own_options():
    step = StepModel(overhead=0.004, prefill_token=2e-5, jitter=0.01)
    executor = create(ExecutorOptions("sim", seed=3, step=step, clocks=(1500.0, 300.0)))
    assert isinstance(executor, SimExecutor)
    assert executor.step == step
    assert (executor.device.max_clock_mhz, executor.device.min_clock_mhz) == (1500.0, 300.0)


def test_an_unknown_engine_is_refused_with_the_list():
    with pytest.raises(UsageError) as e:
        create(ExecutorOptions("nosuch"))
    assert str(e.value) == f"--engine: unknown engine 'nosuch' (engines: {', '.join(ENGINES)})"


def test_torch_is_built_by_the_factory_with_a_pool_of_the_block_managers_size():
    from reference_server.executors.torch.executor import TorchExecutor

    executor = create(ExecutorOptions("torch", device="cpu", model="tiny", num_blocks=40, block_size=8))
    assert isinstance(executor, TorchExecutor)
    assert (executor.cache.num_blocks, executor.cache.block_size) == (40, 8)
    assert executor.model_card["engine"] == "torch"
    assert executor.gpu_uuid is None
    assert executor.device is not None  # the simulated clock the admin API sets on the CPU
