"""This host's GPUs' energy, read through NVML (`nvmlDeviceGetTotalEnergyConsumption`: mJ since the
driver loaded, monotonic) each time the host acknowledges a lease: every second and right after each
window's apply and revert, so at every phase edge. The master shares it out as a load test's cost
(`--energy-from host:NAME`). Without NVML, a GPU or the counter: no reading, and why."""

from __future__ import annotations

import importlib
import time
from types import ModuleType
from typing import Any

from faults.host.messages import Joules


class Meter:
    def __init__(self, nvml: ModuleType | None = None) -> None:
        self.nv: ModuleType | None = None
        self.gpus: list[tuple[str, Any]] = []  # (UUID, handle)
        self.why: str | None = None
        try:
            nv = nvml if nvml is not None else importlib.import_module("pynvml")
            nv.nvmlInit()
            for i in range(nv.nvmlDeviceGetCount()):
                handle = nv.nvmlDeviceGetHandleByIndex(i)
                uuid = nv.nvmlDeviceGetUUID(handle)
                self.gpus.append((uuid.decode() if isinstance(uuid, bytes) else uuid, handle))
        except Exception as e:  # noqa: BLE001 - any NVML failure (no library, no driver) means: no GPU here
            self.why = f"NVML: {e}"
            return
        self.nv = nv
        if not self.gpus:
            self.why = "NVML finds no GPU on this host"

    def read(self) -> list[Joules]:
        """Each GPU's counter now; one that cannot say is left out, and `why` says so."""
        if self.nv is None:
            return []
        out, missing = [], []
        for uuid, handle in self.gpus:
            try:
                mj = float(self.nv.nvmlDeviceGetTotalEnergyConsumption(handle))
            except self.nv.NVMLError as e:  # not supported (before Volta), or the GPU fell off the bus
                missing.append(f"{uuid}: {e}")
                continue
            out.append(Joules(uuid, time.time(), mj))
        self.why = "; ".join(missing) or (None if self.gpus else self.why)
        return out
