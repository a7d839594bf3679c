"""SSE event boundaries in a stream that arrives in reads split anywhere: a block ends at a blank
line, a line at CRLF, LF or CR (the SSE spec's three line ends), and a read may end between the CR
and the LF of one CRLF. The pieces come out as the bytes came in, none changed, none lost."""

from __future__ import annotations

import enum
import re
from typing import NamedTuple

LINE_END = re.compile(rb"\r\n|\r|\n")


class Kind(enum.Enum):
    OTHER = "other"  # comments or fields without data: nothing a client dispatches
    EVENT = "event"  # has data: a client dispatches it
    DONE = "done"  # an event whose data is [DONE]
    TAIL = "tail"  # the LF of a CRLF whose CR ended the piece before (it came a read later)


class Piece(NamedTuple):
    data: bytes
    kind: Kind


class Splitter:
    """Feed reads; get the blocks they complete, each up to and including the blank line that ends it
    (blank lines before a block's first line go with that block)."""

    __slots__ = ("block", "cr", "data", "done", "lines", "pos")

    def __init__(self) -> None:
        self.block = b""  # the unfinished block
        self.pos = 0  # where its unfinished line starts
        self.cr = False  # the last byte fed was a CR that ended a line: an LF next is the rest of it
        self.lines = self.data = self.done = False  # the block has a non-blank line, a data field, [DONE]

    def feed(self, chunk: bytes) -> list[Piece]:
        out: list[Piece] = []
        if self.cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
            if self.block:
                self.block += b"\n"
                self.pos += 1
            else:
                out.append(Piece(b"\n", Kind.TAIL))
        self.cr = False
        if not chunk:
            return out
        buf, start, pos = self.block + chunk, 0, self.pos
        for m in LINE_END.finditer(buf, len(self.block)):
            if m.start() > pos:
                self._line(buf[pos : m.start()])
            elif self.lines:  # a blank line ends the block
                out.append(
                    Piece(buf[start : m.end()], Kind.DONE if self.done else Kind.EVENT if self.data else Kind.OTHER)
                )
                start, self.lines, self.data, self.done = m.end(), False, False, False
            pos = m.end()
        self.cr = pos == len(buf) and buf.endswith(b"\r")
        self.block, self.pos = buf[start:], pos - start
        return out

    def _line(self, line: bytes) -> None:
        self.lines = True
        if line.startswith(b"data") and line[4:5] in (b"", b":"):
            value = line[5:]
            self.done = not self.data and (value[1:] if value.startswith(b" ") else value) == b"[DONE]"
            self.data = True

    def finish(self) -> Piece | None:
        """What is left at the end of the stream (an unfinished block), if anything."""
        return Piece(self.block, Kind.OTHER) if self.block else None
