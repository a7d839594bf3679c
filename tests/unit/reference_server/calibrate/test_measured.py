"""A user's runs as load levels (reference_server/calibrate/measured.py): read through the core's run model,
the prompts' length from the server's /metrics scraped before and after."""

import random

import pytest

from llmchaos import run
from llmchaos.errors import UsageError
from llmchaos.histogram import HistogramSet
from llmchaos.run import RequestLine, RequestsWriter, Run, Validity
from reference_server.calibrate import measured

SCRAPE = """# TYPE vllm:prompt_tokens counter
vllm:prompt_tokens_total{{engine="0",model_name="m"}} {prompt}
# TYPE vllm:request_success counter
vllm:request_success_total{{engine="0",finished_reason="length",model_name="m"}} {done}
vllm:request_success_total{{engine="0",finished_reason="stop",model_name="m"}} 0.0
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{{engine="0",model_name="m"}} {hits}
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{{engine="0",model_name="m"}} {prompt}
"""


def scrape(tmp_path, name: str, prompt: float, done: float, hits: float) -> str:
    path = tmp_path / name
    path.write_text(SCRAPE.format(prompt=prompt, done=done, hits=hits))
    return str(path)


def test_the_prompts_are_read_from_two_scrapes(tmp_path):
    before = scrape(tmp_path, "before.prom", 1000, 5, 0)
    after = scrape(tmp_path, "after.prom", 1000 + 100 * 205, 105, 100 * 128)
    assert measured.from_metrics(before, after) == measured.Prompts(205, 128)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("not prometheus {{{", "not Prometheus text"),
        ("# TYPE x counter\nx_total 1\n", "vllm:prompt_tokens_total: not in the scrape"),
    ],
)
def test_a_bad_scrape_is_an_error_naming_the_file(tmp_path, text, says):
    good = scrape(tmp_path, "good.prom", 10, 1, 0)
    bad = tmp_path / "bad.prom"
    bad.write_text(text)
    with pytest.raises(UsageError) as e:
        measured.from_metrics(good, str(bad))
    assert str(e.value).startswith(f"{bad}: "), str(e.value)
    assert says in str(e.value)


def test_no_request_between_the_scrapes_is_an_error(tmp_path):
    a = scrape(tmp_path, "a.prom", 10, 1, 0)
    with pytest.raises(UsageError, match="no requests finished between the two scrapes"):
        measured.from_metrics(a, a)


def write_run(path, n: int = 50, rate: float = 10.0, sample: float = 1.0) -> list[RequestLine]:
    """A results directory of `n` requests at Poisson arrivals, TTFT 30-50 ms, 10 ms per token."""
    rng, t, lines = random.Random(1), 1000.0, []
    for i in range(n):
        t += rng.expovariate(rate)
        ttft, tokens = 0.03 + 0.02 * rng.random(), rng.choice([16, 32, 64])
        lines.append(
            RequestLine(
                request_id=f"r{i}", lang="en", api="openai-chat", target="t", phase="baseline", open_loop=True,
                intended=t, sent=t, schedule_lag=0.0, outcome="ok",
                ttft=ttft, e2e=ttft + 0.01 * (tokens - 1), output_tokens=tokens,
            )
        )  # fmt: skip
    path.mkdir()
    writer = RequestsWriter(path / "requests.jsonl")
    writer.write(line.encode() for line in lines)
    writer.close()
    meta = Run(
        run_id="x", start="2026-01-01T00:00:00+00:00", end="2026-01-01T00:00:05+00:00", duration_s=5,
        command=[], config={}, targets=["t"], api="openai-chat",
        load_profile={}, seeds={}, host={}, generator={}, validity=Validity(valid=True),
        requests={"sample_rate": sample, "written": n},
    )  # fmt: skip
    run.write(path, meta, HistogramSet())
    return lines


def test_a_run_is_a_level_of_its_own_arrivals_and_measurements(tmp_path):
    lines = write_run(tmp_path / "run")
    level = measured.level(str(tmp_path / "run"), measured.Prompts(300, 100), fit=False)
    assert [a.at for a in level.arrivals] == pytest.approx([r.intended - lines[0].intended for r in lines])
    assert {(a.prompt, a.shared) for a in level.arrivals} == {(300, 100)}
    assert [a.output for a in level.arrivals] == [r.output_tokens for r in lines]
    assert level.measured.per_token == pytest.approx(0.01)
    assert 0.03 <= level.measured.ttft_p50 <= 0.05
    assert level.measured.ttft_p90 is None  # a real server's tails are not fitted
    assert (level.per_token, level.fit) == ("tpot_p50", False)


def test_a_sampled_run_or_too_few_requests_is_refused(tmp_path):
    write_run(tmp_path / "sampled", sample=0.5)
    with pytest.raises(UsageError, match=r"requests\.sample_rate: requests\.jsonl holds a sample"):
        measured.level(str(tmp_path / "sampled"), measured.Prompts(10))
    write_run(tmp_path / "short", n=5)
    with pytest.raises(UsageError, match="5 requests ok with a first token; a level needs 20"):
        measured.level(str(tmp_path / "short"), measured.Prompts(10))


@pytest.mark.parametrize("value", ["NaN", "+Inf", "1e300", "-5"])
def test_a_scrape_whose_counter_is_no_count_is_refused_naming_it(tmp_path, value):
    # defect 13 of issue 34: these had been tracebacks
    before, after = tmp_path / "before.prom", tmp_path / "after.prom"
    names = ("prompt_tokens", "request_success", "prefix_cache_hits", "prefix_cache_queries")
    before.write_text("".join(f"vllm:{n}_total 0\n" for n in names))
    after.write_text("".join(f"vllm:{n}_total {value if n == 'prompt_tokens' else 10}\n" for n in names))
    with pytest.raises(UsageError, match=r"vllm:prompt_tokens_total: not a count: "):
        measured.from_metrics(str(before), str(after))


def test_a_run_whose_requests_were_all_due_at_once_is_no_level(tmp_path):
    # it had been a level of 5e11 requests/s
    write_run(tmp_path / "run", rate=1e15)
    with pytest.raises(UsageError, match="every request was due at the same moment"):
        measured.level(str(tmp_path / "run"), measured.Prompts(10))
