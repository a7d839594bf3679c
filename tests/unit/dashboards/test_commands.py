"""`llmchaos compare` and `llmchaos regress` as a user runs them, on results directories written
through the core's run model (benchmarks/_synthetic_run): exit 0 no worse, 1 worse, 2 bad input in
one line; every output format read back by its own reader (JSON, JUnit XML, Markdown, HTML)."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from benchmarks._synthetic_run import write
from tests.inprocess import llmchaos

N = 6000  # requests per run: 30 s at 200/s


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("runs")
    out = {
        "a": write(d / "a", N, seed=1, drift=0.0),
        "a2": write(d / "a2", N, seed=2, drift=0.0),
        "b": write(d / "b", N, seed=3, drift=0.0, slowdown=1.2),
        "b2": write(d / "b2", N, seed=4, drift=0.0, slowdown=1.2),
        "fr": write(d / "fr", 2000, seed=5, langs=("fr",)),
    }
    write(d / "replay" / "a", N, seed=6, drift=0.0)
    write(d / "replay" / "b", N, seed=7, drift=0.0, slowdown=1.2)
    out["replay"] = d / "replay"
    return out


def test_a_and_a_no_cell_worse_exit_0(runs, tmp_path, capsys):
    r = llmchaos(capsys, "compare", str(runs["a"]), str(runs["a2"]), "--json", "--junit", str(tmp_path / "j.xml"))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "no worse"
    assert not [c for c in doc["cells"] if c["verdict"] == "worse"]
    assert {c["lang"] for c in doc["cells"]} == {"en", "de", "ja"}
    assert "Holm" in doc["method"]["correction"]
    suite = ET.parse(tmp_path / "j.xml").getroot()
    assert int(suite.get("tests", "0")) == sum(c["gated"] for c in doc["cells"]) > 0
    assert suite.get("failures") == "0"


def test_a_slower_b_is_worse_exit_1_in_every_format(runs, tmp_path, capsys):
    junit, html = tmp_path / "j.xml", tmp_path / "r.html"
    r = llmchaos(capsys, "compare", str(runs["a"]), str(runs["b"]), "--md", "--junit", str(junit), "--html", str(html))
    assert r.returncode == 1, r.stderr
    assert r.stdout.startswith("### llmchaos: WORSE: B is worse than A in ")
    assert "| 🔴 worse | de ITL p50 (baseline) |" in r.stdout
    failed = [c for c in ET.parse(junit).getroot().iter("testcase") if c.find("failure") is not None]
    names = {f"{c.get('classname')}.{c.get('name')}" for c in failed}
    assert {"llmchaos.de.itl.baseline.p50", "llmchaos.en.ttft.baseline.p50"} <= names
    page = html.read_text()
    assert page.index('id="verdict"') < page.index("<svg")  # the verdict comes first
    assert "WORSE: B is worse than A" in page
    assert page.count("<svg") >= 10
    doc = json.loads(llmchaos(capsys, "compare", str(runs["a"]), str(runs["b"]), "--json").stdout)
    itl = next(c for c in doc["cells"] if (c["lang"], c["metric"], c["stat"]) == ("en", "itl", "p50"))
    assert itl["verdict"] == "worse"
    assert 0.15 < itl["rel_ci"][0] < itl["rel"] < itl["rel_ci"][1] < 0.25
    assert itl["mde_rel"] < 0.05


def test_the_terminal_table_puts_worse_cells_first_and_colours_only_when_asked(runs, capsys):
    plain = llmchaos(capsys, "compare", str(runs["a"]), str(runs["b"]))
    coloured = llmchaos(capsys, "compare", str(runs["a"]), str(runs["b"]), "--color")
    assert "\033[" not in plain.stdout  # not a terminal
    assert "\033[31;1mworse" in coloured.stdout
    verdicts = [line.split()[0] for line in plain.stdout.splitlines()[5:] if line.split()[:1] in (["worse"], ["no"])]
    assert verdicts.index("no") > verdicts.index("worse")
    assert "no" not in verdicts[: verdicts.count("worse")]


def test_repetitions_are_compared_as_runs(runs, capsys):
    r = llmchaos(capsys, "compare", "--a", f"{runs['a']},{runs['a2']}", "--b", f"{runs['b']},{runs['b2']}", "--json")
    assert r.returncode == 1
    cells = json.loads(r.stdout)["cells"]
    assert {c["method"] for c in cells} == {"runs as units (Welch t)"}
    assert any(c["verdict"] == "worse" and c["metric"] == "itl" for c in cells)


def test_a_replay_directory_is_its_two_sides(runs, capsys):
    r = llmchaos(capsys, "compare", str(runs["replay"]), "--json")
    assert r.returncode == 1
    assert json.loads(r.stdout)["a"] == [str(runs["replay"] / "a")]


def test_regress_gates_the_registry_slos_by_default_and_a_rules_file_loosens_them(runs, tmp_path, capsys):
    r = llmchaos(capsys, "regress", "--baseline", str(runs["a"]), "--current", str(runs["b"]), "--json")
    assert r.returncode == 1
    gated = {(c["metric"], c["stat"]) for c in json.loads(r.stdout)["cells"] if c["gated"]}
    assert gated == {("ttft", p) for p in ("p50", "p90", "p95", "p99")} | {
        ("itl", p) for p in ("p50", "p90", "p95", "p99")
    } | {("error_rate", "rate")}
    rules = tmp_path / "rules.yaml"
    rules.write_text("defaults: {increase_pct: 30}\n")  # a 20 % slowdown is allowed
    r = llmchaos(capsys, "regress", "--baseline", str(runs["a"]), "--current", str(runs["b"]), "--rules", str(rules))
    assert r.returncode == 0, r.stdout[-2000:]
    assert r.stdout.startswith("NO WORSE")


def with_rows(src: Path, dst: Path, field: str, rows: list[dict], **fields: object) -> Path:
    """A copy of a run whose run.json `field` holds `rows`, each of English (unless it says), for its
    target and API, and any other `fields` as given."""
    shutil.copytree(src, dst)
    raw = json.loads((dst / "run.json").read_text())
    raw[field] = [{"target": raw["targets"][0], "lang": "en", "api": raw["api"], **row} for row in rows]
    (dst / "run.json").write_text(json.dumps({**raw, **fields}))
    return dst


def with_recovery(src: Path, dst: Path, recover_s: float | None) -> Path:
    """A copy of a run whose first-token-delay window took `recover_s` to come back, for English."""
    return with_rows(src, dst, "recovery", [
        {"window": "first-token-delay", "metric": "ttft_p99_ms", "window_s": 2.0, "windows": 3, "detect_s": 2.0,
         "recover_s": recover_s, "recovered": recover_s is not None, "judged": 9, "needed": 100, "stranded": 0}
    ])  # fmt: skip


def regress(capsys: pytest.CaptureFixture[str], a: Path, b: Path, rules: str, *more: str):
    """`llmchaos regress` of `b` against `a` under a rules file holding `rules`."""
    path = a.parent / "rules.yaml"
    path.write_text(rules)
    return llmchaos(capsys, "regress", "--baseline", str(a), "--current", str(b), "--rules", str(path), *more)


def test_regress_fails_a_run_whose_recovery_got_worse_by_the_rule(runs, tmp_path, capsys):
    a = with_recovery(runs["a"], tmp_path / "a", 4.0)
    b = with_recovery(runs["b"], tmp_path / "b", 12.0)
    r = regress(capsys, a, b, 'defaults: {increase_pct: 30}\n"*": {recover_s: {increase_pct: 50}}\n')  # latencies pass
    assert r.returncode == 1, r.stdout[-2000:]
    assert "WORSE in recovery: the current runs came back more slowly than the rules allow" in r.stdout
    assert "recovery of first-token-delay en ttft_p99_ms: 12.0 s, WORSE: over the baseline's 4.0 s" in r.stdout
    r = regress(capsys, a, b, 'defaults: {increase_pct: 30}\n"*": {recover_s: {max: 15}}\n', "--json")
    assert r.returncode == 0, r.stdout[-2000:]
    assert json.loads(r.stdout)["recovery"] == ["recovery of first-token-delay en ttft_p99_ms: 12.0 s, within the rule"]
    r = llmchaos(capsys, "compare", str(a), str(b))  # compare lists both sides' recovery, gating nothing on it
    assert "recovery of first-token-delay en ttft_p99_ms: A 4.0 s, B 12.0 s" in r.stdout


def with_canaries(src: Path, dst: Path, wrong: int) -> Path:
    """A copy of a run that sent 40 English canaries, `wrong` of them answered wrong in corrupt-answers."""
    rows = [{"phase": "baseline", "sent": 30, "wrong": 0}, {"phase": "corrupt-answers", "sent": 10, "wrong": wrong}]
    return with_rows(src, dst, "canaries", rows)


def test_regress_fails_a_run_that_answered_canaries_wrong_beyond_the_rule(runs, tmp_path, capsys):
    a, b = with_canaries(runs["a"], tmp_path / "a", 0), with_canaries(runs["a2"], tmp_path / "b", 3)
    r = regress(capsys, a, b, '"*": {wrong: {max: 0}}\n')
    assert r.returncode == 1, r.stdout[-2000:]
    assert "WORSE in answers: the current runs' target answered canaries wrong beyond the rules" in r.stdout
    assert "wrong answers of en: 3 of 40 (in corrupt-answers) canaries, WORSE: over the 0 allowed" in r.stdout
    r = regress(capsys, a, b, '"*": {wrong: {max: 3}}\n', "--json")
    assert r.returncode == 0, r.stdout[-2000:]
    assert json.loads(r.stdout)["wrong"] == [
        "wrong answers of en: 3 of 40 (in corrupt-answers) canaries, within the rule"
    ]
    r = regress(capsys, a, b, "de: {wrong: {max: 0}}\n")  # no German canary: said, and gating nothing
    assert r.returncode == 0, r.stdout[-2000:]
    assert "wrong answers of de: not judged (the current runs sent no canary: --canary-rate)" in r.stdout
    r = llmchaos(capsys, "compare", str(a), str(b))  # compare lists both sides', gating nothing on it
    assert r.returncode == 0, r.stdout[-2000:]
    assert "canaries of en answered wrong: A 0 of 40, B 3 of 40 (in corrupt-answers)" in r.stdout


def test_report_as_markdown_shows_the_verdict_phases_and_recovery_as_the_html_does(runs, tmp_path, capsys):
    run_dir = with_recovery(runs["a"], tmp_path / "a", None)
    r = llmchaos(capsys, "report", str(run_dir), "--md")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("### llmchaos: ")
    assert "never back within the run: first-token-delay en" in r.stdout  # under the headline
    assert "| lang | phase | TTFT p50 |" in r.stdout
    assert "| en | baseline | " in r.stdout
    assert "| first-token-delay | en | ttft\\_p99\\_ms | 2.0 s | never within the run | - | 0 |" in r.stdout
    assert "e+0" not in r.stdout


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing", "{d}/nosuch/run.json: No such file or directory"),
        ("future", "{d}/future/run.json: schema_version: schema_version 99 is newer than this llmchaos reads (1)"),
        ("no common language", "A and B have no language in common (A: de, en, ja; B: fr)"),
        ("unknown metric", "{d}/rules.yaml:2: de.ttfb: unknown metric (known: ttft, ttfa, itl"),
        ("bad recovery rule", "{d}/rules.yaml:2: de.recover_s.maximum: unknown field (known: max, increase_pct)"),
        ("bad wrong rule", "{d}/rules.yaml:2: de.wrong.max: must be a whole number >= 0, got -1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(runs, tmp_path, case, message, capsys):
    d = tmp_path
    if case == "missing":
        args = ["compare", str(d / "nosuch"), str(runs["a"])]
    elif case == "future":
        future = write(d / "future", 100, seed=9)
        raw = json.loads((future / "run.json").read_text())
        (future / "run.json").write_text(json.dumps({**raw, "schema_version": 99}))
        args = ["compare", str(runs["a"]), str(future)]
    elif case == "no common language":
        args = ["compare", str(runs["a"]), str(runs["fr"])]
    else:
        rule = {"unknown metric": "ttfb: {increase_pct: 5}", "bad wrong rule": "wrong: {max: -1}"}.get(
            case, "recover_s: {maximum: 60}"
        )
        (d / "rules.yaml").write_text(f"defaults: {{confidence: 0.99}}\nde: {{{rule}}}\n")
        args = ["regress", "--baseline", str(runs["a"]), "--current", str(runs["b"]), "--rules", str(d / "rules.yaml")]
    r = llmchaos(capsys, *args)
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1
    assert r.stderr.startswith("llmchaos: error: " + message.format(d=d))


def test_regress_history_shows_the_change_points_apache_otava_finds(tmp_path, capsys):
    history = tmp_path / "history"
    for night in range(10):  # the build got 30 % slower from night 5 on
        start = 1.8e9 + night * 86400
        slowdown = 1.3 if night >= 5 else 1.0
        write(history / f"night{night}", 3000, seed=20 + night, slowdown=slowdown, start=start, drift=0.0)
    page = tmp_path / "r.html"
    r = llmchaos(
        capsys,
        "regress",
        *("--baseline", str(history / "night0"), "--current", str(history / "night9")),
        *("--history", str(history), "--json", "--html", str(page)),
    )
    assert r.returncode == 1, r.stderr
    lines = json.loads(r.stdout)["history"]
    for lang in ("en", "de", "ja"):
        assert any(line.startswith(f"history: {lang} ttft p50: change +") and "at night5 " in line for line in lines)
    assert not [line for line in lines if "at night5 " not in line]  # no change point where nothing changed
    html = page.read_text()
    assert "History: 10 runs, change points (Apache Otava, E-divisive)" in html
    assert "at night5" in html


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--range", "100,200"], "--a/--b: give a selector for each side"),
        (["--a", "x", "--b", "y"], "--range: give the time range"),
        (["--a", "x", "--b", "y", "--range", "200,100"], "--range: the end must come after the start"),
        (["--a", "x", "--b", "y", "--range", "yesterday,200"], "--range: not a time (RFC 3339 or unix seconds)"),
    ],  # and a Prometheus that does not answer: tests/integration/test_compare_prometheus.py (a socket)
)
def test_bad_prometheus_input_is_one_line_and_exit_2(args, message, capsys):
    r = llmchaos(capsys, "compare", "--prometheus", "http://127.0.0.1:9", *args)  # port 9 (discard): nothing listens
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1
    assert r.stderr.startswith("llmchaos: error: " + message), r.stderr


def test_a_mirrored_replay_shows_its_output_drift_in_the_html_report(tmp_path, capsys):
    replay = tmp_path / "replay"
    for side, seed in (("a", 11), ("b", 12)):
        write(replay / side, 2000, seed=seed, drift=0.0)
    doc = json.loads((replay / "a" / "run.json").read_text())
    doc["replay"] = {  # what a mirrored replay's side a records (llmchaos.run.schema.Replay)
        "side": "a",
        "mode": "mirror",
        "log": "prod.jsonl",
        "format": "jsonl",
        "targets": {"a": "http://a", "b": "http://b"},
        "fidelity": {"lag": {"count": 2000}},
        "mirror": [
            {"lang": "de", "pairs": 200, "identical": 150, "output_tokens_a": 3200, "output_tokens_b": 3100},
            {"lang": "en", "pairs": 400, "identical": 396, "output_tokens_a": 6400, "output_tokens_b": 6400},
        ],
    }
    (replay / "a" / "run.json").write_text(json.dumps(doc))
    page = tmp_path / "r.html"
    r = llmchaos(capsys, "compare", str(replay), "--html", str(page))
    assert r.returncode in (0, 1), r.stderr
    html = page.read_text()
    assert "<h2>Output drift (mirrored pairs)</h2>" in html
    assert "<td>de</td><td>200</td><td>75.0%</td><td>3200</td><td>3100</td>" in html
    assert "<td>en</td><td>400</td><td>99.0%</td>" in html


def with_bar(src: Path, dst: Path, phase: str, value_ms: float, low_ms: float, high_ms: float) -> Path:
    """A copy of a run whose English ITL p99 in `phase` carries this error bar (run.json validity.bounds)."""
    shutil.copytree(src, dst)
    raw = json.loads((dst / "run.json").read_text())
    raw["validity"]["bounds"] = [
        {"target": raw["targets"][0], "lang": "en", "api": raw["api"], "phase": phase, "metric": "itl",
         "percentile": 99.0, "value_ms": value_ms, "low_ms": low_ms, "high_ms": high_ms, "uncertain": 0.05}
    ]  # fmt: skip
    (dst / "run.json").write_text(json.dumps(raw))
    return dst


def test_compare_names_a_verdict_the_generators_error_bars_could_flip(runs, tmp_path, capsys):
    r = llmchaos(capsys, "compare", str(runs["a"]), str(runs["b"]), "--json")
    (row,) = [
        x for x in json.loads(r.stdout)["cells"]
        if (x["lang"], x["metric"], x["stat"], x["phase"]) == ("en", "itl", "p99", "baseline")
    ]  # fmt: skip
    assert row["verdict"] == "worse", row
    a_ms, b_ms = row["a"] * 1000, row["b"] * 1000
    b = with_bar(runs["b"], tmp_path / "b", "baseline", b_ms, b_ms, b_ms)  # B exact
    a = with_bar(runs["a"], tmp_path / "a", "baseline", a_ms, a_ms - 0.1, b_ms + 0.1)  # A's bar reaches B's
    r = llmchaos(capsys, "compare", str(a), str(b))
    assert r.returncode == 1, r.stdout[-2000:]  # B is worse: the verdict stands, the line says what could flip it
    assert (
        f"en itl p99 [baseline] called worse: the generators' error bars overlap (A {a_ms - 0.1:.1f} to "
        f"{b_ms + 0.1:.1f} ms, B {b_ms:.1f} to {b_ms:.1f} ms): the change could be theirs"
    ) in r.stdout
    narrow = with_bar(runs["a"], tmp_path / "narrow", "baseline", a_ms, a_ms - 0.1, a_ms + 0.1)  # apart: said nothing
    r = llmchaos(capsys, "regress", "--baseline", str(narrow), "--current", str(b), "--json")
    assert json.loads(r.stdout)["error_bars"] == []
    r = llmchaos(capsys, "regress", "--baseline", str(a), "--current", str(b), "--json")
    assert len(json.loads(r.stdout)["error_bars"]) == 1
