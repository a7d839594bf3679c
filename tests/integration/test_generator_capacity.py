"""The generator-capacity benchmark's instrument: the ground-truth server and the aiohttp yardstick,
real processes on loopback, judged the way the benchmark judges them."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator

import httpx
import pytest

from benchmarks import _yardstick, generator_capacity
from benchmarks._common import process
from tests.servers.truth import EVENTS, TTFT_NS


@pytest.fixture(params=["python", "c"])
def server(request: pytest.FixtureRequest) -> Iterator[list[str]]:
    """The ground-truth server's command: the Python one, and the C one the benchmark builds."""
    if request.param == "python":
        yield generator_capacity.PY_SERVER
        return
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler: the benchmark uses the Python server")
    with tempfile.TemporaryDirectory() as build:
        yield generator_capacity.server_command(build)


@pytest.mark.timing
def test_truth_server_logs_every_send_and_never_sends_early(server: list[str]) -> None:
    with process(server, cpu=None, health="/healthz") as (url, _):
        measured = _yardstick.run(url, 3, ["en", "zh"], 1.2)
        truth = httpx.get(url + "/truth", timeout=30).json()
    assert len(measured) >= 3  # three streams, at least one whole request each
    for rid, m in measured.items():
        entry = truth["requests"][rid]
        assert len(entry["sent_ns"]) == len(m.gaps) + 1 == EVENTS
        assert entry["lang"] in ("en", "zh")
        assert entry["sent_ns"] == sorted(entry["sent_ns"])
        assert entry["sent_ns"][0] >= TTFT_NS[0]  # the first event never before its time
    sends = sum(len(e["sent_ns"]) for e in truth["requests"].values())
    assert len(truth["lateness_us"]) == sends  # a lateness for every send
    assert min(truth["lateness_us"]) >= 0  # stamped after the send returned: never early
    level = generator_capacity.judge("aiohttp", 3, measured, truth, warmup=0.2, end=1.2)
    assert set(level.errors) == set(generator_capacity.TOLERANCE)
    assert level.events_s > 0
    assert 0.5 < level.driven < 1.5, level.driven  # back to back: about the load three busy streams carry
    assert all(err == err for err, _ in level.errors.values())  # not NaN: requests were compared
