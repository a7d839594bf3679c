"""corrupt_ratio (issue 32, a 200 with garbage): each API shape's text replaced by as many punctuation
marks, the rest of the JSON and the block's framing kept, anything else byte for byte; and in a stream
through Misbehave (over a fake Body), the fraction of events corrupted drawn from the fault's seed."""

import asyncio
import copy
import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from faults.proxy.corrupt import GARBAGE, corrupt, garbage
from faults.proxy.events import Kind, Splitter
from faults.proxy.fault import SSEFault
from faults.proxy.misbehave import Misbehave
from llmchaos.sse_codec import Decoder
from tests.sse_streams import split, sse_streams

CHAT = {
    "id": "chatcmpl-1",
    "object": "chat.completion.chunk",
    "choices": [{"index": 0, "delta": {"content": " caches"}, "logprobs": None, "finish_reason": None}],
}
SHAPES = {
    "chat": (CHAT, [("choices", 0, "delta", "content")]),
    "reasoning": (
        {"choices": [{"index": 0, "delta": {"reasoning_content": "Let me think.", "reasoning": "Hm"}}]},
        [("choices", 0, "delta", "reasoning_content"), ("choices", 0, "delta", "reasoning")],
    ),
    "tool call": (
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather"}},
                            {"index": 1, "function": {"arguments": '{"city": "Paris"}'}},
                        ]
                    },
                }
            ]
        },
        [("choices", 0, "delta", "tool_calls", 1, "function", "arguments")],
    ),
    "completions": (
        {"id": "cmpl-1", "object": "text_completion", "choices": [{"index": 0, "text": "Über 🚀", "logprobs": None}]},
        [("choices", 0, "text")],
    ),
    "n=2": (
        {"choices": [{"index": 0, "delta": {"content": "a"}}, {"index": 1, "delta": {"content": "bc"}}]},
        [("choices", 0, "delta", "content"), ("choices", 1, "delta", "content")],
    ),
    "gemini": (
        {
            "candidates": [{"index": 0, "content": {"role": "model", "parts": [{"text": "Hi"}, {"text": " you"}]}}],
            "usageMetadata": {"promptTokenCount": 4},
        },
        [("candidates", 0, "content", "parts", 0, "text"), ("candidates", 0, "content", "parts", 1, "text")],
    ),
}


def at(doc: object, path: tuple) -> object:
    for key in path:
        doc = doc[key]  # type: ignore[index]
    return doc


def data(block: bytes) -> dict:
    (event,) = Decoder().feed(block)
    return json.loads(event.data)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_shape_gets_garbage_of_the_same_length_and_the_rest_kept(shape):
    doc, paths = SHAPES[shape]
    got = data(corrupt(b"data: " + json.dumps(doc).encode() + b"\n\n", random.Random(1)))
    expected = copy.deepcopy(doc)
    for path in paths:
        text, new = at(doc, path), at(got, path)
        assert isinstance(new, str)
        assert len(new) == len(text)
        assert set(new) <= set(GARBAGE)
        assert all(a != b for a, b in zip(new, text, strict=True))  # every character changed
        at(expected, path[:-1])[path[-1]] = new  # type: ignore[index]
    assert got == expected


def test_the_garbage_is_drawn_from_the_seed():
    assert garbage("hello, world", random.Random(5)) == garbage("hello, world", random.Random(5))
    assert garbage("hello, world", random.Random(5)) != garbage("hello, world", random.Random(6))
    assert garbage("", random.Random(5)) == ""
    assert all(garbage(".", random.Random(seed)) != "." for seed in range(200))


J = b'{"choices":[{"index":0,"delta":{"content":"hi"}}]}'


def corrupted_data() -> bytes:
    """What J becomes under a Random(0): the same draws corrupt makes."""
    doc = json.loads(J)
    doc["choices"][0]["delta"]["content"] = garbage("hi", random.Random(0))
    return json.dumps(doc, separators=(",", ":")).encode()


FRAMING = {
    "LF": (b"data: %s\n\n", b"data: %s\n\n"),
    "CRLF": (b"data: %s\r\n\r\n", b"data: %s\r\n\r\n"),
    "CR": (b"data: %s\r\r", b"data: %s\r\r"),
    "a CR whose LF comes a read later": (b"data: %s\r\n\r", b"data: %s\r\n\r"),
    "no space after the colon": (b"data:%s\n\n", b"data:%s\n\n"),
    "comment and fields": (
        b": keep-alive\r\nevent: message\r\nid: 7\r\ndata: %s\r\nretry: 10\r\n\r\n",
        b": keep-alive\r\nevent: message\r\nid: 7\r\ndata: %s\r\nretry: 10\r\n\r\n",
    ),
    "blank lines before the block": (b"\n\r\ndata: %s\n\n", b"\n\r\ndata: %s\n\n"),
}


@pytest.mark.parametrize("case", sorted(FRAMING))
def test_the_framing_is_kept(case):
    block, expected = FRAMING[case]
    assert corrupt(block % J, random.Random(0)) == expected % corrupted_data()


MULTI_LINE = [
    (b'data: {"choices":[{"index":0,\ndata: "delta":{"content":"hi"}}]}\n\n', b"data: %s\n\n"),
    (
        b'data: {"choices":[{"index":0,\r: between\rdata: "delta":{"content":"hi"}}]}\r\n\r\n',
        b": between\rdata: %s\r\n\r\n",
    ),
    # Had the data gone where the first line was, its CR and the blank line's LF would be one CRLF.
    (b'data: {"choices":[{"index":0,"delta":\rdata: {"content":"hi"}}]}\n\n', b"data: %s\n\n"),
    (b'data\ndata:{"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n', b"data:%s\n\n"),
]


@pytest.mark.parametrize(("block", "expected"), MULTI_LINE)
def test_multi_line_data_becomes_one_line_where_the_last_was(block, expected):
    out = corrupt(block, random.Random(0))
    assert out == expected % corrupted_data()
    assert len(Decoder().feed(out)) == 1


@pytest.mark.parametrize(
    "block",
    [
        b"data: [DONE]\n\n",
        b"data: not json\r\n\r\n",
        b": only a comment\n\n",
        b"event: ping\n\n",
        b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n',  # no text
        b'data: {"choices":[{"index":0,"delta":{"content":null},"finish_reason":"stop"}]}\n\n',
        b'data: {"usage": {"total_tokens": 9}, "choices": []}\n\n',
        b'data: {"choices":[{"delta":{"content":"\xff"}}]}\n\n',  # not UTF-8
        b"data: " + J,  # no line end: not a whole block
    ],
)
def test_what_has_no_text_passes_byte_for_byte(block):
    rng = random.Random(0)
    state = rng.getstate()
    assert corrupt(block, rng) == block
    assert rng.getstate() == state  # nothing drawn


@pytest.mark.parametrize(
    "block",
    [
        b"data: " + b"[" * 100_000 + b"\n\n",
        b"data: " + b'{"choices":' * 5000 + b"1" + b"}" * 5000 + b"\n\n",
        b'data: {"choices":{"0":{"delta":{"content":"hi"}}}}\n\n',  # choices not a list
        b'data: {"choices":[1,"hi",null,[{"text":"hi"}]]}\n\n',
        b'data: {"choices":[{"text":5,"delta":{"content":["hi"],"reasoning":{"x":"y"}}}]}\n\n',
        b'data: {"choices":[{"delta":"hi"}],"candidates":"hi"}\n\n',
        b'data: {"choices":[{"delta":{"tool_calls":{"function":{"arguments":"{}"}}}}]}\n\n',
        b'data: {"choices":[{"delta":{"tool_calls":[{"function":"x"},7]}}]}\n\n',
        b'data: {"candidates":[{"content":{"parts":"hi"}},{"content":[{"text":"hi"}]},{"content":{"parts":[3]}}]}\n\n',
        b"data: " + b"1" * 5000 + b"\n\n",  # past int's digits limit
        b'data: ["hi", {"choices": [{"text": "hi"}]}]\n\n',
        b'data: "hi"\n\n',
    ],
    ids=lambda b: repr(b[:40]),
)
def test_hostile_json_passes_unchanged_without_raising(block):
    assert corrupt(block, random.Random(0)) == block


KEYS = st.sampled_from(["choices", "delta", "content", "reasoning", "text", "tool_calls", "function", "arguments"])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5) | st.sampled_from(["", "hi"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS | st.sampled_from(["candidates", "parts"]), inner),
    max_leaves=12,
)


def lengths(doc: object) -> object:
    """`doc` with each string a number: its length (what corrupt keeps)."""
    if isinstance(doc, str):
        return len(doc)
    if isinstance(doc, list):
        return [lengths(v) for v in doc]
    if isinstance(doc, dict):
        return {k: lengths(v) for k, v in doc.items()}
    return doc


@pytest.mark.fuzz
@given(doc=JSON, eol=st.sampled_from([b"\n", b"\r", b"\r\n"]), seed=st.integers(0, 2**32))
def test_any_json_keeps_its_shape_and_string_lengths(doc, eol, seed):
    block = b"data: " + json.dumps(doc).encode() + eol * 2
    out = corrupt(block, random.Random(seed))
    (event,) = Decoder().feed(out)
    assert lengths(json.loads(event.data)) == lengths(doc)
    assert out.endswith(eol * 2)


@pytest.mark.fuzz
@given(stream=sse_streams(), seed=st.integers(0, 2**32))
def test_any_stream_keeps_its_events_and_never_raises(stream, seed):
    blocks = Splitter().feed(stream)
    out = b"".join(corrupt(p.data, random.Random(seed)) if p.kind is Kind.EVENT else p.data for p in blocks)
    assert len(Decoder().feed(out)) == len(Decoder().feed(b"".join(p.data for p in blocks)))


# In a stream: Misbehave over a fake Body.


class Body:
    def __init__(self) -> None:
        self.data, self.ended = b"", False

    def write(self, data: bytes) -> None:
        self.data += data

    def end(self) -> None:
        self.ended = True

    def abort(self) -> None:
        raise AssertionError("aborted")

    def cut_upstream(self) -> None:
        raise AssertionError("cut")

    def throttle(self, on: bool) -> None:
        pass


def relay(reads: list[bytes], fault: SSEFault, rng: random.Random | None = None) -> bytes:
    async def run() -> bytes:
        body = Body()
        m = Misbehave(fault, rng or random.Random(fault.seed), body)
        for read in reads:
            m.feed(read)
        m.finish(complete=True)
        assert await m.task
        assert body.ended
        return body.data

    return asyncio.run(run())


def chat_stream(n: int, eol: bytes = b"\n") -> bytes:
    role = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
    events = [role] + [{"choices": [{"index": 0, "delta": {"content": f" word{i}"}}]} for i in range(n)]
    return b"".join(b"data: " + json.dumps(e).encode() + eol * 2 for e in events) + b"data: [DONE]" + eol * 2


def texts(stream: bytes) -> list[str]:
    events = Decoder().feed(stream)
    assert events[-1].data == "[DONE]"
    return [json.loads(e.data)["choices"][0]["delta"]["content"] for e in events[:-1]]


def test_a_ratio_of_0_or_1_is_exact_and_0_5_is_drawn_from_the_seed():
    stream = chat_stream(200)
    upstream = texts(stream)
    rng = random.Random(0)
    state = rng.getstate()
    assert relay([stream], SSEFault(), rng) == stream
    assert rng.getstate() == state  # no draw at 0: the other fields' draws are as they were
    every = texts(relay([stream], SSEFault(corrupt_ratio=1.0)))
    assert every[0] == ""  # the role chunk's empty content stays empty
    assert all(a != b and len(a) == len(b) for a, b in zip(every[1:], upstream[1:], strict=True))
    half = relay([stream], SSEFault(corrupt_ratio=0.5, seed=3))
    changed = sum(a != b for a, b in zip(texts(half), upstream, strict=True))
    assert 70 <= changed <= 130
    assert relay([stream], SSEFault(corrupt_ratio=0.5, seed=3)) == half
    assert relay([stream], SSEFault(corrupt_ratio=0.5, seed=4)) != half


def test_a_crlf_split_across_reads_still_ends_each_event():
    stream = chat_stream(5, b"\r\n")
    reads = split(stream, [i + 1 for i in range(len(stream)) if stream[i : i + 2] == b"\r\n"])  # every CR | LF
    out = relay(reads, SSEFault(corrupt_ratio=1.0))
    assert len(texts(out)) == 6
    assert out.count(b"\r\n\r\n") == 7
    assert b"\n" not in out.replace(b"\r\n", b"")  # no LF without its CR
    some = relay(reads, SSEFault(corrupt_ratio=1.0, drop_ratio=0.5, seed=1))  # a dropped event's LF goes with it
    assert some.count(b"\r\n\r\n") == len(texts(some)) + 1 < 7
    assert b"\n" not in some.replace(b"\r\n", b"")


def test_drops_and_corruption_draw_from_one_seed():
    stream = chat_stream(50)
    fault = SSEFault(drop_ratio=0.3, corrupt_ratio=0.3, seed=9)
    out = relay([stream], fault)
    assert relay([stream], SSEFault(drop_ratio=0.3, corrupt_ratio=0.3, seed=9)) == out
    kept = texts(out)
    assert 0 < len(kept) < 51
    assert any(t.startswith(" word") for t in kept)
    assert any(t and not t.startswith(" word") for t in kept)
