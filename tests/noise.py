"""How busy the machine is while a timing test runs: the yardstick for a tolerance that must hold on a
busy machine as on a quiet one (make test-stressed).

`with WakeNoise() as noise: ...` runs a process of its own that works as a server or a load generator
does, a little at a time: it sleeps 1 ms, and every 5th time also computes for 0.5 ms, noting how much
later than asked each sleep ends and how much longer than its CPU time each computation takes (a
process that only slept would be woken first and see no queue); and every 10th time, how many tasks
are runnable (/proc/stat). Afterwards `noise.worst` is the largest delay and `noise.p95` its 95th
percentile (seconds), `noise.over_1ms` the share of its delays of 1 ms or more, and
`noise.contention` the mean number of other runnable tasks per core (1.0: every core wanted all the
time; above it, tasks queued for a core); `noise.slowdown`, 1 + contention, is how many times longer
CPU work took than on an idle machine (a fair scheduler gives a task its share of a core). The
processes a test starts (a server, Locust) and the test itself run at the same priority on the same
cores, so none of them was served sooner. (A process, not a thread: a thread would be measuring this
process's GIL as well.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from types import TracebackType

TICK_S, WORK_S = 0.001, 0.0005
PROBE = f"""
import itertools, sys, threading, time
done, late, running = threading.Event(), [], []
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
with open("/proc/stat", "rb") as stat:
    prev = time.perf_counter()  # the end of the last measurement: every stretch from it on is measured
    print("sampling", flush=True)
    for i in itertools.count(1):
        if done.is_set():
            late.append(time.perf_counter() - prev)  # bookkeeping since, unless held off the CPU meanwhile
            break
        time.sleep({TICK_S})
        now = time.perf_counter()
        late.append(max(0.0, now - prev - {TICK_S}))
        prev = now
        if i % 5 == 0:
            cpu = time.thread_time()
            while time.thread_time() - cpu < {WORK_S}:
                pass
            now = time.perf_counter()
            late.append(max(0.0, now - prev - (time.thread_time() - cpu)))
            prev = now
        if i % 10 == 0:
            stat.seek(0)
            line = next(x for x in stat.read().splitlines() if x.startswith(b"procs_running"))
            running.append(int(line.split()[1]) - 1)  # but this probe
late.sort()
n = len(late)
print(late[-1] if n else 0.0, late[int(0.95 * n)] if n else 0.0, sum(running) / len(running) if running else 0.0,
      sum(x >= 0.001 for x in late) / n if n else 0.0)
"""


class WakeNoise:
    def __init__(self) -> None:
        self.worst = self.p95 = self.contention = self.over_1ms = 0.0
        self._proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> WakeNoise:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", PROBE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self._proc.stdout is not None
        self._proc.stdout.readline()  # sampling from now on
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        assert self._proc is not None
        out, _ = self._proc.communicate(timeout=60)  # closes its stdin: it prints its figures and ends
        worst, p95, running, self.over_1ms = map(float, out.split())
        self.worst, self.p95, self.contention = worst, p95, running / (os.cpu_count() or 1)

    @property
    def slowdown(self) -> float:
        return 1.0 + self.contention
