"""API adapters: how to ask each streaming API for a completion and read its events."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import orjson

from llmchaos.headers import LANG_HEADER
from llmchaos.sse_codec import DONE_DATA


@dataclass(frozen=True, slots=True)
class Tool:
    """A tool a request offers: its name, what it does, its parameters' JSON schema."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(slots=True)
class ToolCall:
    """A call an answer made (its pieces put together as they streamed)."""

    id: str | None = None
    name: str = ""
    arguments: str = ""  # JSON, as the API sends it


@dataclass(frozen=True, slots=True)
class Message:
    """A message of a conversation's history: the user's, an answer (its text, or the calls it
    made), or a tool's result (`call`: the call it answers)."""

    role: Literal["user", "assistant", "tool"]
    text: str = ""
    calls: tuple[ToolCall, ...] = ()
    call: ToolCall | None = None


MAX_CALLS = 128  # an answer's tool calls: more is no API's answer
# (index, id, name, arguments): a piece of one call; index None: a whole call (Gemini sends them so)
CallPiece = tuple[int | None, str | None, str | None, str]


def add_pieces(calls: list[ToolCall], pieces: tuple[CallPiece, ...]) -> None:
    """Pieces of an answer's calls into `calls` (index i is calls[i]), as they stream."""
    for index, call_id, name, arguments in pieces:
        at = len(calls) if index is None else index
        while len(calls) <= at:
            calls.append(ToolCall())
        call = calls[at]
        call.id = call_id or call.id
        call.name = name or call.name
        call.arguments += arguments


@dataclass(slots=True)
class Event:
    """What one SSE event (or a whole non-stream body) means."""

    text: str = ""  # answer tokens' text (tool-call arguments included)
    reasoning: str = ""  # thinking tokens' text (a reasoning model's, streamed before its answer)
    done: bool = False  # the stream's terminator
    usage_tokens: int | None = None  # output tokens, thinking included
    usage_reasoning: int | None = None  # ... of which thinking
    usage_prompt: int | None = None  # the prompt's tokens, as the server counted them
    usage_cached: int | None = None  # ... of which found in its prefix cache (None: it did not say)
    error: str | None = None
    error_code: int | None = None
    calls: tuple[CallPiece, ...] = ()  # pieces of the answer's tool calls


@dataclass(frozen=True, slots=True)
class Ask:
    """What a request asks for, whatever its API: `call` builds the whole request, `patch` lays it
    over a recorded body (a replay's), which keeps everything else it asked for."""

    model: str
    lang: str
    prompt: str = ""  # the user's message (`call`; empty: a tool hop, the history ending in the results)
    max_tokens: int | None = None  # output tokens; None: as the body says, else the target decides
    stream: bool = True
    lang_in_body: bool = False  # the language in the body too (OpenAI metadata, Gemini labels)
    api_key: str | None = None
    thoughts: bool = False  # Gemini: a thinking model streams its thoughts
    force_output: bool = False  # no fewer tokens either (OpenAI APIs: vLLM's ignore_eos and min_tokens)
    greedy_seed: int | None = None  # a canary's: temperature 0 and this seed (None: as the target defaults)
    history: tuple[Message, ...] = ()  # a conversation's messages so far
    tools: tuple[Tool, ...] = ()  # offered (OpenAI chat `tools`, Gemini `functionDeclarations`)


@dataclass(frozen=True)
class Call:
    path: str
    headers: dict[str, str]
    body: bytes
    max_tokens: int | None = None  # the output tokens the body asks for (None: it asks for none)


class Adapter(Protocol):
    name: str
    ends: tuple[bytes, ...]  # bytes that every event ending a stream (terminator, error) contains

    def call(self, ask: Ask) -> Call:
        """The whole request for `ask`."""
        ...

    def patch(self, body: dict[str, Any], ask: Ask) -> Call:
        """A recorded request's `body` (not changed) as `ask` asks: its model, streaming, output
        length (when given), language and key; everything else as recorded."""
        ...

    def event(self, data: str) -> Event:
        """Parse one SSE data payload; ValueError when it is not what the API sends."""
        ...

    def body(self, raw: bytes) -> Event:
        """Parse a non-stream response body."""
        ...


def _error(obj: dict) -> Event | None:
    err = obj.get("error")
    if err is None:
        return None
    if not isinstance(err, dict):
        return Event(error=str(err), done=True)
    code = err.get("code")
    return Event(error=str(err.get("message", err)), error_code=code if isinstance(code, int) else None, done=True)


def _count(value: object, name: str) -> int | None:
    """A token count as the API sends it: a whole number, not negative (None where absent); a
    ValueError otherwise, so that the request is `malformed` and says why."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"usage {name} is not a whole number of tokens: {value!r}")
    return value


def _openai_usage(usage: dict) -> tuple[int | None, int | None, int | None, int | None]:
    """completion_tokens and the reasoning_tokens within them (never more); prompt_tokens and the
    cached_tokens within them (vLLM with --enable-prompt-tokens-details, OpenAI's own)."""
    details = usage.get("completion_tokens_details") or {}
    total = _count(usage.get("completion_tokens"), "completion_tokens")
    reasoning = _count(details.get("reasoning_tokens"), "reasoning_tokens")
    if reasoning is not None and (total is None or reasoning > total):
        raise ValueError(f"usage reasoning_tokens {reasoning} is more than completion_tokens {total}")
    prompt = _count(usage.get("prompt_tokens"), "prompt_tokens")
    cached = _count((usage.get("prompt_tokens_details") or {}).get("cached_tokens"), "cached_tokens")
    return total, reasoning, prompt, _within(cached, prompt, "cached_tokens", "prompt_tokens")


def _within(part: int | None, whole: int | None, name: str, whole_name: str) -> int | None:
    if part is not None and whole is not None and part > whole:
        raise ValueError(f"usage {name} {part} is more than {whole_name} {whole}")
    return part


def _headers(ask: Ask, key_header: str, key: str | None) -> dict[str, str]:
    headers = {"content-type": "application/json", LANG_HEADER: ask.lang}
    if key is not None:
        headers[key_header] = key
    return headers


def _merged(body: dict[str, Any], field: str, **values: object) -> None:
    """`values` into `body[field]` (an object), keeping what it held."""
    body[field] = {**(body.get(field) or {}), **values}


def _loads(data: str | bytes) -> dict:
    obj = orjson.loads(data)
    if not isinstance(obj, dict):
        raise ValueError("event is not a JSON object")
    return obj


class OpenAIChat:
    name = "openai-chat"
    path = "/v1/chat/completions"
    ends: tuple[bytes, ...] = (DONE_DATA.encode(), b'"error"')

    def _payload(self, ask: Ask) -> dict[str, Any]:
        said = [*ask.history, Message("user", ask.prompt)] if ask.prompt else list(ask.history)
        body: dict[str, Any] = {"messages": [self._message(m) for m in said]}
        if ask.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in ask.tools
            ]
        return body

    @staticmethod
    def _message(m: Message) -> dict[str, Any]:
        if m.calls:
            calls = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in m.calls
            ]
            return {"role": "assistant", "content": None, "tool_calls": calls}
        if m.call is not None:
            return {"role": "tool", "tool_call_id": m.call.id, "content": m.text}
        return {"role": m.role, "content": m.text}

    def call(self, ask: Ask) -> Call:
        return self.patch(self._payload(ask), ask)

    def patch(self, body: dict[str, Any], ask: Ask) -> Call:
        body = {**body, "model": ask.model, "stream": ask.stream}
        if ask.stream:
            _merged(body, "stream_options", include_usage=True)
        else:
            body.pop("stream_options", None)
        if ask.max_tokens is not None:
            body["max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"] = ask.max_tokens
            if ask.force_output:
                body |= {"ignore_eos": True, "min_tokens": ask.max_tokens}
        if ask.greedy_seed is not None:
            body |= {"temperature": 0, "seed": ask.greedy_seed}
        if ask.lang_in_body:
            _merged(body, "metadata", lang=ask.lang)
        asked = body.get("max_completion_tokens") or body.get("max_tokens")
        key = f"Bearer {ask.api_key}" if ask.api_key else None
        return Call(self.path, _headers(ask, "authorization", key), orjson.dumps(body), _whole(asked))

    def _text(self, choice: dict) -> str:
        """The answer a choice's delta carries: its content and its tool calls' name and arguments."""
        delta = choice.get("delta") or {}
        text = delta.get("content") or ""
        for call in delta.get("tool_calls") or ():
            fn = call.get("function") or {}
            text += (fn.get("name") or "") + (fn.get("arguments") or "")
        return text

    def _calls(self, message: dict) -> tuple[CallPiece, ...]:
        """The pieces of tool calls a delta (or a whole message) carries; a ValueError for one that
        is not what the API sends (the request is `malformed`)."""
        pieces: list[CallPiece] = []
        for i, c in enumerate(message.get("tool_calls") or ()):
            index, fn = c.get("index", i), c.get("function") or {}
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < MAX_CALLS:
                raise ValueError(f"tool call index {index!r} is not a whole number below {MAX_CALLS}")
            name, arguments = fn.get("name"), fn.get("arguments") or ""
            if not isinstance(name, str | None) or not isinstance(arguments, str):
                raise ValueError("a tool call's name and arguments are not strings")
            pieces.append((index, c.get("id"), name, arguments))
        return tuple(pieces)

    def _reasoning(self, choice: dict) -> str:
        """The thinking a choice's delta carries: vLLM's `reasoning_content`, or `reasoning` (newer)."""
        delta = choice.get("delta") or {}
        return delta.get("reasoning_content") or delta.get("reasoning") or ""

    def event(self, data: str) -> Event:
        if data == DONE_DATA:
            return Event(done=True)
        obj = _loads(data)
        if (err := _error(obj)) is not None:
            return err
        choices, usage = obj["choices"], obj.get("usage")
        if len(choices) == 1:
            text, reasoning = self._text(choices[0]), self._reasoning(choices[0])
        else:
            text, reasoning = "".join(map(self._text, choices)), "".join(map(self._reasoning, choices))
        calls = self._calls(choices[0].get("delta") or {}) if choices else ()
        if not usage:
            return Event(text=text, reasoning=reasoning, calls=calls)
        if "completion_tokens" not in usage:
            raise KeyError("completion_tokens")
        return Event(text, reasoning, False, *_openai_usage(usage), calls=calls)

    def body(self, raw: bytes) -> Event:
        obj = _loads(raw)
        if (err := _error(obj)) is not None:
            return err
        msg = obj["choices"][0]
        message = msg.get("message")
        text, reasoning = (
            (message.get("content"), self._reasoning({"delta": message})) if message else (msg["text"], "")
        )
        calls = self._calls(message) if message else ()
        text = (text or "") + "".join((name or "") + args for _, _, name, args in calls)
        return Event(text, reasoning, True, *_openai_usage(obj.get("usage") or {}), calls=calls)


class OpenAICompletions(OpenAIChat):
    name = "openai-completions"
    path = "/v1/completions"

    def _payload(self, ask: Ask) -> dict[str, Any]:
        """One text: a conversation's earlier messages, each on a line of its own, then the prompt
        (a completion offers no tools)."""
        return {"prompt": "".join(f"{m.text}\n" for m in ask.history) + ask.prompt}

    def _calls(self, message: dict) -> tuple[CallPiece, ...]:
        return ()

    def _text(self, choice: dict) -> str:
        return choice.get("text") or ""

    def _reasoning(self, choice: dict) -> str:
        return ""


class Gemini:
    name = "gemini"
    ends: tuple[bytes, ...] = (b'"finishReason"', b'"error"')

    def call(self, ask: Ask) -> Call:
        said = [*ask.history, Message("user", ask.prompt)] if ask.prompt else list(ask.history)
        body: dict[str, Any] = {"contents": [self._content(m) for m in said]}
        if ask.tools:
            declared = [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in ask.tools]
            body["tools"] = [{"functionDeclarations": declared}]
        return self.patch(body, ask)

    @staticmethod
    def _content(m: Message) -> dict[str, Any]:
        if m.calls:
            calls = [{"functionCall": {"name": c.name, "args": json.loads(c.arguments or "{}")}} for c in m.calls]
            return {"role": "model", "parts": calls}
        if m.call is not None:
            return {
                "role": "user",
                "parts": [{"functionResponse": {"name": m.call.name, "response": {"result": m.text}}}],
            }
        return {"role": "model" if m.role == "assistant" else "user", "parts": [{"text": m.text}]}

    def patch(self, body: dict[str, Any], ask: Ask) -> Call:
        body = {k: v for k, v in body.items() if k != "model"}  # the model is in the path
        config = dict(body.get("generationConfig") or {})
        if ask.max_tokens is not None:
            config["maxOutputTokens"] = ask.max_tokens
        if ask.thoughts:  # a thinking model streams them as parts with thought: true (hidden otherwise)
            config["thinkingConfig"] = {**(config.get("thinkingConfig") or {}), "includeThoughts": True}
        if ask.greedy_seed is not None:
            config |= {"temperature": 0, "seed": ask.greedy_seed}
        if config:
            body["generationConfig"] = config
        if ask.lang_in_body:
            _merged(body, "labels", lang=ask.lang)
        method = "streamGenerateContent?alt=sse" if ask.stream else "generateContent"
        path = f"/v1beta/models/{ask.model}:{method}"
        return Call(
            path,
            _headers(ask, "x-goog-api-key", ask.api_key or None),
            orjson.dumps(body),
            _whole(config.get("maxOutputTokens")),
        )

    def event(self, data: str | bytes) -> Event:
        """An event's data, or a whole generateContent body (the same shape)."""
        obj = _loads(data)
        if (err := _error(obj)) is not None:
            return err
        cand = obj["candidates"][0]
        text = reasoning = ""
        calls: list[CallPiece] = []
        for part in (cand.get("content") or {}).get("parts", []):
            if part.get("thought") is True:  # a boolean in the API: "false" or 1 is no thinking
                reasoning += part.get("text", "")
            elif "functionCall" in part:
                fn = part["functionCall"]
                text += json.dumps(fn, ensure_ascii=False)
                calls.append((None, fn.get("id"), fn["name"], json.dumps(fn.get("args") or {}, ensure_ascii=False)))
            else:
                text += part.get("text", "")
        if "finishReason" not in cand:
            return Event(text, reasoning, calls=tuple(calls))
        usage = obj.get("usageMetadata") or {}
        prompt = _count(usage.get("promptTokenCount"), "promptTokenCount")
        cached = _count(usage.get("cachedContentTokenCount"), "cachedContentTokenCount")
        if cached is None and prompt is not None:
            cached = 0  # proto3 JSON leaves a zero out: no prompt token was cached
        answer = _count(usage.get("candidatesTokenCount"), "candidatesTokenCount")
        thoughts = _count(usage.get("thoughtsTokenCount"), "thoughtsTokenCount")
        if thoughts is not None and answer is None:
            answer = 0  # proto3 JSON leaves a zero out: an answer of no tokens beside its thoughts
        total = None if answer is None else answer + (thoughts or 0)  # Gemini counts thoughts apart
        return Event(
            text,
            reasoning,
            True,
            total,
            thoughts,
            prompt,
            _within(cached, prompt, "cachedContentTokenCount", "promptTokenCount"),
            calls=tuple(calls),
        )

    def body(self, raw: bytes) -> Event:
        ev = self.event(raw)
        ev.done = True
        return ev


def _whole(asked: object) -> int | None:
    return asked if isinstance(asked, int) and not isinstance(asked, bool) else None


ADAPTERS: dict[str, Adapter] = {a.name: a for a in (OpenAIChat(), OpenAICompletions(), Gemini())}
