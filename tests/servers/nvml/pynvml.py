"""A stand-in for nvidia-ml-py's `pynvml` with one GPU drawing a constant LLMCHAOS_STANDIN_WATTS
(default 300): its energy counter is that power times the time since this module loaded, exactly.
Put this folder first on PYTHONPATH of a process that reads NVML (a fault host) to give it a GPU
whose true energy is known. Only the calls the fault host's meter makes are here."""

from __future__ import annotations

import os
import time

WATTS = float(os.environ.get("LLMCHAOS_STANDIN_WATTS", "300"))
LOADED = time.time()
UUID = "GPU-standin-0000"


class NVMLError(Exception):
    pass


def nvmlInit() -> None:
    return None


def nvmlDeviceGetCount() -> int:
    return 1


def nvmlDeviceGetHandleByIndex(index: int) -> int:
    if index != 0:
        raise NVMLError("Invalid Argument")
    return 0


def nvmlDeviceGetUUID(handle: int) -> str:
    return UUID


def nvmlDeviceGetTotalEnergyConsumption(handle: int) -> int:
    """mJ since load, as NVML's is since the driver loaded (an integer, as NVML gives it)."""
    return round(WATTS * (time.time() - LOADED) * 1000)
