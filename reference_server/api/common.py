"""What both APIs share: errors, body parsing, auth, language, admission to the engine."""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import time
from dataclasses import replace
from json.encoder import encode_basestring
from typing import ClassVar, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from tokenizers import Encoding

from llmchaos import languages, tokenizer
from llmchaos.headers import LANG_HEADER
from reference_server.disagg import kv_pull
from reference_server.disagg.role import KV_FROM, KV_TRANSFER, KVFailed, Role
from reference_server.engine import Engine, QueueFull, Unavailable
from reference_server.sequence import SamplingParams, Sequence

M = TypeVar("M", bound=BaseModel)


class APIError(Exception):
    """An error each API renders in its own shape. `kind` is a gRPC-style status name."""

    STATUS: ClassVar[dict[str, int]] = {
        "INVALID_ARGUMENT": 400,
        "UNAUTHENTICATED": 401,
        "PERMISSION_DENIED": 403,
        "NOT_FOUND": 404,
        "RESOURCE_EXHAUSTED": 429,
        "INTERNAL": 500,
        "UNAVAILABLE": 503,
        "DEADLINE_EXCEEDED": 504,
    }

    def __init__(
        self,
        kind: str,
        message: str,
        param: str | None = None,
        retry_after: int | None = None,
        status: int | None = None,  # an HTTP status other than the kind's own (413 is INVALID_ARGUMENT too)
    ) -> None:
        super().__init__(message)
        self.kind, self.message, self.param, self.retry_after = kind, message, param, retry_after
        self.status = status or self.STATUS[kind]

    def headers(self) -> dict[str, str]:
        return {"retry-after": str(self.retry_after)} if self.retry_after is not None else {}


def check_key(given: str | None, expected: str | None) -> None:
    if expected is None:
        return
    if not given:
        raise APIError("UNAUTHENTICATED", "missing API key")
    if not secrets.compare_digest(given.encode(), expected.encode()):
        raise APIError("UNAUTHENTICATED", "invalid API key")


def bearer(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    return auth[7:].strip() if auth.lower().startswith("bearer ") else None


def received(request: Request) -> float:
    """When the request's first byte was read (time.monotonic()); now, where no server noted it."""
    return getattr(request.state, "received", None) or time.monotonic()


def check_ready(engine: Engine) -> None:
    if engine.state != "ready":
        raise APIError("UNAVAILABLE", f"server is {engine.state}", retry_after=1)


THREAD_BYTES = 64 * 1024  # bodies past this are parsed off the event loop


async def parse_body(request: Request, model: type[M]) -> M:
    """The body as `model`. Pydantic's own JSON parser refuses what json.loads lets through and the
    rest of the server cannot handle: lone surrogates (no UTF-8 for them) and deep nesting."""
    raw = await request.body()
    try:
        if len(raw) > THREAD_BYTES:
            return await asyncio.to_thread(model.model_validate_json, raw)
        return model.model_validate_json(raw)
    except ValidationError as e:
        param, msg = explain(e)
        raise APIError("INVALID_ARGUMENT", f"{param}: {msg}" if param else msg, param=param) from None


_TYPE_MISMATCH = ("_type", "missing", "union_tag_invalid")


def explain(e: ValidationError) -> tuple[str | None, str]:
    """The field path and message of the most telling error (a union's value error over its type errors)."""
    errors = e.errors(include_url=False)
    if errors[0]["type"] == "json_invalid":
        return None, f"request body is not valid JSON: {errors[0]['ctx']['error']}"
    if errors[0]["type"] == "model_type" and not errors[0]["loc"]:
        return None, "request body must be a JSON object"
    err = next((x for x in errors if not x["type"].endswith(_TYPE_MISMATCH)), errors[0])
    # Union branches add their type names ("str", "list[str]") to the location: drop them.
    path = [str(p) for p in err["loc"] if isinstance(p, int) or ("[" not in p and p not in _BRANCHES)]
    return ".".join(path) or None, err["msg"]


_BRANCHES = {"str", "int", "float", "bool", "list", "dict"}


def language(request: Request, body_tag: str | None, field: str) -> str:
    """The request's language: the x-llmchaos-lang header, else the body's metadata, else en."""
    tag = request.headers.get(LANG_HEADER) or body_tag or "en"
    if tag not in languages.registry():
        where = LANG_HEADER if request.headers.get(LANG_HEADER) else field
        raise APIError("INVALID_ARGUMENT", f"unknown language {tag!r}", param=where)
    return tag


THREAD_CHARS = 4096  # texts past this are tokenized off the event loop (~3 ms of tokenizer time)


async def encode(text: str) -> Encoding:
    """`text` tokenized. A long text is tokenized in a thread by `encode_batch`, which releases the
    GIL (`encode` does not), so the event loop keeps serving every other stream meanwhile. The
    count is `len()`: the ids become a Python list only when asked for."""
    if len(text) <= THREAD_CHARS:
        return tokenizer.load().encode(text, add_special_tokens=False)
    (encoding,) = await asyncio.to_thread(tokenizer.load().encode_batch, [text], add_special_tokens=False)
    return encoding


THINK_SUFFIX = re.compile(r"-think-(\d{1,7})")


def served(model: str, name: str) -> tuple[bool, int | None]:
    """Whether `model` names the served model `name`, and the thinking it asks for: `NAME-think-N`
    thinks N tokens first (None: the profile decides)."""
    if model == name:
        return True, None
    m = THINK_SUFFIX.fullmatch(model[len(name) :]) if model.startswith(name) else None
    return (True, int(m.group(1))) if m else (False, None)


async def admit(
    engine: Engine,
    request: Request,
    prompt: str | list[int],
    params: SamplingParams,
    lang: str,
    prompt_field: str,
    max_tokens_field: str,
    thinking: int | None = None,
) -> Sequence:
    """Tokenize, check the context length, and submit to the engine (429/503 when it refuses). The
    request thinks `thinking` tokens first (None: as the profile draws), within its max tokens. In a
    disaggregated cluster (reference_server/disagg/role.py) a prefill engine computes its prompt
    alone, and a decode engine first pulls the prompt's KV."""
    arrived = received(request)
    tokens = await encode(prompt) if isinstance(prompt, str) else prompt
    limit = engine.cfg.max_model_len
    if not len(tokens):
        raise APIError("INVALID_ARGUMENT", "prompt is empty", param="prompt")
    if len(tokens) >= limit:
        raise APIError(
            "INVALID_ARGUMENT",
            f"This model's maximum context length is {limit} tokens. However, your prompt has {len(tokens)} tokens.",
            param=prompt_field,
        )
    ids = tokens if isinstance(tokens, list) else tokens.ids
    max_tokens = params.max_tokens or limit - len(ids)  # unset: the rest of the context, as vLLM
    if len(ids) + max_tokens > limit:
        raise APIError(
            "INVALID_ARGUMENT",
            f"This model's maximum context length is {limit} tokens. "
            f"However, you requested {len(ids) + max_tokens} tokens ({len(ids)} in the "
            f"prompt, {max_tokens} for the completion).",
            param=max_tokens_field,
        )
    if reasoning := engine.thinking(thinking):  # and at least one answer token after, room allowing
        params = replace(
            params, reasoning_tokens=reasoning, min_tokens=min(max(params.min_tokens, reasoning + 1), max_tokens)
        )
    if max_tokens != params.max_tokens:
        params = replace(params, max_tokens=max_tokens)
    external = 0
    if (role := getattr(request.app.state, "disagg", None)) is not None:
        params, external = await _disaggregated(role, request, len(ids), params, arrived)
    try:
        return engine.submit(ids, params, lang, received=arrived, external=external)
    except QueueFull as e:
        raise APIError("RESOURCE_EXHAUSTED", str(e), retry_after=e.retry_after) from None
    except Unavailable as e:
        raise APIError("UNAVAILABLE", str(e), retry_after=1) from None


async def _disaggregated(
    role: Role, request: Request, tokens: int, params: SamplingParams, arrived: float
) -> tuple[SamplingParams, int]:
    """A prefill engine's request (one token: the prompt's KV is what it is for), or a decode
    engine's with the prompt tokens whose KV it pulled."""
    offer, source = request.headers.get(KV_TRANSFER), request.headers.get(KV_FROM)
    header = KV_TRANSFER if role.opts.role == "decode" else KV_FROM
    if request.headers.get(header) is not None:
        raise APIError("INVALID_ARGUMENT", f"a {role.opts.role} engine takes no {header}", param=header)
    if offer is not None:
        role.offer(offer, tokens)
        return replace(params, max_tokens=1, min_tokens=0, reasoning_tokens=0), 0
    if source is None:
        return params, 0
    try:
        kv_pull.source(source)
        external, request.state.kv = await role.pull(source, tokens, arrived)
    except ValueError as e:
        raise APIError("INVALID_ARGUMENT", f"{KV_FROM}: {e}", param=KV_FROM) from None
    except KVFailed as e:
        request.state.kv = e.kv
        raise APIError("UNAVAILABLE" if e.status == 503 else "DEADLINE_EXCEEDED", str(e)) from None
    return params, external


async def collect(engine: Engine, seq: Sequence, request: Request) -> tuple[str, str]:
    """A non-stream request's whole answer and thinking; aborted at once if the client goes away."""

    async def watch() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass
        engine.abort(seq)

    watcher = asyncio.create_task(watch())
    text: list[str] = []
    thoughts: list[str] = []
    try:
        async for d in engine.deltas(seq):
            text.append(d.text)
            thoughts.append(d.reasoning)
    finally:
        watcher.cancel()
        engine.abort(seq)
    if seq.finish_reason == "error":
        raise APIError("INTERNAL", "the engine failed while generating")
    return "".join(text), "".join(thoughts)


def cached_tokens(seq: Sequence) -> int:
    """The prompt tokens found in the prefix cache at admission (a whole cached prompt still computes
    its last token)."""
    return min(seq.num_cached_tokens, seq.num_prompt_tokens)


def reasoning_count(seq: Sequence, delivered: int) -> int:
    """Of the `delivered` output tokens, those that were thinking (they come first)."""
    return min(delivered, seq.params.reasoning_tokens)


def stops(value: str | list[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
json_str = encode_basestring  # a str as a JSON string literal: the per-token fast path
