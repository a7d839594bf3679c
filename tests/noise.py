"""How late this machine wakes a sleeping process, measured while a timing test runs: the yardstick for
a tolerance that must hold on a busy machine as on a quiet one (make test-stressed).

`with WakeNoise() as noise: ...` runs a process of its own that sleeps 1 ms at a time and notes how
much later than asked each sleep ends; afterwards `noise.worst` is the largest such delay (seconds).
The processes a test starts (a server, Locust) and the test itself run at the same priority on the
same cores, so none of them was woken sooner. (A process, not a thread: a thread would be measuring
this process's GIL as well.)
"""

from __future__ import annotations

import subprocess
import sys
from types import TracebackType

TICK_S = 0.001
PROBE = f"""
import sys, threading, time
done, worst = threading.Event(), 0.0
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
print("sampling", flush=True)
while not done.is_set():
    t = time.perf_counter()
    time.sleep({TICK_S})
    worst = max(worst, time.perf_counter() - t - {TICK_S})
print(worst)
"""


class WakeNoise:
    def __init__(self) -> None:
        self.worst = 0.0
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
        out, _ = self._proc.communicate(timeout=60)  # closes its stdin: it prints the worst and ends
        self.worst = float(out)
