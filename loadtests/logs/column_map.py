"""`--columns ts=time,user=meta.user_id,...`: which of a file's fields (dotted paths into JSON objects,
header names in CSV) hold each of ours."""

from __future__ import annotations

from llmchaos.errors import UsageError

FIELDS = ("ts", "user", "session", "lang", "api", "model", "body", "input_tokens", "output_tokens", "hash_ids")
MISSING = object()


def parse(text: str, flag: str = "--columns") -> dict[str, str]:
    """`ts=time,user=meta.user_id` as {"ts": "time", "user": "meta.user_id"}; a UsageError naming the
    flag for an unknown field or an item without '='."""
    out: dict[str, str] = {}
    for item in filter(None, (i.strip() for i in text.split(","))):
        ours, eq, theirs = item.partition("=")
        ours, theirs = ours.strip(), theirs.strip()
        if not eq or not theirs:
            raise UsageError(f"expected field=name, got {item!r}", field=flag)
        if ours not in FIELDS:
            raise UsageError(f"unknown field {ours!r} (known: {', '.join(FIELDS)})", field=flag)
        out[ours] = theirs
    return out


def lookup(obj: object, path: str) -> object:
    """The value at a dotted path of nested JSON objects, or MISSING."""
    for part in path.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return MISSING
        obj = obj[part]
    return obj
