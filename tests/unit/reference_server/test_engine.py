import asyncio

from llmchaos import tokenizer
from reference_server.config import EngineConfig
from reference_server.engine import SEND_CHUNK, Engine, _holdback
from reference_server.executors.sim import SimExecutor
from reference_server.profile import StepModel
from reference_server.sequence import SamplingParams


def test_holdback_keeps_back_a_possible_stop_prefix():
    assert _holdback("hello wor", ("world",)) == 3
    assert _holdback("hello", ("xyz",)) == 0
    assert _holdback("ab", ("abc", "bq")) == 2


def run(
    engine_cfg: EngineConfig, params: SamplingParams, prompt: str = "Hello there", lang: str = "en"
) -> tuple[list[str], str | None, int]:
    async def go():
        engine = Engine(engine_cfg, SimExecutor(StepModel()))
        engine.start()
        engine.state = "ready"
        seq = engine.submit(tokenizer.encode(prompt), params, lang)
        texts, reason = [], None
        async for d in engine.deltas(seq):
            texts.append(d.text)
            reason = d.finish_reason
        await engine.stop()
        return texts, reason, len(seq.output_token_ids)

    return asyncio.run(go())


FREE = EngineConfig()


def test_seeded_requests_repeat_and_differ_by_seed():
    a = "".join(run(FREE, SamplingParams(max_tokens=30, seed=5, ignore_eos=True))[0])
    b = "".join(run(FREE, SamplingParams(max_tokens=30, seed=5, ignore_eos=True))[0])
    c = "".join(run(FREE, SamplingParams(max_tokens=30, seed=6, ignore_eos=True))[0])
    assert a == b
    assert a != c


def test_stop_string_cuts_text_and_is_never_streamed():
    full = "".join(run(FREE, SamplingParams(max_tokens=60, temperature=0, ignore_eos=True))[0])
    stop = full[25:29]
    assert stop.strip()
    assert full.find(stop) == 25
    texts, reason, _ = run(FREE, SamplingParams(max_tokens=60, temperature=0, ignore_eos=True, stop=(stop,)))
    assert "".join(texts) == full[:25]
    assert reason == "stop"
    assert all(stop not in "".join(texts[: i + 1]) for i in range(len(texts)))


def test_max_tokens_and_min_tokens():
    _, reason, n = run(FREE, SamplingParams(max_tokens=17, ignore_eos=True))
    assert (reason, n) == ("length", 17)
    for seed in range(5):
        _, reason, n = run(FREE, SamplingParams(max_tokens=400, min_tokens=40, seed=seed))
        assert n >= 40


def test_output_is_in_the_requested_language():
    zh = "".join(run(FREE, SamplingParams(max_tokens=40, seed=1, ignore_eos=True), lang="zh")[0])
    assert sum("\u4e00" <= ch <= "\u9fff" for ch in zh) > len(zh) / 2


class PoisonedExecutor(SimExecutor):
    """The real sim executor, except that sampling raises for requests with seed 13 (a sampler bug)."""

    def sample(self, seq):
        if seq.params.seed == 13:
            raise ArithmeticError("sampler bug")
        return super().sample(seq)


def test_one_failing_sequence_fails_alone():
    """One request whose sampling raises ends with 'error'; the others in its batch run to the end."""

    async def go() -> dict[int | None, tuple[str | None, int]]:
        engine = Engine(FREE, PoisonedExecutor(StepModel()))
        engine.start()
        engine.state = "ready"
        seqs = [
            engine.submit(tokenizer.encode("Hello there"), SamplingParams(max_tokens=12, seed=s, ignore_eos=True), "en")
            for s in (1, 13, 2, 3)
        ]

        async def drain(seq) -> tuple[str | None, int]:
            reason = None
            async for d in engine.deltas(seq):
                reason = d.finish_reason
            return reason, len(seq.output_token_ids)

        out = await asyncio.gather(*(drain(s) for s in seqs))
        await engine.stop()
        return {s.params.seed: r for s, r in zip(seqs, out, strict=True)}

    got = asyncio.run(go())
    assert got[13] == ("error", 0)
    assert [got[seed] for seed in (1, 2, 3)] == [("length", 12)] * 3


def thoughts_and_answer(params: SamplingParams) -> tuple[str, str, str | None]:
    async def go():
        engine = Engine(FREE, SimExecutor(StepModel()))
        engine.start()
        engine.state = "ready"
        seq = engine.submit(tokenizer.encode("Hello there"), params, "en")
        thoughts, answer, reason = "", "", None
        async for d in engine.deltas(seq):
            assert not (answer and d.reasoning), "thinking after the answer began"
            thoughts, answer, reason = thoughts + d.reasoning, answer + d.text, d.finish_reason
        await engine.stop()
        return thoughts, answer, reason

    return asyncio.run(go())


def test_the_first_tokens_are_thinking_and_stop_strings_apply_to_the_answer_alone():
    thoughts, answer, _ = thoughts_and_answer(
        SamplingParams(max_tokens=40, temperature=0, ignore_eos=True, reasoning_tokens=15)
    )
    assert thoughts.strip()
    assert answer.strip()
    assert thoughts == thoughts.lstrip()
    assert answer == answer.lstrip()
    stop = thoughts[5:9]  # in the thinking: no stop there
    assert stop.strip()
    params = SamplingParams(max_tokens=40, temperature=0, ignore_eos=True, reasoning_tokens=15, stop=(stop,))
    t2, a2, _ = thoughts_and_answer(params)
    assert t2 == thoughts
    assert a2 == answer[: answer.index(stop)] if stop in answer else a2 == answer


def test_a_request_waits_its_frontend_time_and_an_abort_meanwhile_leaves_nothing_behind():
    async def go():
        engine = Engine(FREE, SimExecutor(StepModel(frontend=0.2)))
        engine.start()
        engine.state = "ready"
        seq = engine.submit(tokenizer.encode("Hello"), SamplingParams(max_tokens=2), "en")
        assert seq.ready == seq.arrival + 0.2
        await asyncio.sleep(0)
        assert engine.has_work()
        assert len(engine.scheduler.waiting) == 0  # not yet past the frontend
        engine.abort(seq)
        await asyncio.wait_for(engine.wait_idle(), 5.0)  # the frontend's timer ends its wait
        assert not engine.scheduler.has_work()
        await engine.stop()

    asyncio.run(go())


def test_a_first_token_reaches_its_stream_before_the_running_streams_tokens_of_that_step_are_made():
    """A request's TTFT does not wait behind every running stream's delta: when its reader gets its
    first token, no running sequence has been given its token of the same step yet."""

    async def go() -> tuple[float, list[float | None], int]:
        engine = Engine(FREE, SimExecutor(StepModel()))
        engine.start()
        engine.state = "ready"
        params = SamplingParams(max_tokens=200, ignore_eos=True)
        running = [engine.submit(tokenizer.encode("Hello there"), params, "en") for _ in range(8)]
        readers = [asyncio.create_task(_drain(engine, s)) for s in running]
        while min(len(s.output_token_ids) for s in running) < 3:
            await asyncio.sleep(0)
        new = engine.submit(tokenizer.encode("Hello there"), SamplingParams(max_tokens=2), "en")
        await anext(aiter(engine.deltas(new)))
        seen = [s.last_token_time for s in running]  # when the reader was handed its first token
        assert new.first_token_time is not None
        engine.abort(new)
        for s in running:
            engine.abort(s)
        await asyncio.gather(*readers)
        await engine.stop()
        return new.first_token_time, seen, len(engine.scheduler.running)

    first, seen, left = asyncio.run(go())
    assert all(t is not None and t < first for t in seen)  # their tokens of first's step not made yet
    assert left == 0


def test_a_steps_tokens_go_out_a_few_streams_at_a_time_with_the_loop_running_between():
    """Other work (the server reading its sockets) runs between a step's chunks of sends, so a request
    that comes meanwhile is received then, not after every stream has been sent its token."""

    async def go() -> tuple[int, int]:
        engine = Engine(FREE, SimExecutor(StepModel()))
        engine.start()
        engine.state = "ready"
        params = SamplingParams(max_tokens=200, ignore_eos=True)
        running = [engine.submit(tokenizer.encode("Hello there"), params, "en") for _ in range(3 * SEND_CHUNK)]
        readers = [asyncio.create_task(_drain(engine, s)) for s in running]
        while min(len(s.output_token_ids) for s in running) < 3:
            await asyncio.sleep(0)
        made = len(running[0].output_token_ids)
        while len(running[0].output_token_ids) == made:  # this task runs once per turn of the loop
            await asyncio.sleep(0)
        step = running[0].last_token_time
        given = sum(s.last_token_time == step for s in running)  # of that step's tokens, when this ran
        for s in running:
            engine.abort(s)
        await asyncio.gather(*readers)
        await engine.stop()
        return given, len(running)

    given, streams = asyncio.run(go())
    assert given < streams


async def _drain(engine: Engine, seq) -> None:
    async for _ in engine.deltas(seq):
        pass
