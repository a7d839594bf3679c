"""The data plane: one native thread per Locust process reads every stream's bytes. Two of them: the
native one (`native`, C: `_native.c`), and the Python one (`loop`, one keep-alive connection each in
`connection`, one request's response in `request`); both judge a response with `response`."""

from __future__ import annotations

import os

from loadtests.dataplane import native

PLANES = ("native", "python")
used: set[str] = set()  # the planes this process's clients chose (run.json: generator.<process>.plane)


def choose(https: bool) -> str:
    """The plane for a client: LLMCHAOS_PLANE (native or python; unset: native when it is built).
    https goes on the Python plane, whose TLS through memory BIOs keeps the kernel's stamps."""
    asked = os.environ.get("LLMCHAOS_PLANE", "")
    if asked and asked not in PLANES:
        raise ValueError(f"LLMCHAOS_PLANE={asked!r}: not one of {', '.join(PLANES)}")
    if asked == "native" and not native.available():
        raise ValueError("LLMCHAOS_PLANE=native: the native plane is not built (make install builds it with cc)")
    chosen = "native" if asked != "python" and native.available() and not https else "python"
    used.add(chosen)
    return chosen
