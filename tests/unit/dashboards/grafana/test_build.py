"""The generated dashboards: the committed JSON is what the code builds (the staleness check, and a
test that makes it fail), and a query on a metric no code defines fails the build (and a test that
makes it fail, on the real dashboards and on a new panel)."""

import json
import subprocess

import pytest

from dashboards.grafana import build, load
from dashboards.grafana import panels as p
from dashboards.grafana.names import defined
from dashboards.grafana.queries import queries
from tests.inprocess import llmchaos


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess:
    return llmchaos(capsys, "dashboards", "build", *args)


def test_the_committed_json_is_what_the_code_builds():
    assert build.stale(build.OUT, build.rendered()) == []


def test_check_fails_on_a_stale_or_missing_file_and_passes_once_built(tmp_path, capsys):
    built = cli(capsys, "--out", str(tmp_path))
    assert built.returncode == 0, built.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(build.DASHBOARDS)
    assert cli(capsys, "--out", str(tmp_path), "--check").returncode == 0
    load_json = tmp_path / "llmchaos-load.json"
    data = json.loads(load_json.read_text())
    data["panels"][1]["targets"][0]["expr"] = "up"  # an edit by hand, or code changed without a rebuild
    load_json.write_text(json.dumps(data))
    (tmp_path / "llmchaos-ab.json").unlink()
    stale = cli(capsys, "--out", str(tmp_path), "--check")
    assert stale.returncode == 1
    assert "llmchaos-load.json" in stale.stderr
    assert "llmchaos-ab.json" in stale.stderr
    assert "llmchaos-server.json" not in stale.stderr
    assert load_json.read_text() == json.dumps(data)  # --check writes nothing


def test_a_metric_no_code_defines_fails_the_build_naming_the_panel():
    known = defined() - {"vllm:num_preemptions"}
    with pytest.raises(build.BuildError) as e:
        build.rendered(known=known)
    assert "panel 'Preemptions/s' A: no code defines vllm:num_preemptions_total" in str(e.value)
    assert len(str(e.value).splitlines()) == 1


def test_a_new_panel_on_an_undefined_metric_fails_the_build():
    def bad():
        dash = load.build()
        dash.panels.append(p.percentiles("Typo", "llmchaos_tfft_seconds", load.SEL))
        dash.annotations.list.append({**p.fault_annotation(""), "expr": "DCGM_FI_DEV_SM_CLOK > 0"})
        return dash

    with pytest.raises(build.BuildError) as e:
        build.rendered({"x.json": bad})
    lines = str(e.value).splitlines()
    assert len(lines) == 4, lines  # three percentiles and the annotation
    assert all("llmchaos_tfft_seconds_bucket" in line for line in lines[:3])
    assert "annotation 'Fault windows': no code defines DCGM_FI_DEV_SM_CLOK" in lines[3]


def test_the_names_are_read_from_the_code_that_exports_them():
    names = defined()
    assert {"llmchaos_ttft_seconds", "llmchaos_requests_total", "llmchaos_slo_met_total"} <= names
    assert {"llmchaos_generator_loop_lag_seconds", "vllm:num_requests_running", "DCGM_FI_DEV_SM_CLOCK"} <= names
    assert "llmchaos_arrivals" not in names  # a Locust message name elsewhere, not a metric


def test_every_query_of_every_dashboard_is_listed():
    found = [q for t in build.rendered().values() for q in queries(json.loads(t))]
    wheres = {(q.dashboard, q.where) for q in found}
    assert ("llmchaos: load", "annotation 'Fault windows'") in wheres
    assert ("llmchaos: A/B", "variable target_b") in wheres
    assert ("llmchaos: server (vLLM and DCGM)", "panel 'SM clock' A") in wheres
    assert all(q.expr for q in found)
