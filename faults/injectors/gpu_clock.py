"""`gpu_clock`: lock a GPU's graphics (and optionally memory) clocks through NVML, else
`nvidia-smi -lgc/-lmc`, or the reference server's simulated device through its admin API, where
there is no GPU.

Targets: `{gpu: 0}` or `{sim: "http://127.0.0.1:8000", token_env: LLMCHAOS_ADMIN_TOKEN}`.
Params: `{graphics_mhz: 600}` or a range the clock may move in, `{graphics_mhz: [500, 800]}` (as
`nvidia-smi -lgc 500,800` and NVML's locked clocks take a min and a max), plus `memory_mhz` (a clock
or a range) on a GPU that supports memory locks. The simulated device has no load-driven boost: it
runs at the top of the range.

Restoring: the simulated device's clocks are read before the lock and put back as they were.
NVML cannot read an existing lock back, so on a GPU revert resets the locks to the driver's
default (`-rgc`, and `-rmc` where memory was locked), and `save` records the clocks seen before.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from types import ModuleType
from typing import ClassVar

from faults.allow import Allowlist
from faults.injectors.admin import AdminAPI, check_target
from faults.injectors.base import FieldError, InjectError, only_keys

SANE_MHZ = (100, 10_000)  # any GPU's clocks lie within; the device's own range is probed before a run
MAX_GPUS = 1024  # indices past this are no GPU of any host (NVML's own limit is far below)


def clock_range(params: dict, key: str) -> tuple[int, int]:
    """A clock param as (min, max) MHz: a number is both ends."""
    mhz = params[key]
    lo, hi = (mhz[0], mhz[1]) if isinstance(mhz, (list, tuple)) else (mhz, mhz)
    return int(lo), int(hi)


def _sane_mhz(params: dict, key: str) -> None:
    mhz = params[key]
    lo, hi = SANE_MHZ
    ends = mhz if isinstance(mhz, list) else [mhz]
    if isinstance(mhz, list) and len(mhz) != 2:
        raise FieldError(f"params.{key}", f"must be a clock in MHz or a range [min, max]; got {mhz!r}")
    for end in ends:
        whole = isinstance(end, int) or (isinstance(end, float) and end.is_integer())  # nvidia-smi and NVML: MHz
        if not whole or isinstance(end, bool) or not lo <= end <= hi:
            raise FieldError(
                f"params.{key}", f"must be a whole number of MHz, from {lo} to {hi}, or a range of two; got {mhz!r}"
            )
    if ends[0] > ends[-1]:
        raise FieldError(f"params.{key}", f"a range is [min, max]; got {mhz!r}")


def _within(key: str, mhz: float, lo: object, hi: object) -> None:
    """FieldError unless `mhz` lies in [lo, hi] (a bound the device did not report is not checked)."""
    lo_ok = not isinstance(lo, (int, float)) or mhz >= lo
    hi_ok = not isinstance(hi, (int, float)) or mhz <= hi
    if not (lo_ok and hi_ok):
        shown = " to ".join(f"{b:g}" if isinstance(b, (int, float)) else "?" for b in (lo, hi))
        raise FieldError(f"params.{key}", f"{mhz:g} MHz is outside this device's range ({shown} MHz)")


def _nvml() -> ModuleType:
    """The pynvml module with NVML initialised, or InjectError."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception as e:  # noqa: BLE001 - any NVML failure (no library, no driver) means: no GPU here
        raise InjectError(f"no NVIDIA GPU here (NVML: {e})") from None


class GpuClock:
    kind: ClassVar[str] = "gpu_clock"
    aimed: ClassVar[bool] = False

    @classmethod
    def check(cls, target: dict, params: dict) -> None:
        only_keys("target", target, {"gpu", "sim", "token_env"})
        if ("gpu" in target) == ("sim" in target):
            raise FieldError("target", "give exactly one of gpu (an index) or sim (a server URL)")
        gpu = target.get("gpu", 0)
        if not isinstance(gpu, int) or isinstance(gpu, bool) or not 0 <= gpu < MAX_GPUS:
            raise FieldError("target.gpu", f"must be a GPU index, 0 to {MAX_GPUS - 1}, got {gpu!r}")
        check_target(target)
        only_keys("params", params, {"graphics_mhz", "memory_mhz"}, {"graphics_mhz"})
        for key in params:
            _sane_mhz(params, key)
        if "sim" in target and "memory_mhz" in params:
            raise FieldError("params.memory_mhz", "the simulated device has no memory clock")

    @classmethod
    def probe_host(cls) -> str | None:
        try:
            nv = _nvml()
            count = nv.nvmlDeviceGetCount()
        except InjectError as e:
            return f"{e}; the reference server's simulated device still works (target sim)"
        if os.geteuid() != 0:
            return f"{count} GPU(s), but locking clocks needs root"
        return None

    def __init__(self, target: dict, allow: Allowlist = Allowlist()) -> None:
        self.target, self.allow = target, allow
        self.sim: str | None = target.get("sim")
        self.admin = AdminAPI(self.sim, target.get("token_env"), "simulated device") if self.sim else None

    def _sim(self, method: str, json: dict | None = None) -> dict:
        """The simulated device's clocks (TargetGone: a server that is gone holds no lock)."""
        assert self.admin is not None, "only a sim target has a simulated device"
        return self.admin.call(method, "/admin/device/clocks", json=json)

    def _handle(self) -> tuple[ModuleType, object]:
        """(pynvml, the device handle)."""
        nv = _nvml()
        try:
            return nv, nv.nvmlDeviceGetHandleByIndex(self.target["gpu"])
        except nv.NVMLError as e:
            raise InjectError(f"GPU {self.target['gpu']}: {e}") from None

    def probe(self, params: dict | None = None) -> str | None:
        """Also FieldError when a clock in `params` lies outside the range this device reports."""
        if not self.sim:
            refused = self.allow.gpu(self.target["gpu"])
            if refused:
                return refused
        try:
            clocks = self.read_back()
        except InjectError as e:
            return str(e)
        if not self.sim and os.geteuid() != 0:
            return f"GPU {self.target['gpu']}: locking clocks needs root"
        for key in params or {}:
            for mhz in clock_range(params or {}, key):
                _within(key, mhz, clocks.get(f"min_{key}"), clocks.get(f"max_{key}"))
        return None

    def save(self, params: dict) -> dict:
        return self.read_back()

    def apply(self, name: str, params: dict, saved: dict) -> None:
        lo, hi = clock_range(params, "graphics_mhz")
        if self.sim:
            self._sim("PUT", json={"graphics_mhz": hi})  # no boost modelled: the top of the range
            return
        nv, h = self._handle()
        try:
            nv.nvmlDeviceSetGpuLockedClocks(h, lo, hi)
        except nv.NVMLError as e:  # permission or support: try the CLI, which says why
            self._smi(f"-lgc={lo},{hi}", e)
        if "memory_mhz" in params:
            mem_lo, mem_hi = clock_range(params, "memory_mhz")
            try:
                nv.nvmlDeviceSetMemoryLockedClocks(h, mem_lo, mem_hi)
            except nv.NVMLError as e:
                self._smi(f"-lmc={mem_lo},{mem_hi}", e)

    def revert(self, saved: dict) -> None:
        if self.sim:
            locked = bool(saved.get("locked"))
            now = self._sim("PUT", json={"graphics_mhz": saved["graphics_mhz"]}) if locked else self._sim("DELETE")
            if (bool(now.get("locked")), now.get("graphics_mhz") if locked else None) != (
                locked,
                saved.get("graphics_mhz") if locked else None,
            ):
                raise InjectError(
                    f"simulated device reads back {now.get('graphics_mhz')} MHz (locked: {now.get('locked')}) "
                    f"after the revert, not {saved.get('graphics_mhz')} MHz (locked: {locked})"
                )
            return
        nv, h = self._handle()
        try:
            nv.nvmlDeviceResetGpuLockedClocks(h)
        except nv.NVMLError as e:
            self._smi("-rgc", e)
        try:
            nv.nvmlDeviceResetMemoryLockedClocks(h)
        except nv.NVMLError_NotSupported:
            pass  # this GPU has no memory locks, so none was set
        except nv.NVMLError as e:
            self._smi("-rmc", e)

    def read_back(self) -> dict:
        if self.sim:
            return self._sim("GET")
        nv, h = self._handle()
        try:
            clocks = {
                "graphics_mhz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_GRAPHICS),
                "max_graphics_mhz": nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_GRAPHICS),
                "memory_mhz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
            }
        except nv.NVMLError as e:
            raise InjectError(f"GPU {self.target['gpu']}: {e}") from None
        try:  # the supported clocks, where this GPU lists them
            memory = nv.nvmlDeviceGetSupportedMemoryClocks(h)
            graphics = [c for m in memory for c in nv.nvmlDeviceGetSupportedGraphicsClocks(h, m)]
        except nv.NVMLError:
            return clocks
        if memory and graphics:
            clocks |= {"min_graphics_mhz": min(graphics), "min_memory_mhz": min(memory), "max_memory_mhz": max(memory)}
        return clocks

    def _smi(self, flag: str, nvml_error: Exception) -> None:
        smi = shutil.which("nvidia-smi")
        if smi is None:
            raise InjectError(f"NVML refused ({nvml_error}) and nvidia-smi is not installed")
        r = subprocess.run([smi, "-i", str(self.target["gpu"]), flag], capture_output=True, text=True)
        if r.returncode != 0:
            raise InjectError(f"nvidia-smi {flag}: {(r.stderr or r.stdout).strip().splitlines()[-1]}")

    def confirm(self, params: dict) -> None:
        """Read the clocks back once locked: InjectError unless they show the lock (the simulated
        device reports it; a GPU's graphics clock never runs above a locked maximum, which NVML
        rounds up to the next supported clock, 15 MHz or less). A [min, max] lock counts by its ends."""
        want = params["graphics_mhz"]
        lo, hi = clock_range(params, "graphics_mhz")
        now = self.read_back()
        mhz = now.get("graphics_mhz")
        if not isinstance(mhz, (int, float)):
            raise InjectError(f"gpu_clock: the clocks read back without a graphics clock: {now}")
        if self.sim and not (now.get("locked") and lo <= mhz <= hi):
            raise InjectError(f"simulated device reads back {mhz:g} MHz (locked: {now.get('locked')}), not {want}")
        if not self.sim and mhz > hi + NVML_STEP_MHZ:
            raise InjectError(f"GPU {self.target['gpu']} runs at {mhz:g} MHz after locking to {want} MHz")


NVML_STEP_MHZ = 15  # the widest step between a GPU's supported graphics clocks
