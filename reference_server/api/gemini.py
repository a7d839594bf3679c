"""Gemini-compatible `models/{model}:streamGenerateContent|generateContent|countTokens` (v1beta)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from reference_server.api.common import (
    APIError,
    admit,
    bearer,
    cached_tokens,
    check_key,
    check_ready,
    collect,
    dumps,
    encode,
    language,
    parse_body,
    reasoning_count,
    served,
)
from reference_server.api.tools import Offered, ToolCall, choose
from reference_server.engine import Engine
from reference_server.sequence import SamplingParams, Sequence

FINISH = {"stop": "STOP", "length": "MAX_TOKENS"}


class Strict(BaseModel):
    """Gemini's JSON takes camelCase and snake_case names alike."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)


class FunctionCall(Strict):
    name: str
    args: dict | None = None
    id: str | None = None


class FunctionResponse(Strict):
    name: str
    response: dict
    id: str | None = None


class Part(Strict):
    """One part: text, a call an earlier answer made, or a tool's result."""

    text: str | None = None
    thought: bool | None = None  # a thought of an earlier turn, sent back
    function_call: FunctionCall | None = None
    function_response: FunctionResponse | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Part:
        if sum(x is not None for x in (self.text, self.function_call, self.function_response)) != 1:
            raise ValueError("a part holds exactly one of text, functionCall, functionResponse")
        return self

    def render(self) -> str:
        """This part in the sim model's chat template."""
        if (c := self.function_call) is not None:
            return f"<tool_call>{json.dumps({'name': c.name, 'args': c.args})}</tool_call>"
        if self.function_response is not None:
            return json.dumps(self.function_response.response)
        return self.text or ""


class Content(Strict):
    role: Literal["user", "model", "function"] | None = None  # function: a tool's result (older clients)
    parts: Annotated[list[Part], Field(min_length=1)]


class FunctionDeclaration(Strict):
    name: Annotated[str, Field(pattern=r"^[a-zA-Z_][a-zA-Z0-9_.-]{0,63}$")]
    description: str | None = None
    parameters: dict | None = None


class Tool(Strict):
    function_declarations: Annotated[list[FunctionDeclaration], Field(min_length=1)]


class FunctionCallingConfig(Strict):
    mode: Literal["AUTO", "ANY", "NONE", "VALIDATED"] = "AUTO"
    allowed_function_names: list[str] | None = None


class ToolConfig(Strict):
    function_calling_config: FunctionCallingConfig = FunctionCallingConfig()


class HarmCategory(StrEnum):
    HARASSMENT = "HARM_CATEGORY_HARASSMENT"
    HATE_SPEECH = "HARM_CATEGORY_HATE_SPEECH"
    SEXUALLY_EXPLICIT = "HARM_CATEGORY_SEXUALLY_EXPLICIT"
    DANGEROUS_CONTENT = "HARM_CATEGORY_DANGEROUS_CONTENT"
    CIVIC_INTEGRITY = "HARM_CATEGORY_CIVIC_INTEGRITY"


class HarmBlockThreshold(StrEnum):
    UNSPECIFIED = "HARM_BLOCK_THRESHOLD_UNSPECIFIED"
    LOW_AND_ABOVE = "BLOCK_LOW_AND_ABOVE"
    MEDIUM_AND_ABOVE = "BLOCK_MEDIUM_AND_ABOVE"
    ONLY_HIGH = "BLOCK_ONLY_HIGH"
    NONE = "BLOCK_NONE"
    OFF = "OFF"


class SafetySetting(Strict):
    category: HarmCategory
    threshold: HarmBlockThreshold


class ThinkingConfig(Strict):
    thinking_budget: Annotated[int, Field(ge=-1)] | None = None  # -1: as the profile draws; 0: none
    include_thoughts: bool = False  # stream the thoughts as parts with thought: true


class GenerationConfig(Strict):
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] | None = None
    top_k: Annotated[int, Field(ge=1)] | None = None
    top_p: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
    max_output_tokens: Annotated[int, Field(ge=1)] | None = None
    stop_sequences: Annotated[list[Annotated[str, Field(min_length=1)]], Field(max_length=5)] | None = None
    candidate_count: Literal[1] | None = None
    seed: int | None = None
    response_mime_type: Literal["text/plain"] | None = None
    thinking_config: ThinkingConfig | None = None


class GenerateRequest(Strict):
    model: str | None = None  # v1beta names it inside countTokens' generateContentRequest
    contents: Annotated[list[Content], Field(min_length=1)]
    system_instruction: Content | None = None
    generation_config: GenerationConfig = GenerationConfig()
    safety_settings: list[SafetySetting] | None = None
    labels: dict[str, str] | None = None
    tools: list[Tool] | None = None
    tool_config: ToolConfig | None = None

    @field_validator("safety_settings")
    @classmethod
    def _one_per_category(cls, v: list[SafetySetting] | None) -> list[SafetySetting] | None:
        cats = [s.category for s in v or []]
        if len(cats) != len(set(cats)):
            raise ValueError("each category may appear once")
        return v

    def declarations(self) -> list[FunctionDeclaration]:
        return [d for t in self.tools or () for d in t.function_declarations]

    def prompt(self) -> str:
        turns = ([("system", self.system_instruction)] if self.system_instruction else []) + [
            (c.role or "user", c) for c in self.contents
        ]
        declared = [d.model_dump(exclude_none=True) for d in self.declarations()]
        offered = f"<|tools|>\n{json.dumps(declared)}\n" if declared else ""
        body = "".join(f"<|{role}|>\n{''.join(p.render() for p in c.parts)}\n" for role, c in turns)
        return offered + body + "<|model|>\n"

    def tool_call(self) -> ToolCall | None:
        """The call this request's answer makes (reference_server/api/tools.py), or None for text:
        mode ANY (or VALIDATED) forces one among allowedFunctionNames, AUTO decides, NONE forbids."""
        cfg = (self.tool_config or ToolConfig()).function_calling_config
        allowed = cfg.allowed_function_names
        declared = [d for d in self.declarations() if allowed is None or d.name in allowed]
        offered = [Offered.of(d.name, d.parameters) for d in declared]
        mode = {"AUTO": "auto", "NONE": "none"}.get(cfg.mode, "required")
        said = [any(p.text is not None for p in c.parts) and c.role != "model" for c in self.contents]
        texts = [i for i, s in enumerate(said) if s]
        last = texts[-1] if texts else -1
        hops = sum(p.function_response is not None for c in self.contents[last + 1 :] for p in c.parts)
        user = "".join(p.text or "" for p in self.contents[last].parts) if texts else ""
        return choose(offered, mode, None, self.generation_config.seed, user, hops)

    def params(self) -> SamplingParams:
        g = self.generation_config
        return SamplingParams(
            max_tokens=g.max_output_tokens or 0,
            temperature=1.0 if g.temperature is None else g.temperature,
            top_k=g.top_k or 0,
            top_p=1.0 if g.top_p is None else g.top_p,
            stop=tuple(g.stop_sequences or ()),
            seed=g.seed,
        )


def _shows_thoughts(req: GenerateRequest) -> bool:
    cfg = req.generation_config.thinking_config
    return cfg is not None and cfg.include_thoughts


class CountTokensRequest(Strict):
    contents: list[Content] | None = None
    generate_content_request: GenerateRequest | None = None


class GeminiAPI:
    def __init__(self, engine: Engine, api_key: str | None) -> None:
        self.engine, self.api_key = engine, api_key

    def _check_key(self, request: Request) -> None:
        check_key(
            request.headers.get("x-goog-api-key") or request.query_params.get("key") or bearer(request), self.api_key
        )

    async def models(self, request: Request) -> Response:
        """GET /v1beta/models."""
        self._check_key(request)
        name = self.engine.cfg.model_name
        return JSONResponse(
            {
                "models": [
                    {
                        "name": f"models/{name}",
                        "displayName": name,
                        "inputTokenLimit": self.engine.cfg.max_model_len,
                        "supportedGenerationMethods": ["generateContent", "streamGenerateContent", "countTokens"],
                    }
                ]
            }
        )

    async def dispatch(self, request: Request) -> Response:
        """POST /v1beta/models/{model}:{method}."""
        model, _, method = request.path_params["target"].partition(":")
        handler = {
            "streamGenerateContent": self.stream,
            "generateContent": self.generate,
            "countTokens": self.count_tokens,
        }.get(method)
        if handler is None:
            raise APIError("NOT_FOUND", f"method {method!r} not found")
        check_ready(self.engine)
        self._check_key(request)
        known, thinking = served(model.removeprefix("models/"), self.engine.cfg.model_name)
        if not known:
            raise APIError("NOT_FOUND", f"models/{model} is not found for API version v1beta")
        request.state.thinking = thinking
        return await handler(request)

    async def count_tokens(self, request: Request) -> Response:
        req = await parse_body(request, CountTokensRequest)
        if req.generate_content_request is not None:
            text = req.generate_content_request.prompt()
        elif req.contents:
            text = GenerateRequest(contents=req.contents).prompt()
        else:
            raise APIError("INVALID_ARGUMENT", "contents: field required", param="contents")
        return JSONResponse({"totalTokens": len(await encode(text))})

    async def _admit(self, request: Request) -> tuple[GenerateRequest, Sequence]:
        req = await parse_body(request, GenerateRequest)
        lang = language(request, (req.labels or {}).get("lang"), "labels.lang")
        thinking = request.state.thinking
        if (cfg := req.generation_config.thinking_config) and cfg.thinking_budget is not None:
            thinking = None if cfg.thinking_budget == -1 else cfg.thinking_budget
        field = "generationConfig.maxOutputTokens"
        return req, await admit(self.engine, request, req.prompt(), req.params(), lang, "contents", field, thinking)

    async def generate(self, request: Request) -> Response:
        req, seq = await self._admit(request)
        text, thoughts = await collect(self.engine, seq, request)
        thoughts = thoughts if _shows_thoughts(req) else ""
        n = len(seq.output_token_ids)
        return JSONResponse(self._chunk(seq, text, seq.finish_reason, uuid.uuid4().hex, n, thoughts, req.tool_call()))

    async def stream(self, request: Request) -> Response:
        req, seq = await self._admit(request)
        sse = request.query_params.get("alt") == "sse"
        return StreamingResponse(
            self._stream(seq, sse, _shows_thoughts(req), req.tool_call()),
            media_type="text/event-stream" if sse else "application/json",
            headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
        )

    def _chunk(
        self,
        seq: Sequence,
        text: str,
        reason: str | None,
        rid: str,
        n: int,
        thoughts: str = "",
        call: ToolCall | None = None,
    ) -> dict:
        """A response (chunk) with usage counting the `n` output tokens delivered so far; thinking
        counts in thoughtsTokenCount, not in candidatesTokenCount, as Gemini's own. A tool call is
        one functionCall part, its args whole (Gemini streams a call in one chunk)."""
        parts: list[dict] = [{"text": thoughts, "thought": True}] if thoughts else []
        if call is not None:
            parts.append({"functionCall": {"name": call.tool.name, "args": json.loads(call.arguments(text))}})
        elif text or not parts:
            parts.append({"text": text})
        cand: dict = {"content": {"parts": parts, "role": "model"}, "index": 0}
        usage = {"promptTokenCount": seq.num_prompt_tokens, "totalTokenCount": seq.num_prompt_tokens + n}
        if cached := cached_tokens(seq):  # Gemini's implicit caching: left out when none (proto3's zero)
            usage["cachedContentTokenCount"] = cached
        thinking = reasoning_count(seq, n)
        if thinking:
            usage["thoughtsTokenCount"] = thinking
        if reason is not None:
            cand["finishReason"] = "STOP" if call is not None else FINISH.get(reason, "OTHER")  # a call ends so
            usage["candidatesTokenCount"] = n - thinking
        return {
            "candidates": [cand],
            "usageMetadata": usage,
            "modelVersion": self.engine.cfg.model_name,
            "responseId": rid,
        }

    async def _stream(
        self, seq: Sequence, sse: bool, thoughts: bool, call: ToolCall | None = None
    ) -> AsyncIterator[bytes]:
        """SSE events, or one JSON array written an element at a time: its "[" goes with the first
        element (as Google's), so a client that times its first bytes times the first token. A
        tool call's text is held until its last token, then sent whole in one chunk."""
        rid, first, delivered, held = uuid.uuid4().hex, True, 0, []

        def frame(body: str) -> bytes:
            return (f"data: {body}\r\n\r\n" if sse else ("[" if first else ",\r\n") + body).encode()

        try:
            async for d in self.engine.output(seq):
                if d is None:
                    if sse:
                        yield b": keep-alive\r\n\r\n"
                    continue
                if d.finish_reason == "error":
                    err = dumps(
                        {"error": {"code": 500, "message": "the engine failed while generating", "status": "INTERNAL"}}
                    )
                    yield frame(err)
                    first = False
                    break
                delivered += d.num_tokens
                thought = d.reasoning if thoughts else ""
                text = d.text
                if call is not None:
                    held.append(text)
                    text = "".join(held) if d.finish_reason is not None else ""
                if not text and not thought and d.finish_reason is None:
                    continue
                ending = call if d.finish_reason is not None else None
                yield frame(dumps(self._chunk(seq, text, d.finish_reason, rid, delivered, thought, ending)))
                first = False
            if not sse:
                yield b"[]" if first else b"]"
        finally:
            self.engine.abort(seq)
