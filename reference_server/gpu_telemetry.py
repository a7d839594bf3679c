"""The executor's GPU on /metrics under dcgm-exporter's names, so that dashboards and the harness built
for dcgm-exporter read it: a real one's readings through NVML, or the sim's modelled device (its
clock, power and energy, marked by one label of its own). Without either the series are absent and a
comment line says why: never a made-up value."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any

from prometheus_client import generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from reference_server.executors.power import PowerMeter
    from reference_server.executors.sim import SimDevice

LABELS = ["gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname"]  # dcgm-exporter's
MODELLED = "llmchaos_power_model"  # the sim's series only: the profile whose power model they are
MIB = 1024 * 1024
SM_CLOCK, POWER, ENERGY = "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
HELP = {
    SM_CLOCK: "SM clock frequency (in MHz).",
    POWER: "Power draw (in W).",
    ENERGY: "Total energy consumption since boot (in mJ).",
}
COUNTERS = (ENERGY,)  # the rest are gauges

# dcgm-exporter's default counters (etc/default-counters.csv): name, help, NVML reading.
Reading = Callable[[ModuleType, Any], float]
FIELDS: list[tuple[str, str, Reading]] = [
    (SM_CLOCK, HELP[SM_CLOCK], lambda nv, h: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
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
    (POWER, HELP[POWER], lambda nv, h: nv.nvmlDeviceGetPowerUsage(h) / 1000),
    (ENERGY, HELP[ENERGY], lambda nv, h: nv.nvmlDeviceGetTotalEnergyConsumption(h)),  # mJ since the driver loaded
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


class Telemetry(Collector):
    """What the collectors of a real GPU and of the sim's share: dcgm-exporter's exposition."""

    def comment(self) -> bytes:
        """Comment lines for the exposition (after a collect)."""
        return b""

    def exposition(self) -> bytes:
        """The families as dcgm-exporter writes them, then the comment lines. (prometheus_client names a
        counter's HELP and TYPE lines NAME_total; dcgm-exporter's counters have no such suffix.)"""
        text = generate_latest(self).decode()
        for name in COUNTERS:
            text = text.replace(f" {name}_total ", f" {name} ")
        return text.encode() + self.comment()


class GpuTelemetry(Telemetry):
    """One GPU's readings through NVML, or none with the reason why."""

    def __init__(self, nvml: ModuleType | None, handle: object, why_none: str = "") -> None:
        self.nv, self.handle, self.why_none = nvml, handle, why_none
        self.labels: dict[str, str] = {}
        self._missing: list[str] = []  # fields this GPU did not answer at the last scrape
        if nvml is not None:
            nv, h = nvml, handle
            pci = nv.nvmlDeviceGetPciInfo(h).busId
            values = [
                str(nv.nvmlDeviceGetIndex(h)),
                _text(nv.nvmlDeviceGetUUID(h)),
                _text(pci),
                f"nvidia{nv.nvmlDeviceGetMinorNumber(h)}",
                _text(nv.nvmlDeviceGetName(h)),
                socket.gethostname(),
            ]
            self.labels = dict(zip(LABELS, values, strict=True))

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
            yield _family(name, doc, self.labels, value)

    def comment(self) -> bytes:
        """Why series are absent (after a collect)."""
        if self.nv is None:
            return f"# DCGM_FI_DEV_* gauges absent: {self.why_none}\n".encode()
        return "".join(f"# absent: {m}\n" for m in self._missing).encode()


class SimTelemetry(Telemetry):
    """The sim's device as dcgm-exporter would show a GPU: its graphics clock, and its power and energy
    from the profile's power model, labelled as one GPU of this host plus `llmchaos_power_model`, which
    says that they are modelled, and by which profile."""

    def __init__(
        self, device: SimDevice, meter: PowerMeter, profile: str, gpu_name: str, replica: int | None = None
    ) -> None:
        self.device, self.meter = device, meter
        uuid = f"GPU-sim-{profile}" + (f"-{replica}" if replica is not None else "")  # a cluster's: one GPU each
        values = ["0", uuid, "sim", "nvidia0", gpu_name, socket.gethostname()]
        self.labels = dict(zip(LABELS, values, strict=True)) | {MODELLED: profile}

    def collect(self) -> Iterator[Metric]:
        now = time.monotonic()
        readings = {SM_CLOCK: self.device.clock_mhz, POWER: self.meter.power_w(now), ENERGY: self.meter.energy_mj(now)}
        for name, value in readings.items():
            yield _family(name, HELP[name], self.labels, value)


def of(executor: object, replica: int | None = None) -> Telemetry:
    """The telemetry of `executor`'s device: the sim's modelled one (replica `replica` of a cluster's),
    or the GPU it runs on, or none."""
    from reference_server.executors.sim import SimExecutor

    if isinstance(executor, SimExecutor) and (meter := executor.device.meter) is not None:
        return SimTelemetry(executor.device, meter, executor.power_model, executor.gpu_name, replica)
    return GpuTelemetry.of(executor)


def _family(name: str, doc: str, labels: dict[str, str], value: float) -> Metric:
    """One series of `name`, typed as dcgm-exporter's default counters type it."""
    family = Metric(name, doc, "counter" if name in COUNTERS else "gauge")
    family.add_sample(name, labels, float(value))
    return family


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
