"""The fault host's meter: each GPU's NVML energy counter, or why not."""

import types

from faults.host.meter import Meter


class NVMLError(Exception):
    pass


def nvml(counters: list[int | None], fail_init: bool = False) -> types.SimpleNamespace:
    """A pynvml with a GPU per counter (None: it does not support the call)."""

    def init() -> None:
        if fail_init:
            raise NVMLError("Driver Not Loaded")

    def energy(h: int) -> int:
        value = counters[h]
        if value is None:
            raise NVMLError("Not Supported")
        return value

    return types.SimpleNamespace(
        NVMLError=NVMLError,
        nvmlInit=init,
        nvmlDeviceGetCount=lambda: len(counters),
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetUUID=lambda h: f"GPU-{h}".encode(),
        nvmlDeviceGetTotalEnergyConsumption=energy,
    )


def test_each_gpu_is_read_and_one_without_the_counter_is_left_out_with_why():
    meter = Meter(nvml([5000, None]))  # type: ignore[arg-type]
    (read,) = meter.read()
    assert (read.gpu, read.mj) == ("GPU-0", 5000.0)
    assert meter.why == "GPU-1: Not Supported"


def test_no_driver_is_no_reading_and_says_why():
    meter = Meter(nvml([1], fail_init=True))  # type: ignore[arg-type]
    assert meter.read() == []
    assert meter.why == "NVML: Driver Not Loaded"
    assert Meter(nvml([])).why == "NVML finds no GPU on this host"  # type: ignore[arg-type]
