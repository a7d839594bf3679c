"""A conversation as a request carries it, whatever its API: the turns so far (the user's messages,
the answers the server gave, its tool calls and their results) and the tools offered. The adapters
(loadtests/adapters.py) write it as OpenAI chat `messages` and `tools`, or Gemini `contents` and
`functionDeclarations`; a session (loadtests/sessions.py) grows it turn by turn."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call the model answered with: its id (OpenAI's; Gemini gives none, the client makes one),
    the function's name and its arguments as JSON object text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Message:
    """One turn: a user's message, an assistant's answer (its text and any tool calls), or a tool's
    result (`call_id` and `name`: the call it answers)."""

    role: Literal["user", "assistant", "tool"]
    text: str = ""
    calls: tuple[ToolCall, ...] = ()
    call_id: str = ""
    name: str = ""


@dataclass(frozen=True, slots=True)
class Tool:
    """A function offered to the model: its name, what it does, and its parameters' JSON schema."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=dict)
