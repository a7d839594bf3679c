"""`make demo`: the local stack, its server a small disaggregated cluster (one prefill and two decode
engines behind a router, decode recomputing a prefill whose KV does not come), a per-language step
load of `--seconds` (2 minutes) with a fault schedule (a first-token delay with 15 % of events dropped
through the proxy, the simulated GPU clocks locked at 660 MHz, a decode engine killed, the KV link
partitioned, and as root a tbf bandwidth limit on a veth pair to workers in a namespace the demo
creates), then the results directory with its HTML report, the dashboards built, the per-language
summary per phase with what a token cost (the sim's modelled energy); everything it started is
stopped at the end, the namespace removed."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from compose.netns import Link, enter, namespace_with_link
from llmchaos import languages
from llmchaos.procs import free_port

TOKEN = "llmchaos-demo"
PRICE_PER_GPU_HOUR = 3.0  # an example figure for $/Mtok, said as such where it is printed
LLMCHAOS = [sys.executable, "-m", "llmchaos.cli"]
KV_STALL_S = 1.0  # decode gives a pull up after this long without a byte: longer than a busy host's waits for a CPU
CLUSTER = (
    *("--disaggregate", "1:2"),
    *("--server-args", f"--kv-failure recompute --kv-stall {KV_STALL_S:g} --kv-bytes-scale 0.01"),
)
KILLED = 2  # the second decode engine (0 prefills, 1 and 2 decode)
WINDOWS = (  # name, kind, start and length as fractions of the run, params
    ("first-token-delay", "sse", 0.16, 0.1, "{first_event_delay: 0.25, drop_ratio: 0.15}"),
    ("gpu-at-660mhz", "gpu_clock", 0.32, 0.1, "{graphics_mhz: 660}"),
    ("replica-kill", "replica", 0.48, 0.1, "{action: kill}"),
    ("kv-partition", "kv_link", 0.64, 0.1, "{action: partition}"),
    ("bandwidth-200kbit", "tbf", 0.8, 0.1, "{rate: 200kbit, burst: 4096, latency: 400ms}"),
)


def schedule(path: Path, seconds: float, server: int, proxy: int, link: Link | None) -> Path:
    """The fault schedule, its windows scaled to the run (the tbf one only with a veth pair)."""
    targets = {
        "sse": f'{{proxy: "127.0.0.1:{proxy}"}}',  # the control APIs answer loopback clients only
        "gpu_clock": f'{{sim: "http://127.0.0.1:{server}"}}',
        "replica": f'{{sim: "http://127.0.0.1:{server}", replica: {KILLED}}}',
        "kv_link": f'{{sim: "http://127.0.0.1:{server}"}}',
        "tbf": f"{{interface: {link.host_interface}}}" if link else "",
    }
    lines = ["seed: 7", "faults:"]
    for name, kind, at, length, params in WINDOWS:
        if targets[kind]:
            lines += [f"  - name: {name}", f"    kind: {kind}", f"    target: {targets[kind]}"]
            lines += [f"    at: {at * seconds:.1f}s", f"    duration: {length * seconds:.1f}s", f"    params: {params}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def llmchaos(*args: str, **kw: object) -> subprocess.CompletedProcess:
    return subprocess.run([*LLMCHAOS, *args], text=True, **kw)  # type: ignore[call-overload]  # kw: run's options


@contextlib.contextmanager
def stack_up(state: Path, seconds: float, link: Link | None) -> Iterator[str]:
    """The stack (workers in the namespace when there is one), the test starting itself; yields the
    master's web UI. Stopped at the end, whatever happens."""
    bind = link.host_address if link else "127.0.0.1"
    server, proxy = free_port(bind), free_port(bind)
    plan = schedule(state / "schedule.yaml", seconds, server, proxy, link)
    stage = max(1.0, seconds / 3)
    locust = [
        *("--autostart", "--expect-workers", "2", "-t", f"{seconds:.0f}s", "--warmup", f"{0.05 * seconds:.1f}s"),
        *("--shape", "step", "--levels", "8,10,12", "--stage-duration", f"{stage:.1f}s", "--think-time", "1"),
        *("--max-tokens", "32", "--long-context-tokens", "1500"),  # uncached prefills: a clock lock slows TTFT, not ITL
        *("--schedule", str(plan), "--fault-journal", str(state / "journal.json")),
        *(("--allow-interface", link.host_interface) if link else ()),
        # what a token costs: the sim's modelled energy from its page, at an example price of an H100-hour
        *("--energy-from", f"http://{bind}:{server}/metrics", "--price-per-gpu-hour", str(PRICE_PER_GPU_HOUR)),
    ]
    env = {**os.environ, "LLMCHAOS_ADMIN_TOKEN": TOKEN}
    main, workers = ["--state-dir", str(state / "stack")], ["--state-dir", str(state / "workers")]
    try:
        up = llmchaos(
            "stack", "up", *main, "--bind", bind, "--workers", "0" if link else "2", "--scrape-interval", "2",
            "--admin-token", TOKEN, "--server-port", str(server), "--proxy-port", str(proxy), *CLUSTER,
            "--locust-args", " ".join(locust), env=env, capture_output=True,
        )  # fmt: skip
        print(up.stdout, end="")
        if up.returncode != 0:
            raise SystemExit(f"demo: the stack did not come up:\n{up.stderr}")
        if link is not None:
            join = next(line.split()[-1] for line in up.stdout.splitlines() if "--worker-host" in line)
            w = llmchaos(
                "stack", "up", *workers, "--worker-host", join, "--workers", "2",
                preexec_fn=enter(link.namespace), capture_output=True,
            )  # fmt: skip
            if w.returncode != 0:
                raise SystemExit(f"demo: the workers in {link.namespace} did not come up:\n{w.stdout}{w.stderr}")
            print(f"2 Locust workers in network namespace {link.namespace}, over {link.host_interface}")
        yield next(line.split()[3] for line in up.stdout.splitlines() if line.startswith("locust-master "))
    finally:
        for where in (workers, main):
            llmchaos("stack", "down", *where, capture_output=True)


def follow(ui: str, seconds: float) -> str:
    """Print each phase as the run enters it; the run's id once the test has stopped and its totals
    are final."""
    deadline, last = time.monotonic() + seconds + 180, None
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError, ValueError):
            tab = httpx.get(ui + "/llmchaos/tab", timeout=5).json()
            if tab["run_id"] and tab["phase"] != last:
                last = tab["phase"]
                print(f"  {time.strftime('%H:%M:%S')}  phase: {last}")
            if tab["settled"]:
                return str(tab["run_id"])
        time.sleep(0.5)
    raise SystemExit("demo: the run did not finish in time")


def _ms(cell: dict | None, key: str, limit_ms: float | None = None) -> str:
    """A summary's value in ms, '!' after it when over `limit_ms`."""
    if cell is None:
        return "-"
    value = cell[key] * 1000
    return f"{value:.1f}{'!' if limit_ms is not None and value > limit_ms else ''}"


def _cost(row: dict | None, key: str, form: str) -> str:
    return "-" if row is None or row.get(key) is None else format(row[key], form)


def per_phase(run: dict) -> str:
    """TTFT, ITL and what a token cost per language and phase, a '!' where a P99 is over the
    language's SLO."""
    cells = {(s["lang"], s["phase"], s["metric"]): s for s in run["summaries"]}
    costs = {(c["lang"], c["phase"]): c for c in run.get("cost", [])}
    phases = ["baseline", *(w["name"] for w in run["faults"])]
    out = [
        f"{'lang':4}  {'phase':18} {'reqs':>5} {'ttft p50':>9} {'ttft p99':>9} {'itl p99':>8} {'J/token':>8} "
        f"{'$/Mtok':>7}   (ms; !: over SLO; $ at ${PRICE_PER_GPU_HOUR:g} per GPU-hour)"
    ]
    for lang in sorted({s["lang"] for s in run["summaries"]}):
        slo = languages.get(lang).slo
        for phase in phases:
            ttft, itl, cost = (
                cells.get((lang, phase, "ttft")),
                cells.get((lang, phase, "itl")),
                costs.get((lang, phase)),
            )
            if ttft is not None:
                out.append(
                    f"{lang:4}  {phase:18} {ttft['count']:5} {_ms(ttft, 'p50'):>9} "
                    f"{_ms(ttft, 'p99', slo.get('ttft_p99_ms')):>9} {_ms(itl, 'p99', slo.get('itl_p99_ms')):>8} "
                    f"{_cost(cost, 'j_per_token', '.3f'):>8} {_cost(cost, 'usd_per_mtok', '.2f'):>7}"
                )
    return "\n".join(out)


def verdicts(run: dict) -> str:
    """Each language's SLO verdict over the whole run, and the phases whose P99 broke it."""
    over: dict[str, set[str]] = {}
    for s in run["summaries"]:
        limit = languages.get(s["lang"]).slo.get(f"{s['metric']}_p99_ms")
        if limit is not None and s["phase"] != "warmup" and s["p99"] * 1000 > limit:
            over.setdefault(s["lang"], set()).add(s["phase"])
    lines = []
    for r in run["slo"]:
        phases = sorted(over.get(r["lang"], ()))
        why = f"over it in {', '.join(phases)}" if phases else "within it in every phase"
        verdict = "no data" if r["pass"] is None else "pass" if r["pass"] else "FAIL"
        lines.append(f"{r['lang']:4}  SLO {verdict}: P99 {why}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="make demo", description=__doc__)
    p.add_argument("--seconds", type=float, default=120.0, help="the load's length (the fault windows scale)")
    p.add_argument("--dir", default="results/demo", help="where the stack's state and the results go")
    args = p.parse_args(argv)
    state = Path(args.dir).resolve() / time.strftime("%Y%m%dT%H%M%S")
    state.mkdir(parents=True)
    root = os.geteuid() == 0
    print(f"llmchaos demo: {args.seconds:.0f} s of per-language step load with faults; everything under {state}")
    if not root:
        print("(not root: no network namespace, so no tbf bandwidth window; the workers run on this host)")
    with (
        namespace_with_link("llmc-demo") if root else contextlib.nullcontext() as link,
        stack_up(state, args.seconds, link) as ui,
    ):
        print(f"\nLocust's web UI (tabs llmchaos: languages, llmchaos: faults): {ui}\n")
        run_id = follow(ui, args.seconds)
    run_dir = state / "stack" / "results" / run_id
    html = run_dir / "report.html"
    report = llmchaos("report", str(run_dir), "--html", str(html), capture_output=True)
    print("\n" + report.stdout, end="")
    built = llmchaos("dashboards", "build", "--out", str(state / "dashboards"), capture_output=True)
    run = json.loads((run_dir / "run.json").read_text())
    print("\nper phase:\n" + per_phase(run) + "\n\n" + verdicts(run))
    p50 = {(s["phase"], s["metric"]): s["p50"] for s in run["summaries"] if s["lang"] == "en" and s["p50"]}
    if {(p, m) for p in ("baseline", "gpu-at-660mhz") for m in ("ttft", "itl")} <= p50.keys():
        x = {m: p50["gpu-at-660mhz", m] / p50["baseline", m] for m in ("ttft", "itl")}
        j = {c["phase"]: c["j_per_token"] for c in run.get("cost", []) if c["lang"] == "en" and c["j_per_token"]}
        energy = (
            f", J/token x{j['gpu-at-660mhz'] / j['baseline']:.2f}" if {"baseline", "gpu-at-660mhz"} <= j.keys() else ""
        )
        print(f"clock lock at 660 MHz (en, p50 over baseline): TTFT x{x['ttft']:.2f}, ITL x{x['itl']:.2f}{energy}")
    failed = [w["name"] for w in run["faults"] if w.get("error")]
    print(
        f"\nresults: {run_dir} (run.json, histograms/, requests.jsonl)\nHTML report: {html}\n"
        f"dashboards: {state / 'dashboards'} (Grafana JSON); as Prometheus links: {state / 'stack/panels.md'}\n"
        f"logs: {state / 'stack/logs'}; the stack, its workers and every fault are stopped"
        + (f", the namespace {link.namespace} removed" if link else "")
    )
    if report.returncode not in (0, 1) or built.returncode != 0 or failed:
        print(
            f"demo: failed: report {report.returncode}, dashboards {built.returncode}, faults {failed}", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
