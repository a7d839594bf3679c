"""`llmchaos` starts at once: building its whole parser (what every `llmchaos ... --help` does, and
every command before it runs) imports no component's machinery, only argparse, the core's small
helpers and each component's registration. Which modules load is what is held, not how long they
take, so this holds on a busy machine too (benchmarks/cli_start.py times it)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.procs import ROOT

BUILD = (  # the modules that building the parser loads, beyond the interpreter's start (site, .pth files)
    "import sys\n"
    "before = set(sys.modules)\n"
    "from llmchaos.cli import build_parser\n"
    "build_parser()\n"
    "import json\n"
    "print(json.dumps({n: getattr(m, '__file__', None) for n, m in list(sys.modules.items()) if n not in before}))\n"
)
# Third-party packages the parser may load: the fault host's wire (its secret's variable).
THIRD_PARTY_ALLOWED = {"msgpack"}
# What the commands import when they run, never to build the parser.
HEAVY = (
    "asyncio",
    "llmchaos.run",
    "llmchaos.histogram",
    "llmchaos.languages",
    "llmchaos.yamlfile",
    "faults.host.agent",
    "faults.host.applier",
    "faults.injectors",
    "faults.journal",
    "faults.proxy.server",
    "faults.schedule",
    "faults.session",
    "faults.k8s.dump",
    "reference_server.batch",
    "reference_server.server",
    "reference_server.executors.sim",
    "loadtests.adapters",
    "loadtests.logs.formats",
    "loadtests.logs.lines",
    "dashboards.comparison",
    "dashboards.formats",
    "compose.services",
    "compose.stack",
    "compose.state",
)


def loaded() -> dict[str, str | None]:
    r = subprocess.run([sys.executable, "-c", BUILD], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_building_the_parser_imports_no_components_machinery():
    modules = loaded()
    third_party = {
        name.split(".")[0]
        for name, path in modules.items()
        if path and ("site-packages" in path or "dist-packages" in path)
    }
    assert third_party <= THIRD_PARTY_ALLOWED
    heavy = sorted(name for name in modules if any(name == h or name.startswith(h + ".") for h in HEAVY))
    assert heavy == []
    assert {"faults.cli", "compose.cli", "dashboards.report", "reference_server.cli"} <= set(modules)  # registered
