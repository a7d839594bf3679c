"""The OpenAI stream's events byte for byte as vLLM 0.11 writes them, so that a client that times its
first chunk (`vllm bench serve`, GuideLLM, ...) measures the stand-in as it measures vLLM.

vLLM serializes pydantic models (`vllm/entrypoints/openai/protocol.py`): fields in their declared
order, chat with `exclude_unset` and completions with every field. So:
- chat sends its role chunk in the same iteration as the first token (not when the stream opens);
- a chunk goes out for every engine output that carries a token, even one with no text yet;
- `usage` is in each chunk only with `continuous_usage_stats` and `include_usage` both, and in a last
  chunk with no choices with `include_usage`; never `"usage":null` in chat (OpenAI's own API sends it);
- a completion's first chunk carries the prompt's token ids (vLLM 0.10.2 to 0.11.0; vllm#27561);
- a tool call (reference_server/api/tools.py) streams as vLLM's tool parsers stream it: the first
  delta names the function with the call's id, the rest carry its arguments' pieces, and the last
  ends with `finish_reason: tool_calls`.

Written as strings rather than through pydantic: this is the per-token path."""

from __future__ import annotations

import time

from reference_server.api.common import cached_tokens, dumps, json_str, reasoning_count
from reference_server.api.tools import ToolCall
from reference_server.sequence import Delta, Sequence


def usage_info(seq: Sequence, n: int, details: bool, every_field: bool = False) -> str:
    """vLLM's UsageInfo for `n` output tokens (prompt, total, completion, prompt details: its field
    order): the cached prompt tokens with `details` where there were any (vLLM sets them so; a
    completion's chunk writes every field, unset ones as null: `every_field`), then the thinking
    among them as OpenAI counts it, where there was any."""
    p = seq.num_prompt_tokens
    out = f'{{"prompt_tokens":{p},"total_tokens":{p + n},"completion_tokens":{n}'
    if details and (cached := cached_tokens(seq)):
        out += f',"prompt_tokens_details":{{"cached_tokens":{cached}}}'
    elif every_field:
        out += ',"prompt_tokens_details":null'
    if seq.params.reasoning_tokens:
        out += f',"completion_tokens_details":{{"reasoning_tokens":{reasoning_count(seq, n)}}}'
    return out + "}"


class Chunks:
    """One stream's events: the chat's `role` before the first delta's, `delta` for each, `usage`
    after them."""

    def __init__(
        self,
        seq: Sequence,
        rid: str,
        model: str,
        chat: bool,
        continuous: bool,
        reasoning: str,
        details: bool = False,
        call: ToolCall | None = None,
    ) -> None:
        self.seq, self.chat, self.reasoning, self.continuous, self.details = seq, chat, reasoning, continuous, details
        self.call = call
        kind = "chat.completion.chunk" if chat else "text_completion"
        self.head = f'data: {{"id":"{rid}","object":"{kind}","created":{int(time.time())},"model":{dumps(model)},'

    def role(self) -> bytes:
        """The chat's role chunk (prompt_token_ids written as null: vLLM's constructor sets it)."""
        used = f',"usage":{usage_info(self.seq, 0, self.details)}' if self.continuous else ""
        role = '"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null'
        return f'{self.head}"choices":[{{"index":0,{role}}}]{used},"prompt_token_ids":null}}\n\n'.encode()

    def delta(self, d: Delta, delivered: int, first: bool) -> bytes:
        """A chunk for one engine output: `delivered` output tokens so far, this one's among them."""
        seq = self.seq
        if d.finish_reason and self.call is not None:
            end = '"finish_reason":"tool_calls","stop_reason":null'
        elif d.finish_reason:
            stop = dumps(seq.stop_reason) if d.finish_reason == "stop" else "null"
            end = f'"finish_reason":"{d.finish_reason}","stop_reason":{stop}'
        else:
            end = '"finish_reason":null' if self.chat else '"finish_reason":null,"stop_reason":null'
        if self.chat:
            body = f'"delta":{{{self._delta(d, first)}}},"logprobs":null,{end},"token_ids":null'
            used = f',"usage":{usage_info(seq, delivered, self.details)}' if self.continuous else ""
        else:
            ids = f"[{','.join(map(str, seq.prompt_token_ids))}]" if first else "null"
            text = json_str(d.reasoning + d.text)
            body = f'"text":{text},"logprobs":null,{end},"prompt_token_ids":{ids},"token_ids":null'
            used = f',"usage":{usage_info(seq, delivered, self.details, True)}' if self.continuous else ',"usage":null'
        return f'{self.head}"choices":[{{"index":0,{body}}}]{used}}}\n\n'.encode()

    def _delta(self, d: Delta, first: bool) -> str:
        """The delta's message: its answer (or its piece of the tool call), its thinking in the
        profile's field, or both (vLLM's reasoning parser: one delta where the thinking ends and
        the answer begins)."""
        answer = f'"content":{json_str(d.text)}' if self.call is None else self._call(d, first)
        if not d.reasoning:
            return answer
        thought = f'"{self.reasoning}":{json_str(d.reasoning)}'
        return f"{answer},{thought}" if d.text or self.call is not None else thought

    def _call(self, d: Delta, first: bool) -> str:
        """The tool call's piece: its id and name with the first, its arguments' pieces, closed with the last."""
        call = self.call
        assert call is not None
        piece = call.piece(d.text) if call.tool.argument else ""
        if first:
            piece = call.opening() + piece
        if d.finish_reason:
            piece += call.closing()
        if not first:
            return f'"tool_calls":[{{"index":0,"function":{{"arguments":{json_str(piece)}}}}}]'
        fn = f'"name":{dumps(call.tool.name)},"arguments":{json_str(piece)}'
        return f'"tool_calls":[{{"id":"{call.call_id}","type":"function","index":0,"function":{{{fn}}}}}]'

    def usage(self, delivered: int) -> bytes:
        """The usage of the whole answer, in a chunk with no choices (include_usage)."""
        return f'{self.head}"choices":[],"usage":{usage_info(self.seq, delivered, self.details)}}}\n\n'.encode()
