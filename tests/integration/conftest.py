"""Reference-server fixtures shared by the API tests: module scope, so one server per test file.

A test module sets KEY (its API key) and may read FAST and SMALL_LEN from here.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.procs import Server, serve

FAST = ("--sim-time-scale", "0.2")
SMALL_LEN = 256


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with serve(*FAST) as s:
        yield s


@pytest.fixture(scope="module")
def client(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as c:
        yield c


@pytest.fixture(scope="module")
def guarded(request: pytest.FixtureRequest) -> Iterator[Server]:
    """--api-key (the module's KEY) and a small context window."""
    with serve(*FAST, "--api-key", request.module.KEY, "--max-model-len", str(SMALL_LEN)) as s:
        yield s


@pytest.fixture(scope="module")
def slow() -> Iterator[Server]:
    """Starts slowly (503 meanwhile), then runs one sequence at a time with two waiting at most."""
    with serve("--sim-time-scale", "1", "--startup-delay", "3", "--max-num-seqs", "1",
               "--max-waiting", "2", wait_ready=False) as s:
        yield s
