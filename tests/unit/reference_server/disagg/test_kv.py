"""The KV link's fault states, the wire's sizes and times, and the pull's failures, over loopback
sockets this test opens."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from reference_server.disagg import kv_pull
from reference_server.disagg.kv_server import KVServer, Wire
from reference_server.disagg.link import Link
from reference_server.disagg.metrics import KVMetrics

WIRE = Wire(bytes_per_token=131072, link_gbps=100.0, scale=0.01)


def test_the_wire_sends_the_scaled_bytes_in_the_full_sizes_time():
    assert WIRE.size(1000) == 1310720
    assert WIRE.seconds(1000) == pytest.approx(1000 * 131072 * 8 / 100e9)


def test_the_link_holds_one_fault_and_clears_it():
    link = Link()
    link.set("loss", loss_pct=30)
    assert link.state() == {"action": "loss", "delay_ms": 0.0, "loss_pct": 30}
    link.set("delay", delay_ms=5)
    assert link.state() == {"action": "delay", "delay_ms": 5, "loss_pct": 0.0}
    link.set(None)
    assert link.state()["action"] is None
    with pytest.raises(ValueError, match="action"):
        link.set("jam")


@pytest.mark.parametrize("header", ["nohost/1", "h:0/x", "h:port/x", "h:1/", "h:70000/x"])
def test_a_bad_source_is_refused(header):
    with pytest.raises(ValueError, match="HOST:PORT/ID"):
        kv_pull.source(header)


@pytest.mark.parametrize("host", ["10.0.0.1", "example.com", "0.0.0.0"])
def test_a_source_off_the_loopback_is_refused(host):
    with pytest.raises(ValueError, match="loopback"):
        kv_pull.source(f"{host}:9000/x")
    assert kv_pull.source("127.0.0.1:9000/x") == ("127.0.0.1", 9000, "x")


def run(coro):
    return asyncio.run(coro)


async def served(action: str | None, offer: int | None, tokens: int = 100, stall_s: float = 0.25) -> tuple:
    """A pull of `tokens` from a KV server offering `offer` tokens (None: nothing) under `action`."""
    registry = CollectorRegistry()
    sent, got = KVMetrics(registry, "prefill"), KVMetrics(CollectorRegistry(), "decode")
    server = KVServer(WIRE, sent)
    server.link.set(action, delay_ms=1, loss_pct=50)
    await server.start("127.0.0.1", 0)
    assert server._server is not None
    port = server._server.sockets[0].getsockname()[1]
    if offer is not None:
        server.offer("t1", offer)
    loop = asyncio.get_running_loop()
    try:
        await kv_pull.pull(f"127.0.0.1:{port}/t1", tokens, stall_s, loop.time() + 30, got)
        return None, got.bytes._value.get()
    except kv_pull.KVFailure as e:
        return str(e), got.bytes._value.get()
    finally:
        await server.stop()


def test_a_pull_gets_every_byte_once_and_counts_them():
    assert run(served(None, 100)) == (None, WIRE.size(100))
    assert run(served("delay", 100)) == (None, WIRE.size(100))


def test_a_pull_fails_on_an_unknown_transfer_a_mismatch_and_a_partition():
    assert "no KV for transfer" in run(served(None, None))[0]
    assert run(served(None, 99))[0] == "KV of 99 tokens for a prompt of 100"
    assert "no byte of KV for 0.25 s" in run(served("partition", 100))[0]


def test_a_pull_from_nowhere_is_refused():
    async def nowhere() -> str:
        with pytest.raises(kv_pull.KVFailure) as e:
            await kv_pull.pull(
                "127.0.0.1:1/x",
                1,
                0.25,
                asyncio.get_running_loop().time() + 5,
                KVMetrics(CollectorRegistry(), "decode"),
            )
        return str(e.value)

    assert "connecting to 127.0.0.1:1" in run(nowhere())


def test_a_peer_that_speaks_garbage_is_a_failure_not_a_crash():
    async def garbage_server() -> str:
        async def spew(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(b"x" * 200_000)  # no newline: past the reader's line limit
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(spew, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        metrics, deadline = KVMetrics(CollectorRegistry(), "decode"), asyncio.get_running_loop().time() + 5
        try:
            with pytest.raises(kv_pull.KVFailure) as e:
                await kv_pull.pull(f"127.0.0.1:{port}/x", 1, 1.0, deadline, metrics)
        finally:
            server.close()
        return str(e.value)

    assert "no line of the wire" in run(garbage_server())

    async def garbage_client() -> None:  # the KV server's side: a request line past the limit
        server = KVServer(WIRE, KVMetrics(CollectorRegistry(), "prefill"))
        await server.start("127.0.0.1", 0)
        assert server._server is not None
        port = server._server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET " + b"y" * 200_000)
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed, nothing sent
        writer.close()
        await server.stop()

    run(garbage_client())
