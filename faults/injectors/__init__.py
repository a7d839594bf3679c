"""Fault injectors, one file per kind, each with the same small interface (`base.Injector`)."""

from __future__ import annotations

from faults.injectors.base import Injector
from faults.injectors.cache_flush import CacheFlush
from faults.injectors.corrupt import Corrupt
from faults.injectors.docker import Docker
from faults.injectors.gpu_clock import GpuClock
from faults.injectors.kv_link import KvLink
from faults.injectors.netem import Netem
from faults.injectors.replica import Replica
from faults.injectors.router import RouterDrop
from faults.injectors.sse import SSE
from faults.injectors.tbf import Tbf

KINDS: dict[str, type[Injector]] = {
    k.kind: k for k in (SSE, GpuClock, Netem, Tbf, Docker, Corrupt, Replica, KvLink, RouterDrop, CacheFlush)
}
