"""Where a qdisc fault aims: `direction` (egress | ingress | both) and `match`, the traffic it shapes.

```yaml
direction: both                              # default egress
match: {dst: 10.0.0.0/24, dport: [8000, 8001]}
```
`match` names a connection as this interface sends it: `dst`/`dport` the far end, `src`/`sport` this
end. Egress packets carry it as written; ingress packets (the answers) carry it swapped, so one match
aims at the same connections whichever way they go. Each key takes one value or a list (any of them);
the keys together must all hold. Parsed and checked here without touching anything.
"""

from __future__ import annotations

import ipaddress
import itertools
from dataclasses import dataclass

from faults.injectors.base import FieldError

KEYS = ("direction", "match")  # in an injector's params, beside the qdisc's own
DIRECTIONS = ("egress", "ingress", "both")
MATCH_KEYS = ("dst", "src", "dport", "sport")
MAX_RULES = 64  # combinations of a match's values: one filter each
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Rule:
    """One combination of a match's values: the far end and this end, each an address and a port."""

    family: int  # 4 or 6
    dst: Network | None
    src: Network | None
    dport: int | None
    sport: int | None

    def swapped(self) -> Rule:
        """The same connection as its answers carry it (ingress)."""
        return Rule(self.family, self.src, self.dst, self.sport, self.dport)


@dataclass(frozen=True)
class Aim:
    direction: str = "egress"
    rules: tuple[Rule, ...] = ()  # empty: all traffic

    @property
    def egress(self) -> bool:
        return self.direction in ("egress", "both")

    @property
    def ingress(self) -> bool:
        return self.direction in ("ingress", "both")

    @classmethod
    def of(cls, params: dict) -> Aim:
        """From an injector's params (`direction` and `match` beside the qdisc's own); FieldError naming
        `direction` or `match.KEY`."""
        direction = params.get("direction", "egress")
        if not isinstance(direction, str) or direction not in DIRECTIONS:
            raise FieldError("direction", f"expected one of {', '.join(DIRECTIONS)}, got {direction!r}")
        return cls(direction, rules(params["match"]) if "match" in params else ())


def own(params: dict) -> dict:
    """The qdisc's own params, without the direction and the match."""
    return {k: v for k, v in params.items() if k not in KEYS}


def _listed(value: object) -> list:
    return value if isinstance(value, list) else [value]


def _network(key: str, value: object) -> Network:
    if not isinstance(value, str):
        raise FieldError(f"match.{key}", f"expected an address or a CIDR such as 10.0.0.0/24, got {value!r}")
    try:
        return ipaddress.ip_network(value)
    except ValueError as e:
        raise FieldError(f"match.{key}", f"expected an address or a CIDR such as 10.0.0.0/24: {e}") from None


def _port(key: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise FieldError(f"match.{key}", f"expected a port 1 to 65535, got {value!r}")
    return value


def rules(match: object) -> tuple[Rule, ...]:
    """Every combination of a match's values that can hold together (an IPv4 and an IPv6 network never do)."""
    if not isinstance(match, dict) or not match:
        raise FieldError("match", f"expected a mapping with any of {', '.join(MATCH_KEYS)}, got {match!r}")
    values: dict[str, list] = {}
    for key, given in match.items():
        if key not in MATCH_KEYS:
            raise FieldError(f"match.{key}", f"unknown field (one of {', '.join(MATCH_KEYS)})")
        listed = _listed(given)
        if not listed:
            raise FieldError(f"match.{key}", "an empty list matches nothing")
        parse = _network if key in ("dst", "src") else _port
        values[key] = list(dict.fromkeys(parse(key, v) for v in listed))
    found = []
    for dst, src, dport, sport in itertools.product(*(values.get(k, [None]) for k in MATCH_KEYS)):
        families = {n.version for n in (dst, src) if n is not None}
        if len(families) > 1:
            continue
        found.append(Rule(families.pop() if families else 4, dst, src, dport, sport))
        if not (dst or src):  # ports alone: the same over IPv6
            found.append(Rule(6, dst, src, dport, sport))
    if not found:
        raise FieldError("match", "dst and src are of different IP versions: nothing would match")
    if len(found) > MAX_RULES:
        raise FieldError("match", f"{len(found)} combinations of its values, at most {MAX_RULES}")
    return tuple(found)
