"""The engines a cluster's flags ask for: their roles, KV ports and command lines."""

from __future__ import annotations

import argparse

from reference_server.cluster.plan import engine_argv, replicas


def test_an_engine_takes_the_router_command_line_but_its_own_options():
    argv = ["serve", "--replicas", "2", "--host=0.0.0.0", "--port", "80", "--router", "prefix", "--pacer-rate", "5"]
    assert engine_argv(argv) == ["--pacer-rate", "5"]


def test_disaggregated_engines_are_prefill_then_decode_and_only_prefill_serves_kv():
    args = argparse.Namespace(argv=["serve", "--disaggregate", "1:2", "--kv-failure", "hang"], disaggregate=(1, 2))
    rs = replicas(args)
    assert [r.role for r in rs] == ["prefill", "decode", "decode"]
    assert rs[0].kv_port is not None
    port = str(rs[0].kv_port)
    assert rs[0].argv == ["--kv-failure", "hang", "--replica-index", "0", "--role", "prefill", "--kv-port", port]
    assert [r.kv_port for r in rs[1:]] == [None, None]
    assert rs[2].argv == ["--kv-failure", "hang", "--replica-index", "2", "--role", "decode"]
    assert len({r.port for r in rs}) == 3
