"""The data plane: one native thread per Locust process reads every stream's bytes. Two of them: the
native one (`native`, C: `_native.c`), and the Python one (`loop`, one keep-alive connection each in
`connection`, one request's response in `request`); both judge a response with `response`."""

from __future__ import annotations

import os

from llmchaos.errors import UsageError
from loadtests.dataplane import native

PLANES = ("native", "python")
used: set[str] = set()  # the planes this process's clients chose (run.json: generator.<process>.plane)


def asked() -> str:
    """The plane LLMCHAOS_PLANE asks for ("" when unset); a value that names none, or the native
    plane where it is not built, is the user's error."""
    value = os.environ.get("LLMCHAOS_PLANE", "")
    if value and value not in PLANES:
        raise UsageError(f"{value!r} is not one of {', '.join(PLANES)}", field="LLMCHAOS_PLANE")
    if value == "native" and not native.available():
        raise UsageError("the native plane is not built (make install builds it with cc)", field="LLMCHAOS_PLANE")
    return value


def choose(https: bool) -> str:
    """The plane for a client: LLMCHAOS_PLANE's, else native where it is built. https goes on the
    Python plane, whose TLS through memory BIOs keeps the kernel's stamps."""
    chosen = "native" if asked() != "python" and native.available() and not https else "python"
    used.add(chosen)
    return chosen
