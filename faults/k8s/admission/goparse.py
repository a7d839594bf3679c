"""Go's own parsers, as Chaos Mesh's webhooks call them: time.ParseDuration and Duration.String,
strconv.ParseFloat (32 bits) and ParseUint, docker/go-units' FromHumanSize (v0.5.0). Ported by hand:
a webhook refuses what Go refuses, and Python's float() and timedelta read other syntaxes."""

from __future__ import annotations

import math
import re
import struct

SECOND = 10**9
UNITS = {"ns": 1, "us": 1000, "µs": 1000, "μs": 1000, "ms": 10**6, "s": SECOND, "m": 60 * SECOND, "h": 3600 * SECOND}
MAX_U64 = 2**64 - 1
DECIMAL = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
HEX_DIGITS = r"[0-9a-fA-F](_?[0-9a-fA-F])*"
HEX = re.compile(rf"[+-]?0[xX]_?({HEX_DIGITS}(\.({HEX_DIGITS})?)?|\.{HEX_DIGITS})[pP][+-]?\d(_?\d)*")
INF = re.compile(r"[+-]?(inf|infinity)", re.IGNORECASE)
HUMAN_UNITS = {"k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4, "p": 1000**5}


class GoError(ValueError):
    """The error Go returns, worded as Go words it."""


def quote(s: str) -> str:
    """strconv.Quote, for the printable text a YAML file holds."""
    body = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
    return f'"{body}"'


def parse_duration(s: str) -> int:
    """time.ParseDuration: nanoseconds, or GoError with Go's message."""
    orig, neg, total = s, False, 0
    invalid = GoError(f"time: invalid duration {quote(orig)}")
    if s[:1] in ("-", "+"):
        neg, s = s[0] == "-", s[1:]
    if s == "0":
        return 0
    if not s:
        raise invalid
    while s:
        m = re.match(r"(\d*)(\.(\d*))?", s)
        assert m is not None  # matches the empty string
        whole, frac = m.group(1), m.group(3) or ""
        if (not whole and not frac) or (s[0] != "." and not s[0].isdigit()):
            raise invalid
        if whole and int(whole) > 2**63:
            raise invalid  # leadingInt's overflow
        s = s[m.end() :]
        unit = re.match(r"[^.0-9]*", s)
        assert unit is not None
        if not unit.group():
            raise GoError(f"time: missing unit in duration {quote(orig)}")
        u, s = unit.group(), s[unit.end() :]
        if u not in UNITS:
            raise GoError(f"time: unknown unit {quote(u)} in duration {quote(orig)}")
        v = int(whole or 0)
        if v > 2**63 // UNITS[u]:
            raise invalid
        v *= UNITS[u]
        digits = frac[:19]  # leadingFraction stops adding digits once they would overflow
        if digits and int(digits):
            v += int(float(int(digits)) * (UNITS[u] / 10 ** len(digits)))
        total += v
        if v > 2**63 or total > 2**63:
            raise invalid
    if not neg and total > 2**63 - 1:
        raise invalid
    return -total if neg else total


def _frac(v: int, prec: int) -> tuple[str, int]:
    digits = str(v % 10**prec).rjust(prec, "0").rstrip("0")
    return ("." + digits if digits else ""), v // 10**prec


def duration_string(ns: int) -> str:
    """time.Duration.String: 20s, 1m0s, 1h30m0s, 1.5s, 500ms."""
    sign, u = ("-" if ns < 0 else ""), abs(ns)
    if u == 0:
        return "0s"
    if u < SECOND:
        prec, unit = (0, "ns") if u < 1000 else (3, "µs") if u < 10**6 else (6, "ms")
        frac, u = _frac(u, prec)
        return f"{sign}{u}{frac}{unit}"
    frac, u = _frac(u, 9)
    out = f"{u % 60}{frac}s"
    u //= 60
    if u:
        out = f"{u % 60}m{out}"
        u //= 60
        if u:
            out = f"{u}h{out}"
    return sign + out


def parse_float32(s: str) -> float:
    """strconv.ParseFloat(s, 32)."""

    def fail(why: str) -> GoError:
        return GoError(f"strconv.ParseFloat: parsing {quote(s)}: {why}")

    if INF.fullmatch(s):
        return float("-inf" if s[0] == "-" else "inf")
    if s.lower() == "nan":
        return float("nan")
    if DECIMAL.fullmatch(s):
        v = float(s)
    elif HEX.fullmatch(s):
        sign, body = (-1.0 if s[0] == "-" else 1.0), s.lstrip("+-").replace("_", "")
        v = sign * float.fromhex(body)
    else:
        raise fail("invalid syntax")
    if math.isinf(struct.unpack("f", struct.pack("f", v))[0]):  # rounds past float32's largest
        raise fail("value out of range")
    return v


def atoi(s: str) -> int:
    """strconv.Atoi (64-bit int)."""
    if not re.fullmatch(r"[+-]?[0-9]+", s):
        raise GoError(f"strconv.Atoi: parsing {quote(s)}: invalid syntax")
    if not -(2**63) <= int(s) < 2**63:
        raise GoError(f"strconv.Atoi: parsing {quote(s)}: value out of range")
    return int(s)


def parse_uint(s: str) -> int:
    """strconv.ParseUint(s, 10, 64)."""
    if not re.fullmatch(r"[0-9]+", s):
        raise GoError(f"strconv.ParseUint: parsing {quote(s)}: invalid syntax")
    if int(s) > MAX_U64:
        raise GoError(f"strconv.ParseUint: parsing {quote(s)}: value out of range")
    return int(s)


def from_human_size(size: str) -> float:
    """docker/go-units FromHumanSize (v0.5.0's parseSize, decimal units): bytes."""
    sep = max(size.rfind(c) for c in "01234567890. ")
    if sep == -1:
        raise GoError(f"invalid size: '{size}'")
    num, sfx = (size[: sep + 1], size[sep + 1 :]) if size[sep] != " " else (size[:sep], size[sep + 1 :])
    if not DECIMAL.fullmatch(num) and not HEX.fullmatch(num) and not INF.fullmatch(num) and num.lower() != "nan":
        raise GoError(f"strconv.ParseFloat: parsing {quote(num)}: invalid syntax")
    value = float.fromhex(num) if HEX.fullmatch(num) else float(num)
    if value < 0:
        raise GoError(f"invalid size: '{size}'")
    if not sfx:
        return value
    low = sfx.lower()
    if len(sfx) > 3 or (low[0] == "b" and len(low) > 1) or (low[0] != "b" and low[0] not in HUMAN_UNITS):
        raise GoError(f"invalid suffix: '{low if len(sfx) <= 3 else sfx}'")
    if low[0] == "b":
        return value
    if (len(low) == 2 and low[1] != "b") or (len(low) == 3 and low[1:] != "ib"):
        raise GoError(f"invalid suffix: '{low}'")
    return value * HUMAN_UNITS[low[0]]
