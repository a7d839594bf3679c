"""GPU telemetry under dcgm-exporter's names (reference_server/gpu_telemetry.py)."""

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from reference_server.executors import ExecutorOptions, create
from reference_server.gpu_telemetry import FIELDS, GpuTelemetry


def _exposition(telemetry: GpuTelemetry) -> str:
    registry = CollectorRegistry()
    registry.register(telemetry)
    return (generate_latest(registry) + telemetry.comment()).decode()


def test_an_executor_on_no_gpu_has_no_gauges_and_a_comment_saying_why():
    text = _exposition(GpuTelemetry.of(create(ExecutorOptions("sim"))))
    assert "DCGM_FI_DEV" not in text.replace("# DCGM_FI_DEV_* gauges absent:", "")
    assert text == "# DCGM_FI_DEV_* gauges absent: the SimExecutor runs on no GPU\n"


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
