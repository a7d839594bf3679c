"""The executor's GPU through NVML, on /metrics under dcgm-exporter's names, so that dashboards
built for dcgm-exporter read it. Without a GPU the gauges are absent and a comment line says why:
never a made-up value."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric

LABELS = ["gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname"]  # dcgm-exporter's
MIB = 1024 * 1024

# dcgm-exporter's default counters (etc/default-counters.csv): name, help, NVML reading.
Reading = Callable[[ModuleType, Any], float]
FIELDS: list[tuple[str, str, Reading]] = [
    (
        "DCGM_FI_DEV_SM_CLOCK",
        "SM clock frequency (in MHz).",
        lambda nv, h: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
    ),
    (
        "DCGM_FI_DEV_MEM_CLOCK",
        "Memory clock frequency (in MHz).",
        lambda nv, h: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
    ),
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", lambda nv, h: nv.nvmlDeviceGetUtilizationRates(h).gpu),
    (
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        "Memory utilization (in %).",
        lambda nv, h: nv.nvmlDeviceGetUtilizationRates(h).memory,
    ),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", lambda nv, h: nv.nvmlDeviceGetPowerUsage(h) / 1000),
    (
        "DCGM_FI_DEV_GPU_TEMP",
        "GPU temperature (in C).",
        lambda nv, h: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
    ),
    (
        "DCGM_FI_DEV_FB_USED",
        "Framebuffer memory used (in MiB).",
        lambda nv, h: nv.nvmlDeviceGetMemoryInfo(h).used / MIB,
    ),
    (
        "DCGM_FI_DEV_FB_FREE",
        "Framebuffer memory free (in MiB).",
        lambda nv, h: nv.nvmlDeviceGetMemoryInfo(h).free / MIB,
    ),
    (
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
        "Throttling reasons bitmask (NVML's clocks event reasons).",
        lambda nv, h: nv.nvmlDeviceGetCurrentClocksEventReasons(h),
    ),
]


class GpuTelemetry:
    """A Prometheus collector of one GPU's readings, or of none with the reason why."""

    def __init__(self, nvml: ModuleType | None, handle: object, why_none: str = "") -> None:
        self.nv, self.handle, self.why_none = nvml, handle, why_none
        self.labels: list[str] = []
        self._missing: list[str] = []  # fields this GPU did not answer at the last scrape
        if nvml is not None:
            nv, h = nvml, handle
            pci = nv.nvmlDeviceGetPciInfo(h).busId
            self.labels = [
                str(nv.nvmlDeviceGetIndex(h)),
                _text(nv.nvmlDeviceGetUUID(h)),
                _text(pci),
                f"nvidia{nv.nvmlDeviceGetMinorNumber(h)}",
                _text(nv.nvmlDeviceGetName(h)),
                socket.gethostname(),
            ]

    @classmethod
    def of(cls, executor: object) -> GpuTelemetry:
        """The telemetry of the GPU `executor` runs on (its `gpu_uuid`), if it runs on one."""
        uuid = getattr(executor, "gpu_uuid", None)
        if uuid is None:
            return cls(None, None, f"the {type(executor).__name__} runs on no GPU")
        try:
            import pynvml

            pynvml.nvmlInit()
            return cls(pynvml, pynvml.nvmlDeviceGetHandleByUUID(uuid))
        except Exception as e:  # noqa: BLE001 - NVML's errors (no library, no driver, no device) all mean none
            return cls(None, None, f"NVML: {e}")

    def collect(self) -> Iterator[Metric]:
        self._missing = []
        if self.nv is None:
            return
        for name, doc, read in FIELDS:
            try:
                value = read(self.nv, self.handle)
            except self.nv.NVMLError as e:  # not supported on this GPU: absent, and said so
                self._missing.append(f"{name}: {e}")
                continue
            g = GaugeMetricFamily(name, doc, labels=LABELS)
            g.add_metric(self.labels, float(value))
            yield g

    def comment(self) -> bytes:
        """Comment lines for the exposition: why gauges are absent (after a collect)."""
        if self.nv is None:
            return f"# DCGM_FI_DEV_* gauges absent: {self.why_none}\n".encode()
        return "".join(f"# absent: {m}\n" for m in self._missing).encode()


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
