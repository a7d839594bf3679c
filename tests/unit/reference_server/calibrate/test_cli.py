"""`llmchaos calibrate`'s bad input: one line, exit 2, nothing written."""

import pytest

from tests.inprocess import llmchaos
from tests.unit.reference_server.calibrate.test_measured import write_run


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "RUN: give either --curves or RUN directories"),
        (["--curves", "nosuch"], "no curves file or named curves 'nosuch' (named: vllm-llama2-7b-h100, "),
        (["{run}", "{run}"], "--metrics: runs do not say how long their prompts were"),
        (["{run}", "--prompt-tokens", "100"], "RUN: a fit needs two load levels or more"),
        (["{run}", "{run}", "--metrics", "a", "b"], "--metrics: 1 pairs of scrapes for 2 runs"),
        (["{tmp}/nosuch", "{run}", "--prompt-tokens", "9"], "{tmp}/nosuch/run.json: No such file or directory"),
        (  # it had run 188 s at 4 GB and printed a fit (issue 34, defect 12)
            ["{run}", "{other}", "--prompt-tokens", "200000"],
            "--prompt-tokens: a request of 200000 prompt and 64 output tokens is longer than the base profile's "
            "max_model_len, 131072",
        ),
        (  # fitted as two levels without complaint (issue 34, defect 13)
            ["{run}", "{tmp}/run/", "--prompt-tokens", "100"],
            "RUN: {tmp}/run/ holds the same requests as {tmp}/run: one run given twice",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message, capsys):
    write_run(tmp_path / "run")
    write_run(tmp_path / "other", rate=20.0)
    args = [a.replace("{run}", str(tmp_path / "run")).replace("{other}", str(tmp_path / "other")) for a in args]
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    out = tmp_path / "out.yaml"
    proc = llmchaos(capsys, "calibrate", *args, "--out", str(out))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("llmchaos: error: " + message.replace("{tmp}", str(tmp_path))), proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert not out.exists()
