"""The engines a cluster's flags ask for, each with the `llmchaos serve` options it runs with: the
router's own command line, less what only the router takes (its address, the cluster's shape),
plus its role (and, disaggregated, the KV flags)."""

from __future__ import annotations

import argparse

from llmchaos.procs import free_port
from reference_server.cluster.supervisor import Replica

ROUTER_ONLY = ("--host", "--port", "--replicas", "--disaggregate", "--router", "--replica-index")  # each takes a value


def engine_argv(argv: list[str]) -> list[str]:
    """`serve`'s options in `argv` (the whole command line) without the router's own."""
    rest = argv[argv.index("serve") + 1 :]
    out: list[str] = []
    skip = False
    for a in rest:
        if skip:
            skip = False
        elif a in ROUTER_ONLY:
            skip = True
        elif not a.startswith(tuple(f + "=" for f in ROUTER_ONLY)):
            out.append(a)
    return out


def replicas(args: argparse.Namespace) -> list[Replica]:
    base = engine_argv(args.argv)
    if not args.disaggregate:
        return [Replica(i, "mixed", [*base, "--replica-index", str(i)]) for i in range(args.replicas)]
    p, d = args.disaggregate
    out = []
    for i in range(p + d):
        role = "prefill" if i < p else "decode"
        kv_port = free_port() if role == "prefill" else None
        more = ["--replica-index", str(i), "--role", role] + (["--kv-port", str(kv_port)] if kv_port else [])
        out.append(Replica(i, role, [*base, *more], kv_port=kv_port))
    return out
