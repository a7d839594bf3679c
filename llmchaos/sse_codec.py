"""Server-sent events codec: encoder and an incremental decoder.

Hand-written because the decoder must be incremental over raw byte chunks (events
split across reads, CRLF, comments, multi-line data, invalid UTF-8) and fast; the
existing packages parse whole lines from an httpx stream and lose read timing.
"""

from __future__ import annotations

from dataclasses import dataclass

DONE_DATA = "[DONE]"  # the data of the event that ends an OpenAI-style stream
DONE = b"data: " + DONE_DATA.encode() + b"\n\n"  # the last event of an OpenAI-style stream
BOM = b"\xef\xbb\xbf"
MAX_FIELD = 8 << 20  # bytes: an SSE line, or an event's data, longer than this is no API's event


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
    id: str | None = None  # the last event ID so far (it carries over to later events); None: never set
    valid_utf8: bool = True


class Decoder:
    """Feed byte chunks, get complete events, by the WHATWG rules for an event stream
    (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation):
    one UTF-8 BOM at the very start is skipped; CRLF, LF and CR each end a line; a line starting
    with ':' is a comment; a blank line dispatches the event if it has data (an `event:` alone is
    not dispatched, a `data:` alone is, with empty data); `id` carries over; other fields are
    ignored. Each line is scanned once, however many reads it spans. A line or an event's data past
    MAX_FIELD stops the decoding, `overflow` saying which (an endless line must not grow it for ever)."""

    __slots__ = (
        "_cr",
        "_data",
        "_data_len",
        "_event",
        "_head",
        "_id",
        "_partial",
        "_partial_len",
        "comments",
        "overflow",
        "trailed",
    )

    def __init__(self) -> None:
        self._head: bytes | None = b""  # the stream's first bytes, until they are known to start no BOM
        self._cr = False  # the last byte fed was a CR: an LF right after it ends no second line
        self._partial: list[bytes] = []  # pieces of the line being received
        self._partial_len = 0
        self._data: list[bytes] = []
        self._data_len = 0
        self.overflow: str | None = None  # why decoding stopped: a line or an event's data past MAX_FIELD
        self._event: bytes | None = None
        self._id: bytes | None = None
        self.comments = 0
        self.trailed = False  # the last chunk fed went on past its last event (a comment, a field, part of a line)

    def feed(self, chunk: bytes) -> list[Event]:
        if self.overflow is not None:
            return []
        if self._head is not None:
            chunk = self._skip_bom(chunk)
        self.trailed = False
        if self._cr and chunk:
            self._cr = False
            if chunk[0] == 0x0A:
                chunk = chunk[1:]
        if not chunk:
            return []
        self._cr = chunk[-1] == 0x0D
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = chunk.split(b"\n")
        tail = lines.pop()
        if not lines:
            self._partial.append(tail)
            self._partial_len += len(tail)
            return self._over("an SSE line", self._partial_len, [])
        if self._partial:
            self._partial.append(lines[0])
            lines[0] = b"".join(self._partial)
            self._partial, self._partial_len = [], 0
        if tail:
            self._partial.append(tail)
            self._partial_len = len(tail)
        events: list[Event] = []
        after = bool(tail)  # bytes after the last event dispatched here
        for line in lines:
            if len(line) > MAX_FIELD:
                return self._over("an SSE line", len(line), events)
            after = True
            if not line:
                if self._data:
                    events.append(self._dispatch())
                    after = bool(tail)
                else:
                    self._event = None
                continue
            if line[0] == 0x3A:  # ':'
                self.comments += 1
                continue
            name, _, value = line.partition(b":")
            if value[:1] == b" ":
                value = value[1:]
            if name == b"data":
                self._data.append(value)
                self._data_len += len(value) + 1
                if self._data_len > MAX_FIELD:
                    return self._over("an event's data", self._data_len, events)
            elif name == b"event":
                self._event = value
            elif name == b"id" and b"\0" not in value:
                self._id = value
        self.trailed = bool(events) and after
        return self._over("an SSE line", self._partial_len, events)

    def _over(self, what: str, size: int, events: list[Event]) -> list[Event]:
        """`events`, and decoding stopped (its buffers let go) when `size` is past MAX_FIELD."""
        if size > MAX_FIELD:
            self.overflow = f"{what} over {MAX_FIELD >> 20} MiB"
            self._partial, self._data, self._partial_len, self._data_len = [], [], 0, 0
        return events

    def _skip_bom(self, chunk: bytes) -> bytes:
        head = self._head + chunk if self._head else chunk
        if len(head) < len(BOM) and BOM.startswith(head):
            self._head = head
            return b""
        self._head = None
        return head[len(BOM) :] if head.startswith(BOM) else head

    def pending(self) -> bool:
        """True when bytes of an unfinished event are buffered (a cut stream)."""
        return bool(self._head or self._partial or self._data or self._event is not None)

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
        self._data, self._data_len, self._event = [], 0, None
        return ev
