"""Executors run one scheduled batch and return one sampled token per sampling sequence.

`create` picks one by name (`llmchaos serve --engine`) and imports its backend only then, so
the sim engine never pays for a heavy one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from llmchaos.errors import UsageError
from reference_server.profile import H100_CLOCKS, H100_NAME, Power, StepModel

if TYPE_CHECKING:  # the engine's types (asyncio and all): not for `llmchaos serve --help`
    from reference_server.batch import Batch

Sampled = int | Exception  # a sequence's next token, or why sampling it failed


class Executor(Protocol):
    async def execute(self, batch: Batch) -> list[Sampled]:
        """Compute the batch's tokens; return the next token of each of `batch.sampling`, in order.

        A sequence whose sampling failed gets the exception in its place: the engine fails that
        request alone. Raising fails the whole batch (the step itself did not run).
        """
        ...


@dataclass(frozen=True)
class ExecutorOptions:
    """What `llmchaos serve` tells the executor it builds; each engine reads the fields it knows."""

    engine: str = "sim"
    seed: int = 0
    step: StepModel = field(
        default_factory=StepModel
    )  # sim: the profile's step-time model (the default: every step free)
    clocks: tuple[float, float] = H100_CLOCKS  # the simulated device's max and min graphics clock, MHz
    power: Power = field(default_factory=Power)  # sim: the simulated board's power model
    profile: str = "custom"  # sim: the profile's name (its modelled telemetry's label)
    gpu_name: str = H100_NAME  # sim: the GPU it models, as NVML names it
    device: str = "auto"  # torch: auto | cuda | cpu
    model: str = "tiny"  # torch: tiny | small (seeded random weights) | a local model directory
    num_blocks: int = 8192  # torch: the KV pool's blocks, as many as the block manager's
    block_size: int = 16


def _sim(options: ExecutorOptions) -> Executor:
    from reference_server.executors import sim

    return sim.create(options)


def _torch(options: ExecutorOptions) -> Executor:
    from reference_server.executors.torch import executor

    return executor.create(options)


# Each imports its backend when called.
ENGINES: dict[str, Callable[[ExecutorOptions], Executor]] = {"sim": _sim, "torch": _torch}


def create(options: ExecutorOptions) -> Executor:
    """The executor `options.engine` names; an unknown name is a UsageError listing the engines."""
    make = ENGINES.get(options.engine)
    if make is None:
        raise UsageError(f"unknown engine {options.engine!r} (engines: {', '.join(ENGINES)})", field="--engine")
    return make(options)
