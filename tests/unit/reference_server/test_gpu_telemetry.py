"""GPU telemetry under dcgm-exporter's names (reference_server/gpu_telemetry.py): a real GPU's through
NVML (here a fake NVML module, and a real GPU where NVML finds one), and the sim's modelled device."""

import socket
import types

import pytest
from prometheus_client.parser import text_string_to_metric_families

from reference_server import gpu_telemetry
from reference_server.executors import ExecutorOptions, create
from reference_server.gpu_telemetry import ENERGY, FIELDS, LABELS, MODELLED, GpuTelemetry, Telemetry
from reference_server.profile import Power


def _exposition(telemetry: Telemetry) -> str:
    return telemetry.exposition().decode()


def test_an_executor_on_no_gpu_has_no_gauges_and_a_comment_saying_why():
    class OnNoGpu:
        gpu_uuid = None

    text = _exposition(gpu_telemetry.of(OnNoGpu()))
    assert text == "# DCGM_FI_DEV_* gauges absent: the OnNoGpu runs on no GPU\n"


def test_the_sims_device_is_a_modelled_gpu_under_dcgm_names_and_labels_plus_its_own():
    executor = create(ExecutorOptions("sim", power=Power(idle_w=80), profile="my-prof", gpu_name="NVIDIA X"))
    text = _exposition(gpu_telemetry.of(executor))
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["DCGM_FI_DEV_SM_CLOCK"].type == families["DCGM_FI_DEV_POWER_USAGE"].type == "gauge"
    assert families["DCGM_FI_DEV_SM_CLOCK"].samples[0].value == 1980.0
    assert families["DCGM_FI_DEV_POWER_USAGE"].samples[0].value == pytest.approx(80.0)  # no step yet: idle
    assert families[ENERGY].type == "counter"
    labels = families[ENERGY].samples[0].labels
    assert labels == {
        "gpu": "0",
        "UUID": "GPU-sim-my-prof",
        "pci_bus_id": "sim",
        "device": "nvidia0",
        "modelName": "NVIDIA X",
        "Hostname": socket.gethostname(),
        MODELLED: "my-prof",
    }
    # dcgm-exporter's own lines: the counter is named as it is, no _total anywhere
    assert f"# TYPE {ENERGY} counter\n" in text
    assert [line.split("{")[0] for line in text.splitlines() if not line.startswith("#")] == [
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_DEV_POWER_USAGE",
        ENERGY,
    ]
    assert "_total" not in text
    executor.device.lock(990.0)
    locked = {f.name: f for f in text_string_to_metric_families(_exposition(gpu_telemetry.of(executor)))}
    assert locked["DCGM_FI_DEV_SM_CLOCK"].samples[0].value == 990.0


class FakeNvml(types.SimpleNamespace):
    """pynvml's calls that gpu_telemetry makes, for one GPU; `unsupported` names those that raise."""

    class NVMLError(Exception):
        pass

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    def __init__(self, unsupported: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.unsupported = unsupported

    def _answer(self, name: str, value: object) -> object:
        if name in self.unsupported:
            raise self.NVMLError("Not Supported")
        return value

    def nvmlDeviceGetPciInfo(self, h):
        return types.SimpleNamespace(busId=b"00000000:3B:00.0")

    def nvmlDeviceGetIndex(self, h):
        return 0

    def nvmlDeviceGetUUID(self, h):
        return "GPU-1234"

    def nvmlDeviceGetMinorNumber(self, h):
        return 0

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetClockInfo(self, h, which):
        return {1: 1980, 2: 2619}[which]

    def nvmlDeviceGetUtilizationRates(self, h):
        return types.SimpleNamespace(gpu=97, memory=41)

    def nvmlDeviceGetPowerUsage(self, h):
        return 512_250  # mW

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        return self._answer("energy", 123_456_789)  # mJ

    def nvmlDeviceGetTemperature(self, h, sensor):
        return 61

    def nvmlDeviceGetMemoryInfo(self, h):
        return types.SimpleNamespace(used=40 * 2**30, free=39 * 2**30)

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return 0


def test_a_gpus_energy_counter_is_nvmls_total_energy_as_dcgm_exporters_counter():
    text = _exposition(GpuTelemetry(FakeNvml(), object()))
    families = {f.name: f for f in text_string_to_metric_families(text)}
    energy = families[ENERGY]
    assert energy.type == "counter"
    assert energy.samples[0].value == 123_456_789.0
    assert list(energy.samples[0].labels) == sorted(LABELS)  # dcgm-exporter's labels, no modelled one
    assert energy.samples[0].labels["UUID"] == "GPU-1234"
    assert families["DCGM_FI_DEV_POWER_USAGE"].samples[0].value == 512.25
    assert f"# HELP {ENERGY} Total energy consumption since boot (in mJ).\n# TYPE {ENERGY} counter\n{ENERGY}{{" in text
    assert "# absent" not in text


def test_a_gpu_without_an_energy_counter_has_none_and_says_so():
    text = _exposition(GpuTelemetry(FakeNvml(unsupported=("energy",)), object()))
    assert ENERGY + "{" not in text
    assert f"# absent: {ENERGY}: Not Supported\n" in text
    assert "DCGM_FI_DEV_POWER_USAGE{" in text  # the rest as before


def _nvml_devices() -> int:
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetCount()
    except Exception:  # noqa: BLE001 - no library, no driver: no device
        return 0


def test_a_gpu_nvml_cannot_find_is_absent_with_nvmls_reason():
    class OnAGpu:
        gpu_uuid = "GPU-00000000-0000-0000-0000-000000000000"  # no such GPU (or no NVML here)

    text = _exposition(GpuTelemetry.of(OnAGpu()))
    assert text.startswith("# DCGM_FI_DEV_* gauges absent: NVML: ")
    assert text.count("\n") == 1


@pytest.mark.skipif(_nvml_devices() == 0, reason="NVML finds no GPU on this machine")
def test_a_real_gpu_has_every_gauge_under_dcgm_names_with_dcgm_labels():
    import pynvml

    uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(0))

    class OnGpu0:
        gpu_uuid = uuid.decode() if isinstance(uuid, bytes) else uuid

    text = _exposition(GpuTelemetry.of(OnGpu0()))
    for name, _, _ in FIELDS:
        assert f"{name}{{" in text or f"# absent: {name}:" in text
    assert 'gpu="0"' in text
    assert f'UUID="{OnGpu0.gpu_uuid}"' in text
