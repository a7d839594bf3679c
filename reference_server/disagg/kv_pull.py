"""The decode engine's side of a KV transfer: pull the prompt's KV cache from the prefill engine's
KV server (`kv_server`'s wire), failing on whatever a real connector fails on: a refused or reset
connection, an unknown transfer, a short read, a KV of another prompt, or no byte for `stall_s`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable

from llmchaos.net import is_loopback
from reference_server.disagg.metrics import KVMetrics


class KVFailure(Exception):
    """The transfer failed; the message says how."""


def source(header: str) -> tuple[str, int, str]:
    """`HOST:PORT/ID` (the router's x-llmchaos-kv-from) as its parts; ValueError when it is none."""
    where, _, transfer_id = header.partition("/")
    host, _, port = where.rpartition(":")
    if not host or not port.isdigit() or not transfer_id or not 0 < int(port) < 65536:
        raise ValueError(f"expected HOST:PORT/ID, got {header!r}")
    if not is_loopback(host):  # an engine of this cluster: a request never sends decode elsewhere
        raise ValueError(f"the KV's host must be a loopback address, got {host!r}")
    return host, int(port), transfer_id


async def pull(header: str, tokens: int, stall_s: float, deadline: float, metrics: KVMetrics) -> None:
    """Receive the KV of a prompt of `tokens` tokens from `header`'s server, each step within
    `stall_s` and all by `deadline` (time.monotonic()), or raise KVFailure."""
    host, port, transfer_id = source(header)
    start = time.monotonic()

    async def within(step: Awaitable[bytes], what: str) -> bytes:
        wait = min(stall_s, deadline - time.monotonic())
        try:
            return await asyncio.wait_for(step, max(0.0, wait))
        except TimeoutError:
            raise KVFailure(f"no byte of KV for {wait:g} s ({what})") from None

    try:
        wait = min(stall_s, deadline - time.monotonic())
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), max(0.0, wait))
    except TimeoutError:
        raise KVFailure(f"no connection to {host}:{port} in {wait:g} s") from None
    except OSError as e:
        raise KVFailure(f"connecting to {host}:{port}: {e.strerror or e}") from None
    try:
        writer.write(f"GET {transfer_id}\n".encode())
        head = (await within(reader.readline(), "before its head")).decode("ascii", "replace").split()
        if head[:1] != ["OK"] or len(head) != 3 or not all(x.isdigit() for x in head[1:]):
            raise KVFailure(" ".join(head) or "the prefill engine closed before the KV's head")
        sent_tokens, size = int(head[1]), int(head[2])
        if sent_tokens != tokens:
            raise KVFailure(f"KV of {sent_tokens} tokens for a prompt of {tokens}")
        got = 0
        while got < size:
            data = await within(reader.read(min(1 << 20, size - got)), f"{got} of {size} bytes in")
            if not data:
                raise KVFailure(f"short read: {got} of {size} bytes")
            got += len(data)
            metrics.sent(len(data))
        metrics.transferred(time.monotonic() - start)
    except OSError as e:
        raise KVFailure(f"{type(e).__name__}: {e.strerror or e}") from None
    except ValueError:  # the reader's limit: a head line of 64 KiB is no KV server's
        raise KVFailure("the KV server's head is no line of the wire") from None
    finally:
        writer.close()
