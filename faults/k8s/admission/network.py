"""networkchaos_webhook.go: a rate's integer and unit, netem's floats and durations, and which
directions need a target."""

from __future__ import annotations

from faults.k8s.admission.common import DURATION, POD_SELECTOR, duration, float_str
from faults.k8s.admission.fielderrors import Path, invalid
from faults.k8s.admission.goparse import GoError, parse_uint
from faults.k8s.admission.walk import Field, Struct

RATE_UNITS = ("kbit", "mbit", "gbit", "tbit", "tbps", "gbps", "mbps", "kbps", "bps", "bit")


def rate_unit(text: str) -> None:
    """isValidRateUnit: an unsigned integer, then a unit (GoError otherwise)."""
    s = text.strip().lower()
    for unit in RATE_UNITS:
        if s.endswith(unit):
            parse_uint(s.removesuffix(unit).strip())
            return
    raise GoError("invalid unit")


def _rate(v: object, path: Path) -> list[str]:
    try:
        rate_unit(str(v))
    except GoError as e:
        return [invalid(path, v, f"parse rate field error:{e}")]
    return []


def _targets(v: dict, path: Path) -> list[str]:
    action, direction = v.get("action"), v.get("direction") or "to"
    if action == "partition" or direction not in ("from", "both"):
        return []
    out = []
    if v.get("externalTargets") is not None:
        out.append(
            invalid(
                path.child("direction"),
                direction,
                "external targets cannot be used with `from` and `both` direction in netem action yet",
            )
        )
    if v.get("target") is None:
        out.append(
            invalid(
                path.child("direction"),
                direction,
                "`from` and `both` direction cannot be used when targets is empty in netem action",
            )
        )
    return out


def _correlated(main: Field) -> Struct:
    """A netem parameter and its correlation (a percentage, 0 when not given)."""
    return Struct((main, Field("Correlation", "correlation", check=float_str, default="0")))


RATED = Struct((Field("Rate", "rate", check=_rate),))  # BandwidthSpec's and RateSpec's rate
REORDER = _correlated(Field("Reorder", "reorder", check=float_str))
DELAY = Struct(
    (
        Field("Latency", "latency", check=duration),
        Field("Correlation", "correlation", check=float_str, default="0"),
        Field("Jitter", "jitter", check=duration, default="0ms"),
        Field("Reorder", "reorder", of=REORDER, pointer=True),
    )
)
TC = Struct(
    (
        Field("Delay", "delay", of=DELAY, pointer=True),
        Field("Loss", "loss", of=_correlated(Field("Loss", "loss", check=float_str)), pointer=True),
        Field("Duplicate", "duplicate", of=_correlated(Field("Duplicate", "duplicate", check=float_str)), pointer=True),
        Field("Corrupt", "corrupt", of=_correlated(Field("Corrupt", "corrupt", check=float_str)), pointer=True),
        Field("Bandwidth", "bandwidth", of=RATED, pointer=True),
        Field("Rate", "rate", of=RATED, pointer=True),
    )
)
SPEC = Struct(
    (
        Field("PodSelector", of=POD_SELECTOR),
        DURATION,
        Field("TcParameter", of=TC),
        Field("Target", "target", of=POD_SELECTOR, pointer=True, nilable=True),
    ),
    check=_targets,
)
ROOT = Struct((Field("Spec", "spec", of=SPEC),))
