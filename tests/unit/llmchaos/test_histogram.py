import math
import random

from llmchaos.histogram import HIGHEST, Histogram, HistogramSet, Key


def exact_quantile(values: list[float], pct: float) -> float:
    """Nearest rank, as HDR reports it."""
    s = sorted(values)
    return s[max(0, math.ceil(len(s) * pct / 100) - 1)]


def test_quantiles_within_a_tenth_of_a_percent():
    rng = random.Random(1)
    values = [rng.lognormvariate(-3, 1) for _ in range(20000)]
    h = Histogram("ttft")
    for v in values:
        h.record(v)
    for pct in (50, 90, 99, 99.9):
        truth = exact_quantile(values, pct)
        assert abs(h.quantile(pct) - truth) <= max(1e-6, 0.001 * truth)
    assert abs(h.sum - sum(values)) < 1e-9 * len(values)
    assert h.count == len(values)


def test_merge_equals_one_histogram_of_everything():
    rng = random.Random(2)
    parts = [[rng.uniform(0.001, 2.0) for _ in range(3000)] for _ in range(3)]
    key = Key("t", "en", "openai-chat", "baseline", "e2e")
    merged = HistogramSet()
    for part in parts:
        s = HistogramSet()
        for v in part:
            s.record(key, v)
        merged.merge(HistogramSet.decode(s.encode()))  # over the wire, as from a worker
    whole = Histogram("e2e")
    for v in (v for p in parts for v in p):
        whole.record(v)
    m = merged.get(key)
    assert m is not None
    assert m.count == whole.count
    for pct in (1, 50, 90, 99, 99.9, 100):
        assert m.quantile(pct) == whole.quantile(pct)
    assert abs(m.sum - whole.sum) < 1e-9


def test_cumulative_buckets_count_values_at_or_below_each_edge():
    h = Histogram("ttft")
    for v in (0.0005, 0.001, 0.004, 0.1, 0.1001, 3.0):
        h.record(v)
    assert h.cumulative([0.001, 0.005, 0.1, 1.0, 10.0]) == [2, 3, 4, 5, 6]


def test_tokens_are_recorded_as_counts():
    h = Histogram("output_tokens")
    for n in (1, 16, 128):
        h.record(n)
    assert (h.quantile(50), h.quantile(100), h.sum) == (16, 128, 145)


def test_combined_and_drain():
    s = HistogramSet()
    for phase, v in (("baseline", 0.1), ("jitter", 0.3)):
        s.record(Key("t", "en", "a", phase, "ttft"), v)
    s.record(Key("t", "de", "a", "baseline", "ttft"), 0.2)
    en = s.combined("ttft", lang="en")
    assert en is not None
    assert en.count == 2
    assert s.combined("itl") is None
    drained = s.drain()
    assert len(drained) == 3
    assert len(s) == 0


def test_fast_recording_fills_the_same_buckets_as_hdrh():
    rng = random.Random(4)
    values = [
        rng.choice([rng.uniform(1e-7, 1e-3), rng.lognormvariate(-4, 2), rng.uniform(1, 5000)]) for _ in range(20000)
    ]
    ours = Histogram("e2e")
    ours.record_many(values)
    ref = Histogram("e2e")
    for v in values:
        ref.hdr.record_value(min(max(1, round(v * ref.scale)), HIGHEST))
    assert list(ours.hdr.counts) == list(ref.hdr.counts)
    assert (ours.count, ours.hdr.min_value, ours.hdr.max_value) == (ref.count, ref.hdr.min_value, ref.hdr.max_value)
    assert HistogramSet.decode([{**Key("t", "en", "a", "b", "e2e")._asdict(), **ours.encode()}]).get(
        Key("t", "en", "a", "b", "e2e")
    ).quantile(99) == ref.quantile(99)
