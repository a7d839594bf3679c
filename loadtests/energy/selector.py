"""A PromQL label selector, matched against the labels of samples read off a page or a fault host.

Hand-written: prometheus-client parses an exposition, but no kept library matches a selector."""

from __future__ import annotations

import re
from dataclasses import dataclass

from llmchaos.errors import UsageError

ESCAPE = re.compile(r"\\(.)")  # a string's backslash escapes (\" \\ \n \t); any other character stands for itself
UNESCAPED = {"n": "\n", "t": "\t"}
MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(,|$)')


@dataclass(frozen=True)
class Matcher:
    label: str
    op: str
    value: str

    def __call__(self, labels: dict[str, str]) -> bool:
        have = labels.get(self.label, "")
        if self.op in ("=", "!="):
            return (have == self.value) == (self.op == "=")
        return (re.fullmatch(self.value, have) is not None) == (self.op == "=~")


def selector(text: str) -> list[Matcher]:
    """A PromQL label selector (`{UUID="GPU-1",Hostname=~"gpu-.*"}`, braces optional) as matchers;
    a UsageError naming `--energy-selector` when it is not one."""
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    out, pos = [], 0
    while pos < len(body.rstrip()):
        m = MATCHER.match(body, pos)
        if m is None:
            raise UsageError(
                f'not a label selector at {body[pos:]!r} (e.g. {{Hostname="gpu-1"}})', field="--energy-selector"
            )
        value = ESCAPE.sub(lambda e: UNESCAPED.get(e[1], e[1]), m[3])
        if m[2] in ("=~", "!~"):
            try:
                re.compile(value)
            except re.error as e:
                raise UsageError(f"bad regular expression {value!r}: {e}", field="--energy-selector") from None
        out.append(Matcher(m[1], m[2], value))
        pos = m.end()
    return out
