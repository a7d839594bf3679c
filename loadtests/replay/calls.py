"""A replayed request as sent: the recorded body (or, for a trace, a prompt of the recorded size),
with the target's model, streaming on, the recorded output length asked for where the log has one,
and the language in a header (and the body, with --lang-in-body)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from llmchaos.headers import LANG_HEADER
from loadtests.adapters import Call
from loadtests.logs import sized_prompts
from loadtests.logs.log_record import LogRecord

PATHS = {"openai-chat": "/v1/chat/completions", "openai-completions": "/v1/completions"}


@dataclass(frozen=True)
class CallOptions:
    model: str
    max_tokens: int  # for a trace line without an output length
    stream: bool
    lang_in_body: bool
    api_key: str | None
    force_output: bool  # ask for exactly the recorded output length

    @classmethod
    def of(cls, o: dict[str, Any]) -> CallOptions:
        """From the replay's carried options."""
        return cls(
            o["model"], o["max_tokens"], not o["no_stream"], o["lang_in_body"], o["api_key"], o["force_output_length"]
        )


def build(
    rec: LogRecord, lang: str, api: str, loop: int, o: CallOptions, pause: Callable[[], None] = lambda: None
) -> tuple[Call, int | None]:
    """The call for `rec` in its `loop`-th pass over the log, and the output tokens it asks for (None:
    the recorded body asks for none, the target decides); `pause` is called between the parts of a
    long prompt (the dispatcher lets the event loop run)."""
    if rec.body is not None:
        body = dict(rec.body)
        want = rec.output_tokens if o.force_output else None
    else:
        text = []
        for part in sized_prompts.parts(
            lang, rec.input_tokens or 1, f"{loop}:{rec.line}", rec.hash_ids, rec.block_tokens
        ):
            text.append(part)
            pause()
        body = _prompt_body(api, "".join(text))
        want = rec.output_tokens if rec.output_tokens is not None else o.max_tokens
    if want is not None:
        _ask(api, body, max(1, want), o.force_output)
    headers = {"content-type": "application/json", LANG_HEADER: lang}
    if api == "gemini":
        body.pop("model", None)
        if o.lang_in_body:
            body["labels"] = {**(body.get("labels") or {}), "lang": lang}
        if o.api_key:
            headers["x-goog-api-key"] = o.api_key
        path = f"/v1beta/models/{o.model}:" + ("streamGenerateContent?alt=sse" if o.stream else "generateContent")
        asked = (body.get("generationConfig") or {}).get("maxOutputTokens")
    else:
        body["model"] = o.model
        body["stream"] = o.stream
        if o.stream:
            body["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
        else:
            body.pop("stream_options", None)
        if o.lang_in_body:
            body["metadata"] = {**(body.get("metadata") or {}), "lang": lang}
        if o.api_key:
            headers["authorization"] = f"Bearer {o.api_key}"
        path = PATHS[api]
        asked = body.get("max_completion_tokens") or body.get("max_tokens")
    return Call(path, headers, orjson.dumps(body)), asked if isinstance(asked, int) else None


def _prompt_body(api: str, text: str) -> dict[str, Any]:
    if api == "gemini":
        return {"contents": [{"role": "user", "parts": [{"text": text}]}]}
    if api == "openai-completions":
        return {"prompt": text}
    return {"messages": [{"role": "user", "content": text}]}


def _ask(api: str, body: dict[str, Any], n: int, force: bool) -> None:
    """Ask for `n` output tokens; `force`: no fewer either (OpenAI APIs, vLLM's ignore_eos and min_tokens)."""
    if api == "gemini":
        body["generationConfig"] = {**(body.get("generationConfig") or {}), "maxOutputTokens": n}
        return
    body["max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"] = n
    if force:
        body |= {"ignore_eos": True, "min_tokens": n}
