"""What `stack up` hands each `llmchaos serve`: the admin token and the cluster the flags ask for;
contradictory flags are one line and exit 2 before anything starts."""

from __future__ import annotations

import contextlib
import io

import pytest

from compose.cli import ROUTERS
from compose.stack import server_args
from llmchaos.cli import build_parser, main


def parsed(*argv: str):
    return build_parser().parse_args(["stack", "up", *argv])


def test_a_single_server_gets_only_its_token():
    assert server_args(parsed("--admin-token", "t")) == ("--admin-token", "t")
    assert server_args(parsed()) == ()


def test_the_cluster_flags_and_more_server_options_pass_through():
    args = parsed("--replicas", "2", "--router", "prefix", "--server-args", "--kv-timeout 5")
    assert server_args(args) == ("--replicas", "2", "--router", "prefix", "--kv-timeout", "5")
    pd = parsed("--disaggregate", "1:2", "--server-args", "--kv-failure hang")
    assert server_args(pd) == ("--disaggregate", "1:2", "--kv-failure", "hang")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--replicas", "2", "--disaggregate", "1:1"], "--disaggregate: give --replicas or --disaggregate, not both"),
        (["--router", "prefix"], "--router: a router needs --replicas N (N >= 2) or --disaggregate P:D"),
        (["--disaggregate", "2"], "--disaggregate: must be P:D"),
    ],
)
def test_contradictions_are_refused_before_anything_starts(tmp_path, argv, says):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            status = main(["stack", "up", "--state-dir", str(tmp_path), *argv])
        except SystemExit as e:  # argparse's own refusal of a flag's value
            status = e.code
    assert status == 2
    assert err.getvalue().count("\n") == 1, err.getvalue()
    assert says in err.getvalue()


def test_the_router_choices_are_the_servers():
    from reference_server.cluster.policies import POLICIES

    assert set(ROUTERS) == set(POLICIES)
