"""A Hypothesis strategy for SSE streams as servers may write them, shared by the proxy's fuzz tests."""

from __future__ import annotations

import itertools

from hypothesis import strategies as st

LINE_END = st.sampled_from(["\r\n", "\n", "\r"])
FIELD = st.text(st.characters(codec="utf-8", exclude_characters="\r\n"), max_size=12)


@st.composite
def sse_streams(draw: st.DrawFn) -> bytes:
    """Blocks of data lines (an optional id, comments) and comment-only blocks, each line ended by any
    line end; a CR is never followed by a blank line's LF, which would make one CRLF of the two."""
    out = ""
    for _ in range(draw(st.integers(1, 6))):
        lines = [f"data: {draw(FIELD)}" for _ in range(draw(st.integers(0, 3)))]
        if lines and draw(st.booleans()):
            lines.insert(0, f"id: {draw(st.integers(0, 99))}")
        if draw(st.booleans()) or not lines:
            lines.insert(draw(st.integers(0, len(lines))), f": {draw(FIELD)}")
        for line in [*lines, ""]:
            eol = draw(LINE_END)
            if out.endswith("\r") and eol.startswith("\n"):
                eol = "\r"
            out += line + eol
    return out.encode()


def split(stream: bytes, cuts: list[int]) -> list[bytes]:
    """`stream` cut at each of `cuts` (those inside it), in order, no piece empty."""
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(stream)}), len(stream)]
    return [stream[a:b] for a, b in itertools.pairwise(bounds)]
