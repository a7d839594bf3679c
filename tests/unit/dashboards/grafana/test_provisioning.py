"""Grafana's provisioning under compose/: the datasource the dashboards' variable picks, and a file
provider for the generated JSON."""

import json
from pathlib import Path

import yaml

from dashboards.grafana import build
from tests.procs import ROOT

PROVISIONING = Path(ROOT) / "compose/grafana/provisioning"


def read(rel: str) -> dict:
    return yaml.safe_load((PROVISIONING / rel).read_text())


def test_the_provisioned_datasource_is_the_type_every_dashboard_asks_for():
    (ds,) = read("datasources/prometheus.yml")["datasources"]
    assert (ds["type"], ds["url"], ds["isDefault"]) == ("prometheus", "$PROMETHEUS_URL", True)
    for text in build.rendered().values():
        variables = json.loads(text)["templating"]["list"]
        assert {"name": "datasource", "type": "datasource", "query": ds["type"]}.items() <= variables[0].items()


def test_a_file_provider_serves_the_generated_json():
    (provider,) = read("dashboards/llmchaos.yml")["providers"]
    assert provider["type"] == "file"
    assert provider["options"]["path"] == "$LLMCHAOS_DASHBOARDS"
