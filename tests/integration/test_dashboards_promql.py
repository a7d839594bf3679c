"""Every PromQL expression of every generated dashboard (panels, annotations, template variables) run
against a real Prometheus that scraped a real short run: the reference server, the SSE proxy in front
of it, and two open-loop Locust runs exporting live (both also pushing to a Pushgateway, which keeps
their totals after the run, idle, and their recovery, exported as they end), each with a fault
window (an SSE first-token delay through the proxy, a simulated GPU clock lock, with the sim's energy
read: its cost per language and phase is exported as it ends). Each must parse and
return at least one series, and no panel may return NaN (the runs start and end idle). The one
exception is dcgm-exporter's gauges, which a server without a GPU does not export: those must still
parse."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import time
from collections.abc import Iterator

import httpx

from dashboards.grafana import build
from dashboards.grafana.queries import Query, queries
from tests.integration.loadtest_helpers import LOCUST
from tests.integration.test_sse_proxy import proxy
from tests.procs import ROOT, free_port, serve, stop
from tests.services import Prometheus, prometheus, pushgateway

TOKEN = "admin-secret"
RATE_INTERVAL = "5s"  # Grafana's $__rate_interval for a 1 s scrape: at least four scrapes
GPU_ONLY = re.compile(r"DCGM_")
CLUSTER_ONLY = re.compile(r"llmchaos_(router_|kv_transfer)")  # `serve --replicas N` or `--disaggregate P:D`
LABEL_VALUES = re.compile(r"label_values\((.*), (\w+)\)")


def schedule(path, name: str, kind: str, target: str, params: str) -> str:
    path.write_text(
        f"seed: 1\nfaults:\n  - name: {name}\n    kind: {kind}\n    target: {target}\n"
        f"    at: 4s\n    duration: 4s\n    params: {params}\n"
    )
    return str(path)


def locust(host: str, port: int, sched: str, tmp_path, env: dict, *extra: str) -> subprocess.Popen:
    args = [*LOCUST, "--host", host, "--rate", "8", "-u", "16", "-r", "16", "-t", "12s", "--langs", "en,de"]
    args += ["--max-tokens", "12", "--prometheus-port", str(port), "--schedule", sched]
    args += ["--fault-journal", str(tmp_path / f"journal-{port}.json"), *extra]
    # SLOs every answered request meets, whatever the machine's load: goodput's panels need a rate above 0
    # (a busy host once made every request miss the registry's, and Goodput B / A came out NaN, no series)
    slos = tmp_path / "slo.yaml"
    slos.write_text(
        "".join(f"{lang}: {{ttft_p99_ms: 60000, itl_p99_ms: 60000}}\n" for lang in ("en", "de"))
        + "recovery: {min_samples: 1}\n"  # a window of a few requests is judged: the recovery panel has its series
    )
    args += ["--slo", str(slos)]
    args += ["--model", "llmchaos-sim-8b-think-3"]  # thinking first: the reasoning panels have data too
    return subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def query_range(prom: Prometheus, expr: str, start: float, end: float) -> tuple[str | None, list]:
    """(error, result) of a range query as Grafana sends a panel's, one point a second."""
    r = httpx.get(
        prom.url + "/api/v1/query_range", params={"query": expr, "start": start, "end": end, "step": 1}, timeout=30
    )
    body = r.json()
    if body.get("status") != "success":
        return f"{body.get('errorType')}: {body.get('error')}", []
    return None, body["data"]["result"]


def variable_values(prom: Prometheus, q: Query, start: float, end: float) -> list[str]:
    """What Grafana lists for a `label_values(selector, label)` variable over the time range."""
    m = LABEL_VALUES.fullmatch(q.expr)
    assert m, f"{q.dashboard}: {q.where}: not label_values(...): {q.expr}"
    r = httpx.get(
        f"{prom.url}/api/v1/label/{m[2]}/values", params={"match[]": m[1], "start": start, "end": end}, timeout=30
    )
    assert r.status_code == 200, f"{q.dashboard}: {q.where}: {r.text}"
    return sorted(r.json()["data"])


def promql_regex(value: str) -> str:
    """A value as Grafana puts it in a multi-value regex: escaped, inside a PromQL string."""
    return re.escape(value).replace("\\", "\\\\")


def substitute(expr: str, values: dict[str, str]) -> str:
    expr = expr.replace("$__rate_interval", RATE_INTERVAL)
    for name in sorted(values, key=len, reverse=True):  # $target_a before $target
        expr = expr.replace(f"${name}", values[name])
    return expr


def variables(prom: Prometheus, dash: dict, span: tuple[float, float]) -> tuple[dict[str, str], list[str]]:
    """Each query variable's value as Grafana would substitute it (all values of a multi-value one; the
    single-valued ones of one query take distinct values in order: target A, target B), and a line
    for each variable that lists no value."""
    values: dict[str, str] = {}
    empty: list[str] = []
    taken: dict[str, int] = {}
    for v in dash["templating"]["list"]:
        if v["type"] != "query":
            continue
        q = Query(dash["title"], f"variable {v['name']}", substitute(v["query"], values))
        found = variable_values(prom, q, *span)
        if not found:
            empty.append(f"{q.dashboard}: {q.where}: no values: {q.expr}")
            values[v["name"]] = v["allValue"] or ".*"
        elif v["multi"]:
            values[v["name"]] = "(" + "|".join(promql_regex(x) for x in found) + ")"
        else:
            i = taken[q.expr] = taken.get(q.expr, -1) + 1
            values[v["name"]] = found[min(i, len(found) - 1)]
    return values, empty


def check(prom: Prometheus, dash: dict, values: dict[str, str], span: tuple[float, float]) -> Iterator[str]:
    """A line for each panel or annotation query that fails to parse, returns no series or a NaN."""
    for q in queries(dash):
        if q.is_variable:
            continue
        expr = substitute(q.expr, values)
        error, result = query_range(prom, expr, *span)
        where = f"{q.dashboard}: {q.where}: {expr}"
        if error:
            yield f"{where}: {error}"
        elif not result:
            yield f"{where}: no series"
        elif any(v == "NaN" for series in result for _, v in series["values"]):
            yield f"{where}: NaN"


@contextlib.contextmanager
def two_runs(server: str, proxy_url: str, gateway: str, tmp_path) -> Iterator[tuple[list[subprocess.Popen], list[str]]]:
    """Run A straight at the server with a simulated clock lock, run B through the proxy with a
    first-token delay, both reading the sim's modelled energy and pushing to the Pushgateway too;
    stopped by PID if the test ends first."""
    env = {**os.environ, "LLMCHAOS_ADMIN_TOKEN": TOKEN}
    ports = free_port(), free_port()
    a = schedule(tmp_path / "a.yaml", "gpu-at-660mhz", "gpu_clock", f'{{sim: "{server}"}}', "{graphics_mhz: 660}")
    b = schedule(
        tmp_path / "b.yaml",
        "first-token-delay",
        "sse",
        f'{{proxy: "{proxy_url.split("//")[1]}"}}',
        "{first_event_delay: 0.3}",
    )
    # both read the sim's energy: each exports its J/token and $/Mtok as it ends, and the dashboard's
    # run variable may pick either
    energy = ("--energy-from", f"{server}/metrics", "--price-per-gpu-hour", "2")
    runs = [  # both push: each run's recovery is exported as it ends, which only its last push outlives
        locust(server, ports[0], a, tmp_path, env, "--push-gateway", gateway, *energy),
        locust(proxy_url, ports[1], b, tmp_path, env, "--push-gateway", gateway, *energy),
    ]
    try:
        yield runs, [f"127.0.0.1:{port}" for port in ports]
    finally:
        for run in runs:
            stop(run)


def test_every_dashboard_query_returns_data_from_a_real_run(tmp_path):
    """Every dashboard's queries parse and return data (no NaN) from two real runs; only the GPU gauges have none.

    Long (about 40 s here): it starts the server, the proxy, a Pushgateway and Prometheus, runs two 12 s Locust runs,
    waits 6 s idle, then sends Prometheus one range query for each expression of every dashboard."""
    start = time.time()
    with (
        serve("--sim-time-scale", "0.3", "--admin-token", TOKEN) as server,
        proxy(server.url) as p,
        pushgateway() as gw,
        two_runs(server.url, p, gw, tmp_path) as (runs, exporters),
        prometheus([server.url.split("//")[1], gw.split("//")[1], *exporters]) as prom,
    ):
        for run in runs:
            _, err = run.communicate(timeout=90)
            assert run.returncode == 0, err[-3000:]
        time.sleep(6)  # idle: B's last push stays on the Pushgateway, unchanged for a whole rate interval
        span = (start, time.time())
        assert 'llmchaos_power_model="vllm-llama3-8b-h100"' in server.scrape()  # no GPU here: the sim's modelled one
        failures: list[str] = []
        for text in build.rendered().values():
            dash = json.loads(text)
            values, empty = variables(prom, dash, span)
            failures += empty + list(check(prom, dash, values, span))
        # Without the panels' filter the same percentile is NaN where the rate window held no request.
        raw = f"histogram_quantile(0.99, sum by (le, lang) (rate(llmchaos_ttft_seconds_bucket[{RATE_INTERVAL}])))"
        _, result = query_range(prom, raw, *span)
        assert any(v == "NaN" for series in result for _, v in series["values"])
    gpu_only = [f for f in failures if GPU_ONLY.search(f) and ("no series" in f or "no values" in f)]
    print(f"{len(gpu_only)} queries with no data for want of a GPU:", *gpu_only, sep="\n")
    cluster_only = [f for f in failures if CLUSTER_ONLY.search(f) and "no series" in f]  # the next test's
    failures = [f for f in failures if f not in gpu_only + cluster_only]
    assert not failures, f"{len(failures)} queries failed:\n" + "\n".join(failures)
    # Four gauges parse and have no data here: the sim models its GPU's clock and power (so the GPU
    # variable lists it), not its utilization, temperature or memory.
    assert len(gpu_only) == 4


def test_the_cluster_panels_return_data_from_a_real_cluster():
    """The server dashboard's router and KV-transfer panels, on what a real Prometheus scraped from a
    disaggregated cluster that answered requests, a KV partition in the middle (recomputed ones)."""
    start = time.time()
    cluster = ("--disaggregate", "1:1", "--kv-bytes-scale", "0.01", "--admin-token", TOKEN)
    with serve(*cluster) as server, prometheus([server.url.split("//")[1]]) as prom:
        auth = {"authorization": f"Bearer {TOKEN}"}
        body = {"model": "llmchaos-sim-8b", "messages": [{"role": "user", "content": "words " * 50}], "max_tokens": 2}
        ways = set()
        for n in range(40):  # 8 s or more of requests: rate windows of several scrapes each
            if n in (15, 22):
                method = "PUT" if n == 15 else "DELETE"
                httpx.request(method, server.url + "/admin/kv_link", json={"action": "partition"}, headers=auth)
            r = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=30)
            assert r.status_code == 200, r.text
            ways.add(r.headers["x-llmchaos-kv"])
            time.sleep(0.15)
        assert ways == {"pulled", "recomputed"}
        time.sleep(2)  # the last requests scraped
        span = (start, time.time())
        (dash,) = [json.loads(t) for name, t in build.rendered().items() if name == "llmchaos-server.json"]
        cluster_queries = {q.expr for q in queries(dash) if CLUSTER_ONLY.search(q.expr)}
        assert len(cluster_queries) >= 5
        failures = [f for f in check(prom, dash, {}, span) if CLUSTER_ONLY.search(f)]
    assert not failures, "\n".join(failures)
