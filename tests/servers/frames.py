"""What the byte-level ground-truth servers share (those that write their answers by hand, so that
each byte's time is theirs): a request read off a connection's buffer, a whole answer, the head and
the chunks of a chunked SSE stream, and OpenAI chat-completion chunk events."""

from __future__ import annotations

import json
from typing import Any

SSE_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
LAST_CHUNK = b"0\r\n\r\n"
DONE = b"data: [DONE]\n\n"


def request(buf: bytes) -> tuple[bytes, dict[bytes, bytes], bytes, bytes] | None:
    """The first whole request in `buf`: its request line, its headers (lower-case names), its body
    and what follows it; None until all of it has come."""
    head, sep, rest = buf.partition(b"\r\n\r\n")
    if not sep:
        return None
    lines = head.split(b"\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(b":") for line in lines[1:])}
    n = int(headers.get(b"content-length", b"0"))
    if len(rest) < n:
        return None
    return lines[0], headers, rest[:n], rest[n:]


def answer(body: bytes, content_type: bytes = b"application/json") -> bytes:
    """A whole 200 answer."""
    return b"HTTP/1.1 200 OK\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n%s" % (content_type, len(body), body)


def chunk(data: bytes) -> bytes:
    """One chunk of a chunked body."""
    return b"%x\r\n%s\r\n" % (len(data), data)


def event(obj: dict[str, Any]) -> bytes:
    """An SSE data event of `obj` as compact JSON."""
    return b"data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


def content(text: str, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    """An OpenAI chat-completion chunk carrying `text`."""
    choice = {"index": 0, "delta": {"content": text}, "finish_reason": finish}
    return {"object": "chat.completion.chunk", "choices": [choice], **extra}


def usage(completion_tokens: int, prompt_tokens: int | None = None) -> dict[str, Any]:
    """The last chunk of a stream that asked for usage."""
    counts = {"completion_tokens": completion_tokens}
    if prompt_tokens is not None:
        counts |= {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion_tokens}
    return {"object": "chat.completion.chunk", "choices": [], "usage": counts}
