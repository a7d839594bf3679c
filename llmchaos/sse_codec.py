"""Server-sent events codec: encoder and an incremental decoder.

Hand-written because the decoder must be incremental over raw byte chunks (events
split across reads, CRLF, comments, multi-line data, invalid UTF-8) and fast; the
existing packages parse whole lines from an httpx stream and lose read timing.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmchaos.wire import DONE_DATA

DONE = b"data: " + DONE_DATA.encode() + b"\n\n"  # the last event of an OpenAI-style stream


def encode(data: str | bytes, event: str | None = None) -> bytes:
    """One SSE event; multi-line data becomes several `data:` lines."""
    if isinstance(data, str):
        data = data.encode()
    lines = data.split(b"\n")
    head = b"event: " + event.encode() + b"\n" if event else b""
    return head + b"".join(b"data: " + line + b"\n" for line in lines) + b"\n"


def comment(text: str = "") -> bytes:
    return b":" + text.encode() + b"\n\n"


@dataclass(slots=True)
class Event:
    data: str
    event: str = "message"
    id: str | None = None
    valid_utf8: bool = True


class Decoder:
    """Feed byte chunks, get complete events. Handles LF, CRLF and CR line ends."""

    __slots__ = ("_buf", "_data", "_event", "_id", "comments")

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[bytes] = []
        self._event: bytes | None = None
        self._id: bytes | None = None
        self.comments = 0

    def feed(self, chunk: bytes) -> list[Event]:
        buf = self._buf + chunk
        if b"\r" in buf:
            if buf.endswith(b"\r"):  # a CR may be half of a CRLF split across reads
                buf, tail = buf[:-1], b"\r"
            else:
                tail = b""
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        else:
            tail = b""
        lines = buf.split(b"\n")
        self._buf = lines.pop() + tail
        events: list[Event] = []
        for line in lines:
            if not line:
                if self._data or self._event is not None:
                    events.append(self._dispatch())
                continue
            if line[0] == 0x3A:  # ':'
                self.comments += 1
                continue
            name, _, value = line.partition(b":")
            if value[:1] == b" ":
                value = value[1:]
            if name == b"data":
                self._data.append(value)
            elif name == b"event":
                self._event = value
            elif name == b"id":
                self._id = value
        return events

    def pending(self) -> bool:
        """True when bytes of an unfinished event are buffered (a cut stream)."""
        return bool(self._buf or self._data or self._event is not None)

    def _dispatch(self) -> Event:
        raw = b"\n".join(self._data)
        try:
            data, ok = raw.decode("utf-8"), True
        except UnicodeDecodeError:
            data, ok = raw.decode("utf-8", errors="replace"), False
        ev = Event(
            data,
            (self._event or b"message").decode("utf-8", "replace"),
            self._id.decode("utf-8", "replace") if self._id is not None else None,
            ok,
        )
        self._data, self._event, self._id = [], None, None
        return ev
