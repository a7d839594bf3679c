"""common_webhook.go and selector.go: Duration, FloatStr and the pod selector's mode and value."""

from __future__ import annotations

from faults.k8s.admission.fielderrors import Path, invalid
from faults.k8s.admission.goparse import GoError, atoi, parse_duration, parse_float32
from faults.k8s.admission.walk import Field, Struct


def duration(v: object, path: Path) -> list[str]:
    if v == "":  # allowed: a zero duration
        return []
    try:
        parse_duration(str(v))
    except GoError as e:
        return [invalid(path, v, f"parse duration field error: {e}")]
    return []


def float_str(v: object, path: Path) -> list[str]:
    try:
        parse_float32(str(v))
    except GoError as e:
        return [invalid(path, v, f"parse correlation field error:{e}")]
    return []


def _pod_selector(v: dict | None, path: Path) -> list[str]:
    if v is None:
        return []
    mode, value, at = v.get("mode", ""), str(v.get("value", "")), path.child("value")
    if mode not in ("fixed", "fixed-percent", "random-max-percent"):
        return []
    try:
        n = atoi(value)
    except GoError as e:
        return [invalid(at, value, f"parse value field error:{e}")]
    if mode == "fixed" and n <= 0:
        return [invalid(at, value, "value must be greater than 0 with mode:fixed")]
    if mode != "fixed" and not 0 < n <= 100:
        return [invalid(at, value, f"value of {n} is invalid, Must be (0,100] with mode:{mode}")]
    return []


POD_SELECTOR = Struct(check=_pod_selector)
CONTAINER_SELECTOR = Struct((Field("PodSelector", of=POD_SELECTOR),))
DURATION = Field("Duration", "duration", check=duration, pointer=True)
