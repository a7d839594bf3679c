"""OpenAI-compatible `/v1/chat/completions`, `/v1/completions` and `/v1/models`, in vLLM's shapes."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from llmchaos import sse_codec, tokenizer
from reference_server.api.common import (
    APIError,
    admit,
    bearer,
    cached_tokens,
    check_key,
    check_ready,
    collect,
    dumps,
    language,
    parse_body,
    reasoning_count,
    served,
    stops,
)
from reference_server.api.openai_chunks import Chunks
from reference_server.api.tools import Offered, ToolCall, choose
from reference_server.engine import Engine
from reference_server.sequence import SamplingParams, Sequence

SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}

Temperature = Annotated[float, Field(ge=0.0, le=2.0)]
TopP = Annotated[float, Field(gt=0.0, le=1.0)]
Stop = str | Annotated[list[str], Field(max_length=4)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StreamOptions(Strict):
    include_usage: bool = False
    continuous_usage_stats: bool = False


class TextPart(Strict):
    type: Literal["text"]
    text: str


class CalledFunction(Strict):
    name: str
    arguments: str


class ToolCallMessage(Strict):
    """A call an earlier answer made, sent back in the assistant's message."""

    id: str
    type: Literal["function"] = "function"
    function: CalledFunction


class Message(Strict):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCallMessage] | None = None  # an assistant's
    tool_call_id: str | None = None  # a tool's result: the call it answers

    @model_validator(mode="after")
    def _shape(self) -> Message:
        if self.tool_calls is not None and self.role != "assistant":
            raise ValueError("tool_calls: only an assistant message makes them")
        if self.role == "tool" and self.tool_call_id is None:
            raise ValueError("tool_call_id: a tool message answers a call and must name it")
        if self.content is None and not self.tool_calls:
            raise ValueError("content: required, unless an assistant message makes tool_calls")
        return self

    def text(self) -> str:
        content = self.content or ""
        return content if isinstance(content, str) else "".join(p.text for p in content)

    def render(self) -> str:
        """This turn in the sim model's chat template (an assistant's calls as `<tool_call>` lines)."""
        calls = "".join(
            f"<tool_call>{json.dumps({'name': c.function.name, 'arguments': c.function.arguments})}</tool_call>"
            for c in self.tool_calls or ()
        )
        return f"<|{self.role}|>\n{self.text()}{calls}\n"


class FunctionSpec(Strict):
    name: Annotated[str, Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")]
    description: str | None = None
    parameters: dict | None = None
    strict: bool | None = None


class ToolSpec(Strict):
    type: Literal["function"]
    function: FunctionSpec


class NamedFunction(Strict):
    name: str


class NamedChoice(Strict):
    type: Literal["function"]
    function: NamedFunction


class _Sampling(Strict):
    model: str
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: Temperature = 1.0
    top_p: TopP = 1.0
    top_k: Annotated[int, Field(ge=-1)] = -1
    n: Literal[1] = 1
    stop: Stop | None = None
    seed: int | None = None
    user: str | None = None
    metadata: dict[str, str] | None = None
    ignore_eos: bool = False
    min_tokens: Annotated[int, Field(ge=0)] = 0
    thinking_tokens: Annotated[int, Field(ge=0)] | None = None  # llmchaos: think this many tokens first

    @field_validator("stream_options")
    @classmethod
    def _needs_stream(cls, v: StreamOptions | None, info: ValidationInfo) -> StreamOptions | None:
        if v is not None and not info.data.get("stream"):
            raise ValueError("only allowed when stream is true")
        return v

    def params(self, max_tokens: int | None) -> SamplingParams:
        if max_tokens is not None and self.min_tokens > max_tokens:
            raise APIError("INVALID_ARGUMENT", "min_tokens must not exceed max_tokens", "min_tokens")
        return SamplingParams(
            max_tokens=max_tokens or 0,
            temperature=self.temperature,
            top_k=max(self.top_k, 0),
            top_p=self.top_p,
            stop=stops(self.stop),
            seed=self.seed,
            ignore_eos=self.ignore_eos,
            min_tokens=self.min_tokens,
        )


class ChatRequest(_Sampling):
    messages: Annotated[list[Message], Field(min_length=1)]
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    max_completion_tokens: Annotated[int, Field(ge=1)] | None = None
    tools: list[ToolSpec] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedChoice | None = None
    parallel_tool_calls: bool | None = None  # one call per answer either way

    @model_validator(mode="after")
    def _choice_among_tools(self) -> ChatRequest:
        names = [t.function.name for t in self.tools or ()]
        if isinstance(self.tool_choice, NamedChoice) and self.tool_choice.function.name not in names:
            raise ValueError(f"tool_choice: no tool named {self.tool_choice.function.name!r} is offered")
        if self.tool_choice == "required" and not names:
            raise ValueError("tool_choice: required needs tools")
        return self

    def tool_call(self) -> ToolCall | None:
        """The call this request's answer makes (reference_server/api/tools.py), or None for text."""
        offered = [Offered.of(t.function.name, t.function.parameters) for t in self.tools or ()]
        choice = self.tool_choice or "auto"
        forced = choice.function.name if isinstance(choice, NamedChoice) else None
        mode = "required" if isinstance(choice, NamedChoice) else choice
        users = [i for i, m in enumerate(self.messages) if m.role == "user"]
        last = users[-1] if users else -1
        hops = sum(m.role == "tool" for m in self.messages[last + 1 :])
        return choose(offered, mode, forced, self.seed, self.messages[last].text() if users else "", hops)


class CompletionRequest(_Sampling):
    prompt: str | Annotated[list[str], Field(min_length=1, max_length=1)] | Annotated[list[int], Field(min_length=1)]
    max_tokens: Annotated[int, Field(ge=1)] | None = 16

    @field_validator("prompt")
    @classmethod
    def _ids_in_vocabulary(cls, v: str | list) -> str | list:
        if isinstance(v, list) and isinstance(v[0], int):
            size = tokenizer.load().get_vocab_size()
            if (bad := next((t for t in v if not 0 <= t < size), None)) is not None:
                raise ValueError(f"token id {bad} is outside the vocabulary [0, {size})")
        return v


def render_chat(messages: list[Message], tools: list[ToolSpec] | None = None) -> str:
    """The sim model's chat template: the tools offered (as chat templates put them ahead of the
    turns), role-tagged turns, then the assistant's turn."""
    offered = f"<|tools|>\n{json.dumps([t.model_dump(exclude_none=True) for t in tools])}\n" if tools else ""
    return offered + "".join(m.render() for m in messages) + "<|assistant|>\n"


class OpenAIAPI:
    def __init__(self, engine: Engine, api_key: str | None, details: bool = False) -> None:
        self.engine, self.api_key, self.details = engine, api_key, details  # details: cached prompt tokens

    def _auth(self, request: Request) -> None:
        check_ready(self.engine)
        check_key(bearer(request), self.api_key)

    def _thinking(self, req: _Sampling) -> int | None:
        """The thinking the request asks for (its field, else its model's suffix); 404 for another model."""
        known, thinking = served(req.model, self.engine.cfg.model_name)
        if not known:
            raise APIError("NOT_FOUND", f"The model `{req.model}` does not exist.", param="model")
        return thinking if req.thinking_tokens is None else req.thinking_tokens

    async def models(self, request: Request) -> Response:
        check_key(bearer(request), self.api_key)
        name = self.engine.cfg.model_name
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {
                        "id": name,
                        "object": "model",
                        "created": 0,
                        "owned_by": "llmchaos",
                        "root": name,
                        "max_model_len": self.engine.cfg.max_model_len,
                        **getattr(self.engine.executor, "model_card", {}),  # what the torch executor runs
                    }
                ],
            }
        )

    async def chat(self, request: Request) -> Response:
        self._auth(request)
        req = await parse_body(request, ChatRequest)
        thinking = self._thinking(req)
        lang = language(request, (req.metadata or {}).get("lang"), "metadata.lang")
        field = "max_completion_tokens" if req.max_completion_tokens else "max_tokens"
        params = req.params(req.max_completion_tokens or req.max_tokens)
        prompt = render_chat(req.messages, req.tools)
        seq = await admit(self.engine, request, prompt, params, lang, "messages", field, thinking)
        return await self._respond(request, req, seq, chat=True, call=req.tool_call())

    async def completions(self, request: Request) -> Response:
        self._auth(request)
        req = await parse_body(request, CompletionRequest)
        thinking = self._thinking(req)
        lang = language(request, (req.metadata or {}).get("lang"), "metadata.lang")
        prompt = req.prompt[0] if isinstance(req.prompt, list) and isinstance(req.prompt[0], str) else req.prompt
        params = req.params(req.max_tokens)
        seq = await admit(self.engine, request, prompt, params, lang, "prompt", "max_tokens", thinking)
        return await self._respond(request, req, seq, chat=False)

    async def _respond(
        self, request: Request, req: _Sampling, seq: Sequence, chat: bool, call: ToolCall | None = None
    ) -> Response:
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        if req.stream:
            chunks = self._stream(req, seq, rid, chat, call)
            return StreamingResponse(chunks, media_type="text/event-stream", headers=SSE_HEADERS)
        body, thoughts = await collect(self.engine, seq, request)
        reason = seq.finish_reason
        message: dict = {"role": "assistant", "content": body}
        if call is not None:
            function = {"name": call.tool.name, "arguments": call.arguments(body)}
            message |= {"content": None, "tool_calls": [{"id": call.call_id, "type": "function", "function": function}]}
            reason = "tool_calls"
        if seq.params.reasoning_tokens:
            message[self.engine.cfg.reasoning.openai_field] = thoughts
        choice = (
            {"index": 0, "message": message, "logprobs": None, "finish_reason": reason, "stop_reason": seq.stop_reason}
            if chat
            else {
                "index": 0,
                "text": thoughts + body,
                "logprobs": None,
                "finish_reason": reason,
                "stop_reason": seq.stop_reason,
            }
        )
        return JSONResponse(
            {
                "id": rid,
                "object": "chat.completion" if chat else "text_completion",
                "created": int(time.time()),
                "model": req.model,
                "choices": [choice],
                "usage": _usage(seq, len(seq.output_token_ids), self.details),
            }
        )

    async def _stream(
        self, req: _Sampling, seq: Sequence, rid: str, chat: bool, call: ToolCall | None = None
    ) -> AsyncIterator[bytes]:
        opts = req.stream_options or StreamOptions()
        field = self.engine.cfg.reasoning.openai_field
        continuous = opts.include_usage and opts.continuous_usage_stats  # vLLM: the one needs the other
        chunks = Chunks(seq, rid, req.model, chat, continuous, field, self.details, call)
        delivered, started = 0, False  # tokens sent so far (the pacer may hold some the engine made)
        try:
            async for d in self.engine.output(seq):
                if d is None:
                    yield b": keep-alive\n\n"
                    continue
                if d.finish_reason == "error":
                    yield ERROR
                    break
                if not d.num_tokens and d.finish_reason is None:
                    continue
                first, started = not started, True
                if first and chat:  # vLLM's role chunk: with the first token, not when the stream opens
                    yield chunks.role()
                delivered += d.num_tokens
                yield chunks.delta(d, delivered, first)
            if opts.include_usage:
                yield chunks.usage(delivered)
            yield sse_codec.DONE
        finally:
            self.engine.abort(seq)


ERROR = (
    "data: "
    + dumps(
        {"error": {"message": "the engine failed while generating", "type": "server_error", "param": None, "code": 500}}
    )
    + "\n\n"
).encode()


def _usage(seq: Sequence, n: int, details: bool) -> dict:
    usage: dict = {
        "prompt_tokens": seq.num_prompt_tokens,
        "completion_tokens": n,
        "total_tokens": seq.num_prompt_tokens + n,
    }
    if details and (cached := cached_tokens(seq)):
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    if seq.params.reasoning_tokens:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_count(seq, n)}
    return usage
