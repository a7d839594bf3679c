"""API adapters: how to ask each streaming API for a completion and read its events."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol

import orjson

from llmchaos.headers import LANG_HEADER
from llmchaos.sse_codec import DONE_DATA


@dataclass(slots=True)
class Event:
    """What one SSE event (or a whole non-stream body) means."""

    text: str = ""
    done: bool = False  # the stream's terminator
    usage_tokens: int | None = None
    error: str | None = None
    error_code: int | None = None


@dataclass(frozen=True)
class Call:
    path: str
    headers: dict[str, str]
    body: bytes


class Adapter(Protocol):
    name: str

    def call(
        self, model: str, prompt: str, lang: str, max_tokens: int, stream: bool, lang_in_body: bool, api_key: str | None
    ) -> Call: ...

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


def _loads(data: str | bytes) -> dict:
    obj = orjson.loads(data)
    if not isinstance(obj, dict):
        raise ValueError("event is not a JSON object")
    return obj


class OpenAIChat:
    name = "openai-chat"
    path = "/v1/chat/completions"

    def _payload(self, model: str, prompt: str, max_tokens: int) -> dict:
        return {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens}

    def call(
        self, model: str, prompt: str, lang: str, max_tokens: int, stream: bool, lang_in_body: bool, api_key: str | None
    ) -> Call:
        body = self._payload(model, prompt, max_tokens)
        if stream:
            body |= {"stream": True, "stream_options": {"include_usage": True}}
        if lang_in_body:
            body["metadata"] = {"lang": lang}
        headers = {"content-type": "application/json", LANG_HEADER: lang}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        return Call(self.path, headers, json.dumps(body, ensure_ascii=False).encode())

    def _text(self, choice: dict) -> str:
        return (choice.get("delta") or {}).get("content") or ""

    def event(self, data: str) -> Event:
        if data == DONE_DATA:
            return Event(done=True)
        obj = _loads(data)
        if (err := _error(obj)) is not None:
            return err
        choices, usage = obj["choices"], obj.get("usage")
        text = self._text(choices[0]) if len(choices) == 1 else "".join(self._text(c) for c in choices)
        return Event(text=text, usage_tokens=usage["completion_tokens"] if usage else None)

    def body(self, raw: bytes) -> Event:
        obj = _loads(raw)
        if (err := _error(obj)) is not None:
            return err
        msg = obj["choices"][0]
        text = msg["message"]["content"] if "message" in msg else msg["text"]
        return Event(text=text or "", done=True, usage_tokens=(obj.get("usage") or {}).get("completion_tokens"))


class OpenAICompletions(OpenAIChat):
    name = "openai-completions"
    path = "/v1/completions"

    def _payload(self, model: str, prompt: str, max_tokens: int) -> dict:
        return {"model": model, "prompt": prompt, "max_tokens": max_tokens}

    def _text(self, choice: dict) -> str:
        return choice.get("text") or ""


class Gemini:
    name = "gemini"

    def call(
        self, model: str, prompt: str, lang: str, max_tokens: int, stream: bool, lang_in_body: bool, api_key: str | None
    ) -> Call:
        body: dict = {
            "contents": [{"role": "user", "parts": [{"text": prompt}]}],
            "generationConfig": {"maxOutputTokens": max_tokens},
        }
        if lang_in_body:
            body["labels"] = {"lang": lang}
        headers = {"content-type": "application/json", LANG_HEADER: lang}
        if api_key:
            headers["x-goog-api-key"] = api_key
        method = "streamGenerateContent?alt=sse" if stream else "generateContent"
        return Call(f"/v1beta/models/{model}:{method}", headers, json.dumps(body, ensure_ascii=False).encode())

    def event(self, data: str | bytes) -> Event:
        """An event's data, or a whole generateContent body (the same shape)."""
        obj = _loads(data)
        if (err := _error(obj)) is not None:
            return err
        cand = obj["candidates"][0]
        text = "".join(p.get("text", "") for p in (cand.get("content") or {}).get("parts", []))
        usage = obj.get("usageMetadata") or {}
        done = "finishReason" in cand
        return Event(text=text, done=done, usage_tokens=usage.get("candidatesTokenCount") if done else None)

    def body(self, raw: bytes) -> Event:
        ev = self.event(raw)
        ev.done = True
        return ev


ADAPTERS: dict[str, Adapter] = {a.name: a for a in (OpenAIChat(), OpenAICompletions(), Gemini())}
