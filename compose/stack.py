"""`llmchaos stack up|down|status`: start the whole loop from local processes, stop exactly what was
started, say what runs where. `up --worker-host HOST:PORT` starts only workers that join a master
over the network (on another host, or in another network namespace). Its parser is compose/cli.py's."""

from __future__ import annotations

import argparse
import os
import secrets
import shlex
import socket
from pathlib import Path

import httpx

from compose import links, services
from compose.state import Service, Stack, wait_ready
from llmchaos.errors import UsageError

READY_S = 90.0  # a Locust master with many workers on a busy machine takes a while


def run_up(args: argparse.Namespace) -> int:
    if args.workers < 0:
        raise UsageError(f"must be >= 0, got {args.workers}", field="--workers")
    for flag, port in (("--server-port", args.server_port), ("--proxy-port", args.proxy_port)):
        if not 0 <= port <= 65535:
            raise UsageError(f"not a port: {port}", field=flag)
    state = Path(args.state_dir)
    if Stack.load(state).running():
        raise UsageError(f"a stack already runs from {state}: `llmchaos stack down` first", field="--state-dir")
    for flag, port in (("--server-port", args.server_port), ("--proxy-port", args.proxy_port)):
        if port and (why := taken(args.bind, port)):
            raise UsageError(f"port {port} on {args.bind} is taken ({why}): nothing started", field=flag)
    stack = Stack(state)
    try:
        problem = join(stack, args) if args.worker_host else full(stack, args)
    except KeyboardInterrupt:
        problem = "interrupted"
    if problem:
        stack.stop()
        print(f"llmchaos stack up: {problem}\nstopped what had started")
        return 1
    print(table(stack))
    return 0


def taken(host: str, port: int) -> str | None:
    """Why `port` on `host` cannot be ours (another program listens there), or None when it is free."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers bind: TIME_WAIT is free
        try:
            s.bind((host, port))
        except OSError as e:
            return e.strerror or str(e)
    return None


def _answers(service: Service) -> bool:
    """Its ready URL answers 200 from its own process, or its log shows its ready line (a worker has
    neither: running is ready)."""
    if service.ready_line:
        with open(service.log, "rb") as log:
            log.seek(service.log_from)
            return service.ready_line.encode() in log.read()
    if not service.ready:
        return True
    try:
        return httpx.get(service.ready, timeout=2).status_code == 200 and service.listens()
    except httpx.HTTPError:
        return False


def _check(stack: Stack, service: Service) -> str | None:
    """Start `service` and wait until it answers; why not, if it does not."""
    stack.start(service, services.ROOT)
    return wait_ready(service, READY_S, _answers)


def join(stack: Stack, args: argparse.Namespace) -> str | None:
    host, sep, port = args.worker_host.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise UsageError(f"not HOST:PORT: {args.worker_host!r}", field="--worker-host")
    if args.fault_host:
        if not args.fault_secret_file:
            raise UsageError("a fault host joining a master needs the master's secret", field="--fault-secret-file")
        allow = list(_split(args.fault_host_args, "--fault-host-args"))
        host_service = services.fault_host(
            args.fault_host, host.strip("[]"), int(port), args.fault_secret_file, allow, args.admin_token
        )
        if problem := _check(stack, host_service):
            return problem
    for i in range(args.workers):
        if problem := _check(stack, services.worker(i + 1, host.strip("[]"), int(port))):
            return problem
    return None


def full(stack: Stack, args: argparse.Namespace) -> str | None:
    """Every service in order; the first that fails to come up ends it (the caller stops the rest)."""
    gateway_bin = services.binary("prometheus-pushgateway", "pushgateway")
    prometheus_bin = services.binary("prometheus")
    if not gateway_bin or not prometheus_bin:
        raise UsageError("prometheus and prometheus-pushgateway must be on PATH (Debian packages of those names)")
    plan = services.Plan(
        args.bind,
        args.servers,
        args.workers,
        args.langs,
        args.scrape_interval,
        server_args(args),
        _split(args.locust_args),
        args.server_port,
        args.proxy_port,
    )
    started = services.servers(plan)
    for s in started:
        if problem := _check(stack, s):
            return problem
    proxy = services.proxy(plan, started[0].url)
    gateway = services.pushgateway(plan, gateway_bin)
    for s in (proxy, gateway):
        if problem := _check(stack, s):
            return problem
    master, bus, exporter = services.master(plan, proxy.url, gateway.url, stack.root)
    if args.fault_host:  # before the master: a master whose schedule names it waits for it at start
        secret = args.fault_secret_file or _new_secret(stack.root)
        master.cmd += ["--fault-secret-file", secret]
        local = f"127.0.0.1:{_hostport(started[0]).rsplit(':', 1)[1]}"  # admin APIs answer the loopback
        allow = ["--allow-sim", f"http://{local}", "--allow-proxy", f"127.0.0.1:{_hostport(proxy).rsplit(':', 1)[1]}"]
        allow += _split(args.fault_host_args, "--fault-host-args")
        host_service = services.fault_host(args.fault_host, args.bind, bus, secret, allow, args.admin_token)
        if problem := _check(stack, host_service):
            return problem
        stack.notes.append(f"fault host {args.fault_host}: schedules reach it as target: {{host: {args.fault_host}}}")
    if problem := _check(stack, master):
        return problem
    scrape = {
        "server": [_hostport(s) for s in started],
        "pushgateway": [_hostport(gateway)],
        "llmchaos": [f"{args.bind}:{exporter}"],  # the master's live export (0.0.0.0)
    }
    prom = services.prometheus(plan, prometheus_bin, stack.root, scrape)
    if problem := _check(stack, prom):
        return problem
    stack.notes.append(f"workers on other hosts join with: llmchaos stack up --worker-host {args.bind}:{bus}")
    for i in range(args.workers):
        stack.start(services.worker(i + 1, args.bind, bus), services.ROOT)
    if problem := wait_ready(master, READY_S, lambda m: _workers(m) >= args.workers):
        return problem
    return dashboards(stack, plan, prom.url, args.no_grafana)


def server_args(args: argparse.Namespace) -> tuple[str, ...]:
    """What each `llmchaos serve` is given beyond its address: the admin token, the cluster it is."""
    if args.replicas > 1 and args.disaggregate:
        raise UsageError("give --replicas or --disaggregate, not both", field="--disaggregate")
    if args.router and args.replicas == 1 and not args.disaggregate:
        raise UsageError("a router needs --replicas N (N >= 2) or --disaggregate P:D", field="--router")
    out = ["--admin-token", args.admin_token] if args.admin_token else []
    if args.replicas > 1:
        out += ["--replicas", str(args.replicas)]
    if args.disaggregate:
        out += ["--disaggregate", "{}:{}".format(*args.disaggregate)]
    if args.router:
        out += ["--router", args.router]
    return (*out, *_split(args.server_args, "--server-args"))


def _split(text: str, flag: str = "--locust-args") -> tuple[str, ...]:
    try:
        return tuple(shlex.split(text))
    except ValueError as e:
        raise UsageError(str(e), field=flag) from None


def _new_secret(root: Path) -> str:
    """A fresh shared secret for the master and its fault host, readable by this user only."""
    path = root / "fault-secret"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(24) + "\n")
    return str(path)


def _hostport(service: Service) -> str:
    return service.url.split("//", 1)[1]


def _workers(master: Service) -> int:
    try:
        return int(httpx.get(master.url + "/stats/requests", timeout=2).json()["worker_count"])
    except (httpx.HTTPError, ValueError, KeyError):
        return -1


def dashboards(stack: Stack, plan: services.Plan, prometheus_url: str, no_grafana: bool) -> str | None:
    """Grafana with the provisioned dashboards, or else a note and a link per panel to Prometheus."""
    grafana_bin = None if no_grafana else services.binary("grafana", "grafana-server")
    if grafana_bin:
        return _check(stack, services.grafana(plan, grafana_bin, stack.root, prometheus_url))
    out = stack.root / "panels.md"
    n = links.write(out, services.DASHBOARDS, prometheus_url, f"{4 * plan.scrape_interval_s}s")
    why = "--no-grafana" if no_grafana else "no grafana or grafana-server on PATH"
    stack.notes.append(f"Grafana not started ({why}): {n} panel queries as Prometheus links in {out}")
    stack.save()
    return None


def table(stack: Stack) -> str:
    rows = [("service", "pid", "state", "url", "log")]
    for s in stack.services:
        rows.append((s.name, str(s.pid), "running" if s.process() else "exited", s.url or "-", s.log))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[4] for r in rows]
    return "\n".join([f"stack in {stack.root}", *lines, *stack.notes])


def run_status(args: argparse.Namespace) -> int:
    stack = Stack.load(Path(args.state_dir))
    if not stack.services:
        print(f"no stack in {args.state_dir}")
        return 0
    print(table(stack))
    return 0 if len(stack.running()) == len(stack.services) else 1


def run_down(args: argparse.Namespace) -> int:
    stack = Stack.load(Path(args.state_dir))
    stopped = stack.stop()
    print(f"stopped: {', '.join(stopped)}" if stopped else f"nothing runs from {args.state_dir}")
    return 0
