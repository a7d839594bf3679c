"""Names and labels of the objects a schedule renders to: DNS labels, stable (the same schedule and
options give the same names), short enough for Chaos Mesh, labelled with the run and the window."""

from __future__ import annotations

import re
import time

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")  # RFC 1123: a step's or a window's name
DNS_1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")  # RFC 1035, what a Service's name must be: the run's
# Chaos Mesh names a step's node, and that node's pod, after the template with up to 17 characters
# more, and puts those names in label values (63 at most): every name we make stays within this.
MAX = 40
GROUP = "llmchaos.dev"
RUN, WINDOW = f"{GROUP}/run", f"{GROUP}/window"


def check(name: str, pattern: re.Pattern[str] = DNS_LABEL) -> str | None:
    """Why `name` cannot name a cluster object, or None."""
    if not pattern.fullmatch(name):
        first = "a lowercase letter" if pattern is DNS_1035 else "a lowercase letter or digit"
        return f"{name!r} is not a DNS label ({first}, then lowercase letters, digits and '-')"
    if len(name) > MAX:
        return f"{name!r} is {len(name)} characters, over the {MAX} that leave room for Chaos Mesh's suffixes"
    return None


def labels(run: str, window: str | None = None) -> dict[str, str]:
    """What every object we render carries: who made it, the run, and the window it does."""
    out = {"app.kubernetes.io/managed-by": "llmchaos", RUN: run}
    return out | ({WINDOW: window} if window else {})


def meta(name: str, namespace: str, run: str, window: str | None = None) -> dict:
    """An object's metadata."""
    return {"name": name, "namespace": namespace, "labels": labels(run, window)}


def fresh(stem: str, now: float | None = None) -> str:
    """A run's name from `stem`, made new by the time (base 36 seconds): a finished Workflow or Job
    applied again unchanged is left as it is, so each render must name a new run."""
    n, digits = int(time.time() if now is None else now), ""
    while n:
        n, d = divmod(n, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[d] + digits
    return f"{stem}-{digits or '0'}"
