"""A replayed request as sent: the recorded body (or, for a trace, a prompt of the recorded size),
with the target's model, streaming on, the recorded output length asked for where the log has one,
and the language in a header (and the body, with --lang-in-body); the adapter of its API builds it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from loadtests.adapters import Adapter, Ask, Call
from loadtests.logs import sized_prompts
from loadtests.logs.log_record import LogRecord
from loadtests.replay.settings import Carried


def asking(o: Carried) -> Ask:
    """What every replayed request asks, from the replay's carried options (`max_tokens`: for a trace
    line without an output length; `force_output`: exactly the recorded length)."""
    return Ask(
        o.model,
        "",
        max_tokens=o.max_tokens,
        stream=not o.no_stream,
        lang_in_body=o.lang_in_body,
        api_key=o.api_key,
        force_output=o.force_output_length,
    )


def build(
    rec: LogRecord, lang: str, adapter: Adapter, loop: int, ask: Ask, pause: Callable[[], None] = lambda: None
) -> Call:
    """The call for `rec` in its `loop`-th pass over the log (its `max_tokens` what it asks for; None:
    the recorded body asks for none, the target decides); `pause` is called between the parts of a
    long prompt (the dispatcher lets the event loop run)."""
    if rec.body is not None:
        want = rec.output_tokens if ask.force_output else None
        return adapter.patch(rec.body, dataclasses.replace(ask, lang=lang, max_tokens=_at_least_one(want)))
    text = []
    for part in sized_prompts.parts(lang, rec.input_tokens or 1, f"{loop}:{rec.line}", rec.hash_ids, rec.block_tokens):
        text.append(part)
        pause()
    want = rec.output_tokens if rec.output_tokens is not None else ask.max_tokens
    return adapter.call(dataclasses.replace(ask, lang=lang, prompt="".join(text), max_tokens=_at_least_one(want)))


def _at_least_one(n: int | None) -> int | None:
    return None if n is None else max(1, n)
