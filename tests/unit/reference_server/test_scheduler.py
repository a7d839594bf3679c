from reference_server.config import EngineConfig
from reference_server.scheduler import Scheduler
from reference_server.sequence import SamplingParams, Sequence, Status


def make(**kw) -> Scheduler:
    cfg = EngineConfig(**{"block_size": 4, "num_blocks": 64, "watermark": 0.0, **kw})
    return Scheduler(cfg)


def seq(n: int, max_tokens: int = 8, lang: str = "en", base: int = 1000) -> Sequence:
    return Sequence(list(range(base, base + n)), SamplingParams(max_tokens=max_tokens), lang)


def step(s: Scheduler, token: int = 7) -> list[tuple[Sequence, int]]:
    batch = s.schedule()
    sampling = batch.sampling
    s.commit(batch)
    for q in sampling:
        q.output_token_ids.append(token)
    return batch.items


def test_chunked_prefill_respects_token_budget():
    s = make(max_num_batched_tokens=10)
    a = seq(25)
    s.add(a)
    assert [n for _, n in step(s)] == [10]
    assert [n for _, n in step(s)] == [10]
    assert not a.output_token_ids
    assert [n for _, n in step(s)] == [5]
    assert len(a.output_token_ids) == 1  # prefill done: first token sampled
    assert [n for _, n in step(s)] == [1]  # decode


def test_decodes_go_first_then_new_prefill_gets_the_rest():
    s = make(max_num_batched_tokens=8)
    a, b = seq(4), seq(20)
    s.add(a)
    step(s)
    s.add(b)
    items = step(s)
    assert items == [(a, 1), (b, 7)]


def test_max_num_seqs_caps_the_running_batch():
    s = make(max_num_seqs=2)
    for _ in range(3):
        s.add(seq(4))
    step(s)
    assert len(s.running) == 2
    assert len(s.waiting) == 1


def test_preemption_by_recompute_when_blocks_run_out():
    s = make(num_blocks=4, max_num_batched_tokens=64)  # 16 token slots
    a, b = seq(7, max_tokens=20), seq(7, max_tokens=20, base=2000)  # no shared prefix
    s.add(a)
    s.add(b)
    step(s)  # both prefilled: 2 blocks each, all 4 used
    for _ in range(3):
        step(s)  # a and b now hold 8 + 1 tokens... someone needs a 3rd block
    assert s.num_preemptions >= 1
    victim = b  # the most recently admitted goes first
    assert a.status is Status.RUNNING
    assert victim.status is Status.WAITING
    assert victim.num_computed_tokens == 0
    assert victim.block_table == []
    assert victim.num_preemptions == 1
    assert len(victim.output_token_ids) > 0  # outputs kept, recomputed later
    assert victim.num_uncomputed_tokens == victim.num_tokens


def test_finish_frees_blocks_from_running_and_waiting():
    s = make(max_num_seqs=1)
    a, b = seq(8), seq(8)
    s.add(a)
    s.add(b)
    step(s)
    s.finish(a, "abort")
    s.finish(b, "abort")
    assert s.blocks.usage == 0.0
    assert not s.has_work()


def test_a_preempted_sequence_recomputes_the_kv_it_was_sent():
    from reference_server.config import EngineConfig
    from reference_server.scheduler import Scheduler
    from reference_server.sequence import SamplingParams, Sequence

    sched = Scheduler(EngineConfig(num_blocks=8, block_size=4, watermark=0.0))
    s = Sequence(list(range(10)), SamplingParams(max_tokens=4))
    s.num_external_tokens = 9
    sched.add(s)
    assert sched.schedule().items == [(s, 1)]  # only the last prompt token is computed here
    sched.running.remove(s)  # as schedule() pops its victim
    sched._preempt(s)
    assert (s.num_external_tokens, s.num_computed_tokens) == (0, 0)
    assert sched.schedule().items == [(s, 10)]  # back at the front, to compute in full
