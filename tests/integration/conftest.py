"""Reference-server fixtures shared by the API tests: module scope, so one server per test file.

A test module sets KEY (its API key) and may read FAST, SMALL_LEN and SMALL_BODY from here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.procs import Server, serve

FAST = ("--sim-time-scale", "0.2")
SMALL_LEN = 256
SMALL_BODY = 64 * 1024
TORCH = ("--engine", "torch", "--device", "cpu", "--model", "tiny")  # real forward passes, kept fast
SIM_FLAGS = {"--sim-time-scale", "--sim-jitter"}


@pytest.fixture(scope="module", params=["sim", "torch"])
def engine(request: pytest.FixtureRequest) -> str:
    """The executor behind the module's servers: each API test runs against both."""
    return request.param


def math_bound(where: Path) -> str:
    """A profile file whose steps are all math (a 14 ms decode step, 60 us per prompt token, no
    frontend), so that a locked clock stretches every step in proportion: the clock's own mechanics,
    apart from the default profile's roofline (where a small batch's decode hardly follows the clock)."""
    path = where / "math-bound.yaml"
    path.write_text(
        "name: math-bound\nbase: vllm-llama3-8b-h100\nsource: a test's\n"
        "step: {overhead_us: 0, memory_us: 0, prefill_token_us: 60, decode_token_us: 14000, context_token_us: 0,"
        " wake_us: 0, jitter: 0, frontend_ms: 0, frontend_sigma: 0}\n"
    )
    return str(path)


def engine_args(engine: str, *args: str) -> tuple[str, ...]:
    """`llmchaos serve` flags for `engine`: `args` as sim takes them; for torch, the tiny model on the
    CPU and the same flags less the sim's cost-model ones."""
    if engine == "sim":
        return args
    rest = iter(args)
    return TORCH + tuple(a for a in rest if a not in SIM_FLAGS or next(rest) is None)


def sim_only(engine: str, why: str) -> None:
    if engine != "sim":
        pytest.skip(f"sim only: {why}")


@pytest.fixture(scope="module")
def server(engine: str) -> Iterator[Server]:
    with serve(*engine_args(engine, *FAST)) as s:
        yield s


@pytest.fixture(scope="module")
def client(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as c:
        yield c


@pytest.fixture(scope="module")
def guarded(request: pytest.FixtureRequest, engine: str) -> Iterator[Server]:
    """--api-key (the module's KEY), a small context window and a small request-body limit."""
    limits = ("--max-model-len", str(SMALL_LEN), "--max-body-bytes", str(SMALL_BODY))
    with serve(*engine_args(engine, *FAST, "--api-key", request.module.KEY, *limits)) as s:
        yield s


@pytest.fixture(scope="module")
def slow(engine: str) -> Iterator[Server]:
    """Starts slowly (503 meanwhile), then runs one sequence at a time with two waiting at most."""
    args = ("--sim-time-scale", "1", "--startup-delay", "3", "--max-num-seqs", "1", "--max-waiting", "2")
    with serve(*engine_args(engine, *args), wait_ready=False) as s:
        yield s


def burst(n: int, url: str, body: dict) -> list[tuple[int, dict, bytes]]:
    """`n` streaming POSTs sent at once and held open until all are answered:
    (status, headers, body of a refusal) each, or (-1, {}, the error)."""
    results: list = [None] * n
    go, done = threading.Barrier(n), threading.Event()

    def one(i: int) -> None:
        try:
            with httpx.Client(timeout=30) as c:
                go.wait()
                r = c.send(c.build_request("POST", url, json=body), stream=True)
                try:
                    results[i] = (r.status_code, dict(r.headers), r.read() if r.status_code != 200 else b"")
                    done.wait(30)  # hold admitted streams open until every request is answered
                finally:
                    r.close()  # a client that goes away is aborted by the server
        except Exception as e:  # noqa: BLE001 - shown by the caller's assertions
            results[i] = (-1, {}, repr(e).encode())

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while any(r is None for r in results) and time.monotonic() < deadline:
        time.sleep(0.02)
    done.set()
    for t in threads:
        t.join(30)
    return results


def chunked(raw: bytes, size: int = 16 * 1024) -> Iterator[bytes]:
    """`raw` as an iterator: httpx sends it with chunked transfer encoding, no content-length."""
    return (raw[i : i + size] for i in range(0, len(raw), size))


def pick_stop(text: str) -> str:
    """A stop string that first occurs in the middle of `text` (spanning a token boundary)."""
    for start in range(len(text) // 3, len(text) - 6):
        s = text[start : start + 5]
        if s.strip() == s and " " in s:
            return s
    raise AssertionError(f"no stop candidate in {text!r}")


def cjk_ratio(text: str) -> float:
    chars = [c for c in text if not c.isspace()]
    return sum("\u4e00" <= c <= "\u9fff" or "\u3400" <= c <= "\u4dbf" for c in chars) / len(chars)


def ascii_ratio(text: str) -> float:
    chars = [c for c in text if not c.isspace()]
    return sum(c.isascii() for c in chars) / len(chars)


def wait_ready(server: Server, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while httpx.get(server.url + "/healthz", timeout=5).status_code != 200:
        assert time.monotonic() < deadline, "server never became ready"
        time.sleep(0.05)
