"""`llmchaos serve`'s flags (reference_server/cli.py), run as the real command (in this process)."""

import pytest

from tests.inprocess import llmchaos


@pytest.fixture(autouse=True)
def never_serve(monkeypatch):
    """Flags these tests expect refused: were they taken, the test fails instead of serving for ever."""
    from reference_server import server

    def refuse(*args, **kwargs):
        raise AssertionError("llmchaos serve took the flags and would listen")

    monkeypatch.setattr(server, "serve", refuse)


@pytest.mark.parametrize("port", ["99999", "65536", "0", "-1"])
def test_a_port_outside_1_65535_is_one_line_and_exit_2(port, capsys):
    """--port 99999 was accepted and the server listened on some other port."""
    proc = llmchaos(capsys, "serve", "--port", port)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("llmchaos: error: --port: "), proc.stderr
    assert "1..65535" in proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--header-timeout", "nan"), ("--sim-time-scale", "inf"), ("--pacer-max-gap", "inf"), ("--drain-timeout", "nan")],
)
def test_a_number_that_is_not_finite_is_one_line_and_exit_2(flag, value, capsys):
    """nan passed every `> 0` check and reached the timers (a header timeout of nan, a step of inf)."""
    proc = llmchaos(capsys, "serve", flag, value)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"llmchaos: error: argument {flag}: must be a finite number "), proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr


# -- --profile -------------------------------------------------------------------------------------
def serve_args(*argv: str):
    from llmchaos.cli import build_parser

    return build_parser().parse_args(["serve", *argv])


def test_sim_serves_the_default_profile_and_every_flag_given_overrides_it():
    from reference_server import profile
    from reference_server.cli import chosen

    default = profile.load(profile.DEFAULT)
    assert chosen(serve_args()) == default
    p = chosen(
        serve_args(
            "--max-model-len", "4096", "--max-num-seqs", "8", "--no-prefix-caching", "--pacer-rate", "80",
            "--policy", "wfq", "--model-name", "m", "--sim-time-scale", "2", "--sim-jitter", "0",
            "--reasoning-field", "reasoning",
        )
    )  # fmt: skip
    assert (p.limits.max_model_len, p.limits.max_num_seqs, p.limits.prefix_caching) == (4096, 8, False)
    assert p.limits.num_blocks == default.limits.num_blocks
    assert (p.pacer_rate, p.policy, p.model_name, p.reasoning.openai_field) == (80.0, "wfq", "m", "reasoning")
    assert p.step == default.step.scaled(2.0, 0.0)


def test_torch_keeps_its_own_limits_unless_a_profile_is_named():
    from reference_server.cli import chosen

    assert chosen(serve_args("--engine", "torch")).limits.max_model_len == 8192
    assert chosen(serve_args("--engine", "torch", "--profile", "reasoning")).reasoning.median == 512


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--profile", "nosuch"], "llmchaos: error: no profile file or named profile 'nosuch' (named: "),
        (["--num-blocks", "100"], "llmchaos: error: --num-blocks: the KV pool (100 blocks of 16) must hold one "),
        (["--profile", "{bad}"], "llmchaos: error: {bad}:2: limits.num_blocks: must be a whole number >= 1"),
        (["--num-blocks", "1000000000000"], "llmchaos: error: --num-blocks: must be at most 1e+07, got 1e+12"),
        (["--sim-jitter", "1000"], "llmchaos: error: --sim-jitter: must be at most 3, got 1000"),
        (["--sim-time-scale", "1e300"], "llmchaos: error: --sim-time-scale: must be at most 1000, got 1e+300"),
    ],
)
def test_a_profile_it_cannot_serve_is_one_line_and_exit_2(tmp_path, args, message, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("limits:\n  num_blocks: -3\n")
    args = [a.replace("{bad}", str(bad)) for a in args]
    proc = llmchaos(capsys, "serve", *args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(message.replace("{bad}", str(bad))), proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
