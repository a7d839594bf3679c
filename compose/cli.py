"""`llmchaos stack up|down|status`: the parser. The commands run in compose/stack.py, imported when one
runs, so building the parser (every `llmchaos ... --help`) loads neither httpx nor the services."""

from __future__ import annotations

import argparse
import os

from llmchaos.cli import Subparsers, pools, positive

ROUTERS = ("round-robin", "least-loaded", "prefix")  # `llmchaos serve --router`'s


def default_state_dir() -> str:
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(base, "llmchaos", "stack")


def register(sub: Subparsers) -> None:
    p = sub.add_parser("stack", help="the whole loop from local processes: up, down, status")
    verbs = p.add_subparsers(dest="stack_command", required=True, metavar="VERB")
    up = verbs.add_parser("up", help="start the stack (or only workers, with --worker-host)")
    down = verbs.add_parser("down", help="stop exactly what `up` started")
    status = verbs.add_parser("status", help="what runs where")
    for v in (up, down, status):
        v.add_argument("--state-dir", default=default_state_dir(), help="ports, PIDs and logs (default: %(default)s)")
    up.add_argument("--bind", default="127.0.0.1", help="the address every service listens on")
    up.add_argument("--servers", type=positive(int), default=1, help="reference servers (the proxy fronts the first)")
    up.add_argument("--replicas", type=positive(int), default=1, help="engines behind a router in each server")
    up.add_argument(
        "--disaggregate", type=pools, default=None, metavar="P:D", help="each server as P prefill and D decode engines"
    )
    up.add_argument("--router", choices=ROUTERS, default=None, help="the router's policy (a cluster's)")
    up.add_argument("--server-args", default="", help="more options for each server, e.g. '--kv-failure hang'")
    up.add_argument("--workers", type=int, default=2, help="Locust workers")
    up.add_argument("--langs", default="en,de,fr,es,it,pt,zh,ja", help="languages of the Locust users")
    up.add_argument("--scrape-interval", type=positive(int), default=5, help="Prometheus' scrape interval (s)")
    up.add_argument("--admin-token", default="", help="the reference servers' admin token (clock faults)")
    up.add_argument("--locust-args", default="", help="more options for the Locust master, e.g. '--schedule F'")
    up.add_argument("--server-port", type=int, default=0, help="the first server's port (default: a free one)")
    up.add_argument("--proxy-port", type=int, default=0, help="the proxy's port (default: a free one)")
    up.add_argument("--no-grafana", action="store_true", help="do not start Grafana even when installed")
    up.add_argument("--worker-host", default="", help="HOST:PORT of a master to join: start only --workers workers")
    up.add_argument("--fault-host", default="", metavar="NAME", help="also start a fault host (schedules' target.host)")
    up.add_argument(
        "--fault-host-args",
        default="",
        help="what it may touch beyond the first server's clock and the proxy, e.g. '--allow-interface eth1'",
    )
    up.add_argument(
        "--fault-secret-file",
        default="",
        help="the secret the master and its fault hosts share (default: a new one in the state dir; needed to join)",
    )
    up.set_defaults(func=run_up)
    down.set_defaults(func=run_down)
    status.set_defaults(func=run_status)


def run_up(args: argparse.Namespace) -> int:
    from compose import stack

    return stack.run_up(args)


def run_down(args: argparse.Namespace) -> int:
    from compose import stack

    return stack.run_down(args)


def run_status(args: argparse.Namespace) -> int:
    from compose import stack

    return stack.run_status(args)
