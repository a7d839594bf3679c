"""API adapters: how to ask each streaming API for a completion and read its events."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from llmchaos.headers import LANG_HEADER
from llmchaos.sse_codec import DONE_DATA


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


@dataclass(frozen=True, slots=True)
class Ask:
    """What a request asks for, whatever its API: `call` builds the whole request, `patch` lays it
    over a recorded body (a replay's), which keeps everything else it asked for."""

    model: str
    lang: str
    prompt: str = ""  # the user's message (`call`; a patched body keeps its own)
    max_tokens: int | None = None  # output tokens; None: as the body says, else the target decides
    stream: bool = True
    lang_in_body: bool = False  # the language in the body too (OpenAI metadata, Gemini labels)
    api_key: str | None = None
    thoughts: bool = False  # Gemini: a thinking model streams its thoughts
    force_output: bool = False  # no fewer tokens either (OpenAI APIs: vLLM's ignore_eos and min_tokens)
    greedy_seed: int | None = None  # a canary's: temperature 0 and this seed (None: as the target defaults)
    history: tuple[tuple[str, str], ...] = ()  # a conversation's earlier turns: (the user's message, the answer)


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
        turns = [({"role": "user", "content": p}, {"role": "assistant", "content": a}) for p, a in ask.history]
        return {"messages": [m for turn in turns for m in turn] + [{"role": "user", "content": ask.prompt}]}

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
        if not usage:
            return Event(text=text, reasoning=reasoning)
        if "completion_tokens" not in usage:
            raise KeyError("completion_tokens")
        return Event(text, reasoning, False, *_openai_usage(usage))

    def body(self, raw: bytes) -> Event:
        obj = _loads(raw)
        if (err := _error(obj)) is not None:
            return err
        msg = obj["choices"][0]
        message = msg.get("message")
        text, reasoning = (
            (message.get("content"), self._reasoning({"delta": message})) if message else (msg["text"], "")
        )
        return Event(text or "", reasoning, True, *_openai_usage(obj.get("usage") or {}))


class OpenAICompletions(OpenAIChat):
    name = "openai-completions"
    path = "/v1/completions"

    def _payload(self, ask: Ask) -> dict[str, Any]:
        """One text: a conversation's earlier turns, each message on a line of its own, then the prompt."""
        return {"prompt": "".join(f"{p}\n{a}\n" for p, a in ask.history) + ask.prompt}

    def _text(self, choice: dict) -> str:
        return choice.get("text") or ""

    def _reasoning(self, choice: dict) -> str:
        return ""


class Gemini:
    name = "gemini"
    ends: tuple[bytes, ...] = (b'"finishReason"', b'"error"')

    def call(self, ask: Ask) -> Call:
        turns = [(("user", p), ("model", a)) for p, a in ask.history]
        messages = [m for turn in turns for m in turn] + [("user", ask.prompt)]
        return self.patch({"contents": [{"role": r, "parts": [{"text": t}]} for r, t in messages]}, ask)

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
        for part in (cand.get("content") or {}).get("parts", []):
            if part.get("thought") is True:  # a boolean in the API: "false" or 1 is no thinking
                reasoning += part.get("text", "")
            elif "functionCall" in part:
                text += json.dumps(part["functionCall"], ensure_ascii=False)
            else:
                text += part.get("text", "")
        if "finishReason" not in cand:
            return Event(text, reasoning)
        usage = obj.get("usageMetadata") or {}
        prompt = _count(usage.get("promptTokenCount"), "promptTokenCount")
        cached = _count(usage.get("cachedContentTokenCount"), "cachedContentTokenCount")
        if cached is None and prompt is not None:
            cached = 0  # proto3 JSON leaves a zero out: no prompt token was cached
        cached = _within(cached, prompt, "cachedContentTokenCount", "promptTokenCount")
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
        )

    def body(self, raw: bytes) -> Event:
        ev = self.event(raw)
        ev.done = True
        return ev


def _whole(asked: object) -> int | None:
    return asked if isinstance(asked, int) and not isinstance(asked, bool) else None


ADAPTERS: dict[str, Adapter] = {a.name: a for a in (OpenAIChat(), OpenAICompletions(), Gemini())}
