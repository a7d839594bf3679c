"""How requests ended on a cluster, as `llmchaos report --md` and `--html` show run.json's `endings`:
per phase (in the order they ran) and language the requests, stranded, failed over and the longest
silence, per replica its requests and failed, per KV way (in words) its requests and how long; and
nothing of it for a run without endings."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks._synthetic_run import write
from tests.inprocess import llmchaos
from tests.unit.dashboards.test_commands import with_rows

KV = {"requests": 0, "silent_max_s": 0.0}  # a KV way's cell, its figures given per row
ENDINGS = [  # a KV partition drill's (phase "slow", the synthetic run's fault window) and a failover's
    {"phase": "slow", "requests": 30, "stranded": 8, "failed_over": 0, "silent_max_s": 2.04, "kv": {
        "failed": {**KV, "requests": 12, "end_p50_s": 0.262, "end_max_s": 0.281, "silent_max_s": 0.27},
        "recomputed": {**KV, "requests": 10, "ttft_p50_s": 0.41, "end_p50_s": 0.52, "end_max_s": 0.6,
                       "silent_max_s": 0.4},
        "timed_out": {**KV, "requests": 8, "end_p50_s": 2.01, "end_max_s": 2.03, "silent_max_s": 2.04},
    }},
    {"phase": "baseline", "requests": 40, "failed_over": 1, "silent_max_s": 0.21,
     "replicas": {"0": {"requests": 22, "failed": 0}, "1": {"requests": 18, "failed": 1}},
     "kv": {"pulled": {**KV, "requests": 40, "ttft_p50_s": 0.12, "end_p50_s": 1.1, "end_max_s": 1.3,
                       "silent_max_s": 0.21}}},
]  # fmt: skip


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run with a fault window `slow` and no endings (no cluster told its requests' ways)."""
    return write(tmp_path_factory.mktemp("runs") / "plain", 2000, seed=3, drift=0.0, fault=(4.0, 7.0))


def test_markdown_shows_each_phase_s_endings_per_replica_and_per_kv_way_in_words(plain, tmp_path, capsys):
    r = llmchaos(capsys, "report", str(with_rows(plain, tmp_path / "drill", "endings", ENDINGS)), "--md")
    assert r.returncode == 0, r.stderr
    block = r.stdout[r.stdout.index("#### Endings on the cluster") :].split("\n#### ")[0].splitlines()
    assert block[2:] == [
        "| phase | lang | requests | stranded | failed over | longest silence |",
        "|---|---|---|---|---|---|",
        "| baseline | en | 40 | 0 | 1 | 210 ms |",  # the order the phases ran
        "| slow | en | 30 | 8 | 0 | 2.04 s |",
        "",
        "**Per replica**",
        "",
        "| phase | lang | replica | requests | failed |",
        "|---|---|---|---|---|",
        "| baseline | en | 0 | 22 | 0 |",
        "| baseline | en | 1 | 18 | 1 |",
        "",
        "**How the decode engine got the prompt's KV cache**",
        "",
        "| phase | lang | KV cache | requests | TTFT p50 | end p50 | end max | longest silence |",
        "|---|---|---|---|---|---|---|---|",
        "| baseline | en | pulled from prefill | 40 | 120 ms | 1.1 s | 1.3 s | 210 ms |",
        "| slow | en | recomputed on decode | 10 | 410 ms | 520 ms | 600 ms | 400 ms |",
        "| slow | en | failed fast | 12 | - | 262 ms | 281 ms | 270 ms |",
        "| slow | en | hung until the KV timeout | 8 | - | 2.01 s | 2.03 s | 2.04 s |",
        "",
        "_stranded: no byte for the stall limit before any content, then no answer; failed over: the router "
        "sent it to another replica at least once; failed: not ok; times from the request's intended start; "
        "silence: the longest wait with no byte from the server_",
    ]


def test_html_shows_the_same_endings_their_names_aligned_left(plain, tmp_path, capsys):
    page = tmp_path / "r.html"
    run_dir = with_rows(plain, tmp_path / "drill", "endings", ENDINGS)
    assert llmchaos(capsys, "report", str(run_dir), "--html", str(page)).returncode == 0
    html = page.read_text()
    section = html[html.index("<h2>Endings on the cluster</h2>") :]
    assert section.index("<h3>Per replica</h3>") < section.index("<h3>How the decode engine got the prompt&#x27;s")
    assert "<tr><td>baseline</td><td>en</td><td>40</td><td>0</td><td>1</td><td>210 ms</td></tr>" in section
    assert '<td>slow</td><td>en</td><td class="label">hung until the KV timeout</td><td>8</td><td>-</td>' in section
    assert '<td>baseline</td><td>en</td><td class="label">1</td><td>18</td><td>1</td>' in section
    assert html.index("Endings on the cluster") < html.index("</main>")


def test_a_run_without_endings_shows_none_in_either_form(plain, tmp_path, capsys):
    page = tmp_path / "r.html"
    md = llmchaos(capsys, "report", str(plain), "--md", "--html", str(page))
    assert md.returncode == 0, md.stderr
    for out in (md.stdout, page.read_text()):
        assert not [word for word in ("Endings", "stranded", "KV cache", "replica") if word in out]
