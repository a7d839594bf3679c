"""The dispatcher: each component's subcommands found by entry point; bad input is one line, exit 2."""

import argparse

import pytest

from llmchaos.cli import build_parser
from tests.inprocess import llmchaos


def owner(parser: argparse.ArgumentParser) -> str:
    """The module of the function a (sub)command runs; for a group, that of its first subcommand."""
    func = parser.get_default("func")
    if func is None:
        (nested,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        return owner(next(iter(nested.choices.values())))
    return func.__module__


def test_every_component_owns_its_subcommands():
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    owners = {name: owner(p) for name, p in sub.choices.items()}
    assert owners == {
        "serve": "reference_server.cli",
        "calibrate": "reference_server.calibrate.cli",
        "proxy": "faults.cli",
        "faults": "faults.cli",
        "push-delete": "loadtests.cli",
        "loadtest-help": "loadtests.cli",
        "logs": "loadtests.logs.cli",
        "report": "dashboards.report",
        "compare": "dashboards.compare",
        "regress": "dashboards.regress",
        "dashboards": "dashboards.grafana.cli",
        "stack": "compose.cli",
        "k8s": "faults.k8s.cli",
    }


def test_serve_refuses_an_unknown_engine_with_the_list(capsys, monkeypatch):
    from reference_server import server

    monkeypatch.setattr(server, "serve", None)  # were the engine taken: a TypeError, not a server for ever
    r = llmchaos(capsys, "serve", "--engine", "nosuch", "--port", "1")
    assert r.returncode == 2
    assert r.stderr == "llmchaos: error: --engine: unknown engine 'nosuch' (engines: sim, torch)\n"


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["faults", "run", "s.yaml", "--dry-run", "--duration", "nan"], "--duration"),
        (["faults", "run", "s.yaml", "--dry-run", "--duration", "1e308"], "--duration"),  # past a year
        (["k8s", "render", "s.yaml", "--duration", "inf"], "--duration"),
        (["proxy", "--header-timeout", "nan"], "--header-timeout"),
        (["compare", "a", "b", "--step=-inf"], "--step"),
        (["faults", "host", "--max-lease", "nan"], "--max-lease"),
        (["serve", "--sim-time-scale", "inf"], "--sim-time-scale"),
        (["serve", "--drain-timeout", "nan"], "--drain-timeout"),
    ],
)
def test_a_number_that_is_not_finite_is_refused_naming_its_flag(capsys, args, flag):
    r = llmchaos(capsys, *args)
    assert r.returncode == 2, r
    assert r.stderr.startswith(f"llmchaos: error: argument {flag}: must be a finite number"), r.stderr
    assert r.stderr.count("\n") == 1, r.stderr  # one line, as every other error


@pytest.mark.parametrize(("text", "pair"), [("1:1", (1, 1)), ("2:3", (2, 3))])
def test_pools_reads_prefill_and_decode_counts(text, pair):
    from llmchaos.cli import pools

    assert pools(text) == pair


@pytest.mark.parametrize("text", ["1", "0:1", "1:0", "1:", ":1", "a:b", "1:2:3", "-1:2", "1.5:2"])
def test_pools_refuses_what_is_not_two_counts(text):
    from llmchaos.cli import pools

    with pytest.raises(argparse.ArgumentTypeError, match="must be P:D"):
        pools(text)
