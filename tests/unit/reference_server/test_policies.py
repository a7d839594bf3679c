from collections import Counter

from reference_server.config import EngineConfig
from reference_server.policies import FCFS, FairQueue, make_policy
from reference_server.sequence import SamplingParams, Sequence


def seq(lang: str, prompt: int = 10, max_tokens: int = 10) -> Sequence:
    return Sequence([1] * prompt, SamplingParams(max_tokens=max_tokens), lang)


def drain(policy, n: int) -> list[Sequence]:
    return [policy.pop() for _ in range(n)]


def test_fcfs_is_arrival_order_and_preempted_go_first():
    q = FCFS()
    a, b, c = seq("en"), seq("de"), seq("fr")
    for s in (a, b, c):
        q.add(s)
    assert q.pop() is a
    q.push_front(a)
    assert drain(q, 3) == [a, b, c]


def test_wfq_gives_a_backlogged_language_no_more_than_its_share():
    q = FairQueue(lambda s: s.lang, {"en": 1.0, "ja": 1.0})
    for _ in range(100):
        q.add(seq("en"))
    for _ in range(20):
        q.add(seq("ja"))
    first = Counter(s.lang for s in drain(q, 40))
    assert first == {"en": 20, "ja": 20}


def test_wfq_shares_follow_weights():
    q = FairQueue(lambda s: s.lang, {"en": 3.0, "zh": 1.0})
    for _ in range(200):
        q.add(seq("en"))
        q.add(seq("zh"))
    first = Counter(s.lang for s in drain(q, 100))
    assert 74 <= first["en"] <= 76


def test_wfq_charges_tokens_not_requests():
    q = FairQueue(lambda s: s.lang, {"en": 1.0, "de": 1.0})
    for _ in range(50):
        q.add(seq("en", prompt=90, max_tokens=10))  # cost 100
        q.add(seq("de", prompt=5, max_tokens=5))  # cost 10
    first = Counter(s.lang for s in drain(q, 33))
    assert first["de"] >= 9 * first["en"]


def test_idle_language_does_not_bank_credit():
    q = FairQueue(lambda s: s.lang, {"en": 1.0, "de": 1.0})
    for _ in range(50):
        q.add(seq("en"))
    drain(q, 40)  # de idle meanwhile
    for _ in range(20):
        q.add(seq("de"))
    first = Counter(s.lang for s in drain(q, 10))
    assert first["en"] >= 4  # de does not get all 10 for having been idle


def test_two_level_fast_queue_weight_and_bulk_min_slice():
    clock = [0.0]
    cfg = EngineConfig(
        policy="two-level", fast_max_prompt_tokens=100, fast_weight=90, bulk_weight=10, bulk_min_slice_s=0.5
    )
    q = make_policy(cfg)
    assert isinstance(q, FairQueue)
    q.clock = lambda: clock[0]
    for _ in range(30000):
        q.add(seq("en", prompt=50, max_tokens=50))  # fast, cost 100
    for _ in range(3000):
        q.add(seq("en", prompt=500, max_tokens=500))  # bulk, cost 1000
    tokens = Counter()
    for _ in range(25000):
        s = q.pop()
        clock[0] += 0.01
        tokens["bulk" if s.num_prompt_tokens > 100 else "fast"] += s.num_prompt_tokens + s.params.max_tokens
    assert 0.08 <= tokens["bulk"] / sum(tokens.values()) <= 0.12  # weights 90/10 in the long run
    # While the bulk slice holds, bulk requests go out back to back.
    clock[0] = 0.0
    q2 = make_policy(cfg)
    q2.clock = lambda: clock[0]
    for _ in range(5):
        q2.add(seq("en", prompt=500, max_tokens=500))
    for _ in range(5):
        q2.add(seq("en", prompt=50, max_tokens=50))
    assert q2.pop().num_prompt_tokens == 500
    assert q2.pop().num_prompt_tokens == 500  # slice held
    clock[0] = 1.0  # slice over: the fast queue's smaller tags win again
    assert q2.pop().num_prompt_tokens == 50


def test_remove_and_len():
    q = FairQueue(lambda s: s.lang, {})
    a, b = seq("en"), seq("de")
    q.add(a)
    q.add(b)
    assert q.remove(a)
    assert not q.remove(a)
    assert len(q) == 1
    assert list(q) == [b]
