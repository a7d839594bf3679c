"""`llmchaos logs synth|stats|convert` from the command line, and `loadtest-help --replay`."""

import json

from llmchaos.cli import main
from tests.traces import AZURE, head


def test_synth_then_stats(tmp_path, capsys):
    log = tmp_path / "synth.jsonl"
    assert main(["logs", "synth", "--duration", "2m", "--rate", "5", "--lang-mix", "en=3,zh=1", "--out", str(log)]) == 0
    assert main(["logs", "stats", str(log), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert abs(data["requests"] / 120 - 5) < 1
    assert set(data["langs"]) == {"en", "zh"}
    assert data["langs_assigned"] == 0
    assert main(["logs", "stats", str(log)]) == 0
    text = capsys.readouterr().out
    assert f"{log} (llmchaos): {data['requests']} requests" in text
    assert "rate over time" in text


def test_convert_a_trace_and_read_it_back(tmp_path, capsys):
    src = head(AZURE, 50, tmp_path / "azure.csv")
    out = tmp_path / "azure.jsonl"
    assert main(["logs", "convert", str(src), "--out", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 50
    assert json.loads(lines[0])["input_tokens"] == 374
    assert main(["logs", "stats", str(out), "--format", "llmchaos", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["requests"] == 50


def test_bad_lines_skipped_with_a_count_or_strict_one_line_and_exit_2(tmp_path, capsys):
    log = tmp_path / "bad.jsonl"
    log.write_text('{"ts": 1, "user_id": "u", "input_tokens": 3}\n{"ts": 2, "user_id": "u"}\nnope\n')
    assert main(["logs", "convert", str(log), "--out", str(tmp_path / "out.jsonl")]) == 0
    err = capsys.readouterr().err
    assert "skipped missing_field: 1 (lines 2)" in err
    assert "skipped not_json: 1 (lines 3)" in err
    assert main(["logs", "convert", str(log), "--strict", "--out", str(tmp_path / "out.jsonl")]) == 2
    assert capsys.readouterr().err == f"llmchaos: error: {log}:2: input_tokens: missing\n"
    assert main(["logs", "synth", "--diurnal", "2"]) == 2
    assert capsys.readouterr().err == "llmchaos: error: --diurnal: must be from 0 to 1, got 2.0\n"


def test_loadtest_help_lists_the_replay_options(capsys):
    assert main(["loadtest-help", "--replay"]) == 0
    out = capsys.readouterr().out
    for flag in ("--log", "--target-b", "--split", "--mirror", "--speed", "--session-order", "--slo", "--schedule"):
        assert flag in out
