"""`gpu_clock`: lock a GPU's graphics clock (NVML, else `nvidia-smi -lgc/-rgc`), or the reference
server's simulated device through its admin API, where there is no GPU.

Targets: `{gpu: 0}` or `{sim: "http://127.0.0.1:8000", token_env: LLMCHAOS_ADMIN_TOKEN}`.
Params: `{graphics_mhz: 600}`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import ClassVar

import httpx

from faults.base import FieldError, InjectError, only_keys


class GpuClock:
    kind: ClassVar[str] = "gpu_clock"

    @classmethod
    def check(cls, target: dict, params: dict) -> None:
        only_keys("target", target, {"gpu", "sim", "token_env"})
        if ("gpu" in target) == ("sim" in target):
            raise FieldError("target", "give exactly one of gpu (an index) or sim (a server URL)")
        if "gpu" in target and (not isinstance(target["gpu"], int) or target["gpu"] < 0):
            raise FieldError("target.gpu", "must be a GPU index")
        only_keys("params", params, {"graphics_mhz"}, {"graphics_mhz"})
        mhz = params["graphics_mhz"]
        if not isinstance(mhz, (int, float)) or isinstance(mhz, bool) or mhz <= 0:
            raise FieldError("params.graphics_mhz", "must be a positive number of MHz")

    def __init__(self, target: dict) -> None:
        self.target = target
        self.sim = target.get("sim")
        self.token = os.environ.get(target.get("token_env", "LLMCHAOS_ADMIN_TOKEN"), "")
        self.http = httpx.Client(timeout=5, headers={"authorization": f"Bearer {self.token}"})

    # -- the simulated device ----------------------------------------------------------------
    def _sim(self, method: str, **kw: object) -> dict:
        try:
            r = self.http.request(method, self.sim.rstrip("/") + "/admin/device/clocks", **kw)  # type: ignore[union-attr, arg-type]
        except httpx.TransportError as e:
            raise InjectError(f"simulated device at {self.sim} unreachable: {e}") from None
        if r.status_code != 200:
            raise InjectError(f"simulated device refused ({r.status_code}): {r.text[:200]}")
        return r.json()

    # -- a real GPU ----------------------------------------------------------------------------
    def _nvml(self):  # noqa: ANN202 - the pynvml module with NVML initialised, or InjectError
        try:
            import pynvml

            pynvml.nvmlInit()
            return pynvml
        except Exception as e:  # noqa: BLE001 - any NVML failure means: no GPU here
            raise InjectError(f"no NVIDIA GPU here (NVML: {e})") from None

    def probe(self) -> str | None:
        try:
            if self.sim:
                self._sim("GET")
            else:
                nv = self._nvml()
                nv.nvmlDeviceGetHandleByIndex(self.target["gpu"])
        except InjectError as e:
            return str(e)
        except Exception as e:  # noqa: BLE001
            return f"GPU {self.target.get('gpu')}: {e}"
        return None

    def apply(self, name: str, params: dict) -> None:
        mhz = int(params["graphics_mhz"])
        if self.sim:
            self._sim("PUT", json={"graphics_mhz": mhz})
            return
        nv = self._nvml()
        try:
            nv.nvmlDeviceSetGpuLockedClocks(nv.nvmlDeviceGetHandleByIndex(self.target["gpu"]), mhz, mhz)
        except Exception as e:  # noqa: BLE001 - permission or support: try the CLI, which says why
            self._smi(f"-lgc={mhz},{mhz}", e)

    def revert(self) -> None:
        if self.sim:
            try:
                self._sim("DELETE")
            except InjectError:
                if self.probe() is None:
                    raise
            return
        nv = self._nvml()
        try:
            nv.nvmlDeviceResetGpuLockedClocks(nv.nvmlDeviceGetHandleByIndex(self.target["gpu"]))
        except Exception as e:  # noqa: BLE001
            self._smi("-rgc", e)

    def read_back(self) -> dict:
        if self.sim:
            return self._sim("GET")
        nv = self._nvml()
        h = nv.nvmlDeviceGetHandleByIndex(self.target["gpu"])
        return {"graphics_mhz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_GRAPHICS),
                "max_graphics_mhz": nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_GRAPHICS)}

    def _smi(self, flag: str, nvml_error: Exception) -> None:
        smi = shutil.which("nvidia-smi")
        if smi is None:
            raise InjectError(f"NVML refused ({nvml_error}) and nvidia-smi is not installed")
        r = subprocess.run([smi, "-i", str(self.target["gpu"]), flag], capture_output=True, text=True)
        if r.returncode != 0:
            raise InjectError(f"nvidia-smi {flag}: {(r.stderr or r.stdout).strip().splitlines()[-1]}")
