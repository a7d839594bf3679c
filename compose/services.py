"""What `llmchaos stack up` starts, each by its command: the reference server(s), the SSE proxy in
front of the first, a Pushgateway, Prometheus scraping them all, a Locust master with its web UI, its
workers, and Grafana with the provisioned dashboards when a Grafana binary is installed."""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from compose.state import Service
from llmchaos.procs import free_port

ROOT = Path(__file__).resolve().parents[1]
LOCUSTFILE = str(ROOT / "loadtests" / "locustfile.py")
DASHBOARDS = ROOT / "dashboards" / "grafana" / "json"
PROVISIONING = ROOT / "compose" / "grafana" / "provisioning"
LLMCHAOS = [sys.executable, "-m", "llmchaos.cli"]
LOCUST = [sys.executable, "-m", "locust", "-f", LOCUSTFILE]


@dataclass(frozen=True)
class Plan:
    bind: str  # the address every listener binds (loopback by default)
    servers: int
    workers: int
    langs: str
    scrape_interval_s: int
    engine_args: tuple[str, ...]
    master_args: tuple[str, ...] = ()  # more Locust options for the master (a schedule, a shape, --autostart)
    server_port: int = 0  # the first server's and the proxy's ports (0: any free one), for a schedule
    proxy_port: int = 0  # written before `up` that names them

    def url(self, port: int) -> str:
        return f"http://{self.bind}:{port}"

    @property
    def listen(self) -> str:
        """Where the servers and the proxy listen: on the loopback too when bound elsewhere, since
        their admin and control APIs (clock and SSE faults) answer loopback clients only."""
        return self.bind if self.bind.startswith("127.") else "0.0.0.0"


def binary(*names: str) -> str | None:
    return next((p for n in names if (p := shutil.which(n))), None)


def servers(plan: Plan) -> list[Service]:
    out = []
    for i in range(plan.servers):
        port = plan.server_port if i == 0 and plan.server_port else free_port(plan.bind)
        cmd = [*LLMCHAOS, "serve", "--engine", "sim", "--host", plan.listen, "--port", str(port), *plan.engine_args]
        out.append(Service(f"server-{i + 1}", cmd, plan.url(port), plan.url(port) + "/healthz"))
    return out


def proxy(plan: Plan, upstream: str) -> Service:
    port = plan.proxy_port or free_port(plan.bind)
    cmd = [*LLMCHAOS, "proxy", "--listen", f"{plan.listen}:{port}", "--upstream", upstream]
    return Service("proxy", cmd, plan.url(port), plan.url(port) + "/healthz")  # relayed to the server


def pushgateway(plan: Plan, binary_path: str) -> Service:
    port = free_port(plan.bind)
    cmd = [binary_path, f"--web.listen-address={plan.bind}:{port}", "--persistence.file=", "--log.level=warn"]
    return Service("pushgateway", cmd, plan.url(port), plan.url(port) + "/-/ready")


def prometheus(plan: Plan, binary_path: str, state: Path, scrape: dict[str, list[str]]) -> Service:
    """Prometheus with its own config and data under the state dir, scraping each job's targets
    (`pushgateway` keeps the pushed labels)."""
    port = free_port(plan.bind)
    interval = f"{plan.scrape_interval_s}s"
    config = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "scrape_configs": [
            {"job_name": job, "honor_labels": job == "pushgateway", "static_configs": [{"targets": targets}]}
            for job, targets in scrape.items()
        ],
    }
    home = state / "prometheus"
    home.mkdir(parents=True, exist_ok=True)
    (home / "prometheus.yml").write_text(yaml.safe_dump(config))
    cmd = [
        binary_path,
        f"--config.file={home / 'prometheus.yml'}",
        f"--storage.tsdb.path={home / 'data'}",
        f"--web.listen-address={plan.bind}:{port}",
        f"--web.console.templates={home}",
        f"--web.console.libraries={home}",
        "--log.level=warn",
    ]
    return Service("prometheus", cmd, plan.url(port), plan.url(port) + "/-/ready")


def master(plan: Plan, host: str, gateway: str, state: Path) -> tuple[Service, int, int]:
    """The Locust master with its web UI (start a test there), exporting live and pushing; (it, its
    workers' port, its exporter's port)."""
    web, bus, exporter = free_port(plan.bind), free_port(plan.bind), free_port()
    cmd = [
        *LOCUST,
        *("--master", "--master-bind-host", plan.bind, "--master-bind-port", str(bus)),
        *("--web-host", plan.bind, "--web-port", str(web), "--host", host, "--langs", plan.langs),
        *("--prometheus-port", str(exporter), "--push-gateway", gateway, "--results-dir", str(state / "results")),
        *plan.master_args,
    ]
    return Service("locust-master", cmd, plan.url(web), plan.url(web) + "/"), bus, exporter


def worker(index: int, master_host: str, master_port: int) -> Service:
    cmd = [*LOCUST, "--worker", "--master-host", master_host, "--master-port", str(master_port)]
    return Service(f"locust-worker-{index}", cmd)


def grafana(plan: Plan, binary_path: str, state: Path, prometheus_url: str) -> Service:
    """Grafana with our provisioning (a copy under the state dir), anonymous viewers, its data there."""
    port = free_port(plan.bind)
    home = state / "grafana"
    shutil.copytree(PROVISIONING, home / "provisioning", dirs_exist_ok=True)
    env = {
        "GF_PATHS_PROVISIONING": str(home / "provisioning"),
        "GF_PATHS_DATA": str(home / "data"),
        "GF_PATHS_LOGS": str(home / "logs"),
        "GF_SERVER_HTTP_ADDR": plan.bind,
        "GF_SERVER_HTTP_PORT": str(port),
        "GF_AUTH_ANONYMOUS_ENABLED": "true",
        "PROMETHEUS_URL": prometheus_url,
        "LLMCHAOS_DASHBOARDS": str(DASHBOARDS),
    }
    homepath = next((p for p in ("/usr/share/grafana", "/usr/local/share/grafana") if Path(p).is_dir()), None)
    cmd = [binary_path, *(["server"] if Path(binary_path).name == "grafana" else [])]
    cmd += ["--homepath", homepath] if homepath else []
    return Service("grafana", cmd, plan.url(port), plan.url(port) + "/api/health", env)
