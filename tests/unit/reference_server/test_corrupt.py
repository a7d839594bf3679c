"""The admin fault `corrupt` (reference_server/corrupt.py) in the engine, in process on the sim executor:
every token of a request that arrived while it was set shown as the garbage of its position (one in
flight keeps what it had), the model's own tokens, count, EOS and stop strings
kept; the admin endpoint's auth and body checks."""

from __future__ import annotations

import asyncio
import string
import time
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from llmchaos import tokenizer
from reference_server import corrupt
from reference_server.app import create_app
from reference_server.batch import Batch
from reference_server.config import EngineConfig, ServerOptions
from reference_server.engine import Engine
from reference_server.executors import Sampled
from reference_server.executors.sim import SimExecutor
from reference_server.profile import StepModel
from reference_server.sequence import SamplingParams

PIECES = tokenizer.pieces()
GARBAGE = corrupt.garbage_ids(PIECES)


def garbage(first: int, last: int) -> str:
    """The garbage shown at output positions first..last (1: the first token)."""
    return "".join(PIECES[GARBAGE[(n - 1) % len(GARBAGE)]] for n in range(first, last + 1))


class Switching(SimExecutor):
    """The sim, which sets the engine's corrupt fault to `switches[k]` as its k-th step (0: the first, the
    prefill that makes token 1) begins, as the admin API may between two steps."""

    def __init__(self, switches: dict[int, bool]) -> None:
        super().__init__(StepModel())
        self.switches, self.steps = switches, 0
        self.engine: Engine | None = None

    async def execute(self, batch: Batch) -> list[Sampled]:
        if self.steps in self.switches:
            assert self.engine is not None
            self.engine.set_corrupt(self.switches[self.steps])
        self.steps += 1
        return await super().execute(batch)


def run(
    params: SamplingParams, on: bool = False, prompt: str = "Hello there", switches: dict[int, bool] | None = None
) -> tuple[str, str, str | None, list[int]]:
    """(answer text, reasoning text, finish reason, the model's output ids) of one request."""

    async def go() -> tuple[str, str, str | None, list[int]]:
        executor = Switching(switches or {})
        engine = executor.engine = Engine(EngineConfig(), executor)
        engine.set_corrupt(on)
        engine.start()
        engine.state = "ready"
        seq = engine.submit(tokenizer.encode(prompt), params, "en")
        text, thought, reason = "", "", None
        async for d in engine.deltas(seq):
            text, thought, reason = text + d.text, thought + d.reasoning, d.finish_reason
        await engine.stop()
        return text, thought, reason, list(seq.output_token_ids)

    return asyncio.run(go())


GREEDY = SamplingParams(max_tokens=24, temperature=0, seed=3, ignore_eos=True)


def test_the_garbage_is_punctuation_of_the_shipped_tokenizer_and_never_eos():
    assert len(GARBAGE) == len(corrupt.CYCLE)
    assert "".join(PIECES[i] for i in GARBAGE) == corrupt.CYCLE
    assert tokenizer.eos_id() not in GARBAGE
    assert all(PIECES[i] and set(PIECES[i]) <= set(string.punctuation) for i in GARBAGE)
    # another tokenizer, without the cycle's characters: its own punctuation-only tokens, else none
    assert corrupt.garbage_ids(["", "a", " b", "--", "~", "x.", "]"]) == (3, 4, 6)
    assert corrupt.garbage_ids(["", "a", " b"]) == ()


def test_while_set_every_token_is_its_positions_garbage_and_the_model_keeps_its_own():
    text, _, reason, ids = run(GREEDY)
    bad, _, bad_reason, bad_ids = run(GREEDY, on=True)
    assert bad == garbage(1, 24) != text
    assert (bad_reason, bad_ids) == (reason, ids) == ("length", ids)  # the same tokens, count and end
    assert run(GREEDY, on=True)[0] == bad  # deterministic
    other = run(SamplingParams(max_tokens=24, temperature=0.9, seed=11, ignore_eos=True), True, "Tell me more")
    assert other[0] == bad  # prompt-independent
    assert run(GREEDY)[0] == text  # and a new engine is clean


def test_a_request_keeps_what_it_arrived_with_while_the_fault_is_set_or_cleared_in_flight():
    clean, _, _, ids = run(GREEDY)
    # set before the step that makes token 6: the request arrived clean and stays so
    assert run(GREEDY, switches={5: True})[:2] == (clean, "")
    # arrived corrupt, cleared before the step that makes token 13: garbage to its end
    text, _, reason, switched_ids = run(GREEDY, on=True, switches={12: False})
    assert (text, reason, switched_ids) == (garbage(1, 24), "length", ids)


def test_eos_still_ends_the_answer_where_the_model_ends_it():
    for seed in range(40):
        params = SamplingParams(max_tokens=200, temperature=1.0, seed=seed)
        _, _, reason, ids = run(params)
        if reason == "stop":
            break
    else:
        pytest.fail("no seed in 40 ended with EOS")
    bad, _, bad_reason, bad_ids = run(params, on=True)
    assert (bad_reason, bad_ids) == ("stop", ids)
    assert bad == garbage(1, len(ids) - 1)  # the EOS itself shows nothing


def test_stop_strings_are_found_in_the_garbage_and_thinking_is_garbage_too():
    stop = corrupt.CYCLE[5]  # "?": the 6th token's garbage
    text, _, reason, ids = run(SamplingParams(max_tokens=24, temperature=0, ignore_eos=True, stop=(stop,)), on=True)
    assert (text, reason, len(ids)) == (garbage(1, 5), "stop", 6)
    params = SamplingParams(max_tokens=10, temperature=0, ignore_eos=True, reasoning_tokens=4)
    text, thought, _, _ = run(params, on=True)
    assert (thought, text) == (garbage(1, 4), garbage(5, 10))


@pytest.fixture(scope="module")
def admin() -> Iterator[tuple[TestClient, Engine]]:
    """The app on a zero-cost sim engine, admin token `T` (the test client is no loopback peer)."""
    engine = Engine(EngineConfig(), SimExecutor(StepModel()))
    opts = ServerOptions(admin_token="T", admin_allow_remote=True)
    with TestClient(create_app(engine, opts)) as c:
        deadline = time.monotonic() + 30
        while c.get("/healthz").status_code != 200:
            assert time.monotonic() < deadline, "the app never became ready"
            time.sleep(0.01)
        yield c, engine


def test_the_admin_endpoint_sets_reads_and_clears_the_fault(admin):
    c, engine = admin
    url, auth = "/admin/faults/corrupt", {"authorization": "Bearer T"}
    assert c.get(url, headers=auth).json() == {"corrupt": False}
    assert c.put(url, headers=auth).json() == {"corrupt": True}
    assert engine.corrupt
    assert c.get(url, headers=auth).json() == {"corrupt": True}
    body = {"model": "llmchaos-sim-8b", "prompt": "Hi", "max_tokens": 5, "temperature": 0, "ignore_eos": True}
    assert c.post("/v1/completions", json=body).json()["choices"][0]["text"] == garbage(1, 5)
    assert c.put(url, headers=auth, json={}).json() == {"corrupt": True}  # twice: still one fault
    assert c.delete(url, headers=auth).json() == {"corrupt": False}
    assert c.delete(url, headers=auth).json() == {"corrupt": False}  # already clear: fine
    assert c.post("/v1/completions", json=body).json()["choices"][0]["text"] != garbage(1, 5)


def test_the_admin_endpoint_refuses_without_the_token_or_with_a_body_that_says_something(admin):
    c, engine = admin
    url = "/admin/faults/corrupt"
    assert c.put(url).status_code == 401
    assert c.put(url, headers={"authorization": "Bearer wrong"}).status_code == 401
    assert c.get(url).status_code == 401
    r = c.put(url, headers={"authorization": "Bearer T"}, json={"on": True})
    assert r.status_code == 400
    assert "on" in r.json()["error"]["message"]
    assert c.put(url, headers={"authorization": "Bearer T"}, content=b"[]").status_code == 400
    assert not engine.corrupt  # nothing refused took effect


def test_the_admin_endpoint_is_off_without_a_token_and_loopback_only_unless_allowed():
    for opts, why in ((ServerOptions(), "--admin-token"), (ServerOptions(admin_token="T"), "loopback")):
        engine = Engine(EngineConfig(), SimExecutor(StepModel()))
        with TestClient(create_app(engine, opts)) as c:  # "testclient" is no loopback peer
            r = c.put("/admin/faults/corrupt", headers={"authorization": "Bearer T"})
            assert r.status_code == 403
            assert why in r.json()["error"]["message"]
        assert not engine.corrupt
