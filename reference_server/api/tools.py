"""Tool calls (function calling) as the reference server makes them, for both APIs.

When a request offers tools, the model answers with a call instead of text: always where the request
forces one (OpenAI `tool_choice: required` or a named function, Gemini mode `ANY`), never where it
forbids them (`none`, `NONE`), and with `auto` for the first one or two hops after the last user
message (1 + CRC-32 of the seed and that message, mod 2), so an agent loop of one or two tool round
trips comes back the same for a given seed. The tool is the named one, else the offered tool that
hash picks; the answer's tokens (as the engine decodes them, one step each) are the text of the
tool's first string parameter, so a call streams and costs like an answer of that length, and its
arguments are valid JSON whatever the tokens."""

from __future__ import annotations

import json
import uuid
import zlib
from dataclasses import dataclass

AUTO_HOPS = 2  # `auto` calls a tool on the first 1 to AUTO_HOPS requests after each user message


@dataclass(frozen=True)
class Offered:
    """An offered tool: its name and the string parameter its calls' text goes in (None: it has none)."""

    name: str
    argument: str | None

    @classmethod
    def of(cls, name: str, parameters: dict | None) -> Offered:
        """The tool `name` with its JSON schema's first string parameter (the required ones first)."""
        props = (parameters or {}).get("properties") or {}
        strings = [k for k, v in props.items() if isinstance(v, dict) and v.get("type") == "string"]
        required = [k for k in (parameters or {}).get("required") or () if k in strings]
        return cls(name, (required or strings or [None])[0])


@dataclass(frozen=True)
class ToolCall:
    """The call an answer makes."""

    tool: Offered
    call_id: str

    def opening(self) -> str:
        """The arguments' JSON before the answer's text."""
        return "{" + json.dumps(self.tool.argument) + ': "' if self.tool.argument else ""

    def closing(self) -> str:
        return '"}' if self.tool.argument else "{}"

    @staticmethod
    def piece(text: str) -> str:
        """A piece of the answer's text inside the arguments' JSON string."""
        return json.dumps(text, ensure_ascii=False)[1:-1]

    def arguments(self, text: str) -> str:
        """The whole arguments of an answer `text`."""
        return self.opening() + self.piece(text) + self.closing() if self.tool.argument else "{}"


def choose(
    offered: list[Offered], mode: str, forced: str | None, seed: int | None, user_text: str, hops: int
) -> ToolCall | None:
    """The call the answer makes, or None for text. `mode` is none, auto or required (a named
    function is `forced`); `hops`: tool results since the last user message."""
    if not offered or mode == "none":
        return None
    key = f"{seed}:{user_text}"
    if mode == "auto" and hops >= 1 + zlib.crc32(key.encode()) % AUTO_HOPS:
        return None
    if forced is not None:
        tool = next(t for t in offered if t.name == forced)
    else:
        tool = offered[zlib.crc32(f"{key}:{hops}".encode()) % len(offered)]
    return ToolCall(tool, f"chatcmpl-tool-{uuid.uuid4().hex}")  # vLLM's ids
