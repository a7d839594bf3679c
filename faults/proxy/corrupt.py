"""An answer's text turned to garbage, as a server gives it that answers 200 after a GPU fault (issue 32):
in one SSE event block, each text field of the known API shapes gets as many punctuation marks as it
had characters, each one other than the character it replaces (so the text always changes), drawn from
the fault's random numbers. The framing stays: the other lines and fields, the line ends, the blank
line that ends the block; the data, re-serialised as one JSON value, takes its last `data` line's
place. Data that is not JSON (`[DONE]`), not UTF-8, or JSON without text passes byte for byte."""

from __future__ import annotations

import json
import random
import re
import string
from collections.abc import Iterator

GARBAGE = string.punctuation
LINE = re.compile(rb"([^\r\n]*)(\r\n|\r|\n)")  # a line and its end (a block ends with one)
DELTA_TEXTS = ("content", "reasoning_content", "reasoning")


def garbage(text: str, rng: random.Random) -> str:
    """As many punctuation marks as `text` has characters, each other than the one it replaces."""
    out = []
    for ch in text:
        skip = GARBAGE.find(ch)
        i = rng.randrange(len(GARBAGE) - (skip >= 0))
        out.append(GARBAGE[i + (0 <= skip <= i)])
    return "".join(out)


def _dicts(value: object) -> list[dict[str, object]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _texts(doc: object) -> Iterator[tuple[dict[str, object], str]]:
    """(object, key) of each place an answer's text may be: OpenAI chat deltas (content, reasoning,
    tool-call arguments), OpenAI completions' `text`, Gemini's parts."""
    if not isinstance(doc, dict):
        return
    for choice in _dicts(doc.get("choices")):
        yield choice, "text"
        if isinstance(delta := choice.get("delta"), dict):
            for key in DELTA_TEXTS:
                yield delta, key
            for call in _dicts(delta.get("tool_calls")):
                if isinstance(function := call.get("function"), dict):
                    yield function, "arguments"
    for candidate in _dicts(doc.get("candidates")):
        if isinstance(content := candidate.get("content"), dict):
            for part in _dicts(content.get("parts")):
                yield part, "text"


def _is_data(line: bytes) -> bool:
    return line.startswith(b"data") and line[4:5] in (b"", b":")


def corrupt(block: bytes, rng: random.Random) -> bytes:
    """`block` (one event, as the Splitter yields it) with its texts replaced by garbage; never raises."""
    if not block.endswith((b"\r", b"\n")):  # not a whole block: leave it be
        return block
    lines = [(m[1], m[2]) for m in LINE.finditer(block)]
    values = [line[6:] if line[5:6] == b" " else line[5:] for line, _ in lines if _is_data(line)]
    try:
        doc = json.loads(b"\n".join(values).decode("utf-8"))
        changed = False
        for obj, key in _texts(doc):
            if isinstance(text := obj.get(key), str) and text:
                obj[key], changed = garbage(text, rng), True
        if not changed:
            return block
        data = json.dumps(doc, separators=(",", ":")).encode()
    except (ValueError, RecursionError):  # not JSON, not UTF-8, too deep, a number past int's digits
        return block
    # The data goes where the last data line was: each line dropped before it is followed by a line
    # that is not blank, so no CR left behind can meet the blank line's LF and end the block as a CRLF.
    last = max(i for i, (line, _) in enumerate(lines) if _is_data(line))
    out: list[bytes] = []
    for i, (line, end) in enumerate(lines):
        if i == last:
            out += [b"data: " if line.startswith(b"data: ") else b"data:", data, end]
        elif not _is_data(line):
            out += [line, end]
    return b"".join(out)
