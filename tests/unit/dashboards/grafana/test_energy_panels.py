"""The load dashboard's energy row: the GPUs' joules per output token from dcgm-exporter's counter (mJ)
over the harness's output tokens, their power, and the cost per language and phase the run exported at
its end; the GPUs chosen by a Hostname variable, as the server dashboard chooses them."""

import json

from dashboards.grafana import build


def load() -> dict:
    return json.loads(build.rendered()["llmchaos-load.json"])


def exprs(dash: dict, title: str) -> list[str]:
    (panel,) = [p for p in dash["panels"] if p["title"] == title]
    return [t["expr"] for t in panel["targets"]]


def test_energy_per_output_token_is_the_counter_s_rate_in_joules_over_the_output_tokens_rate():
    (expr,) = exprs(load(), "Energy per output token")
    assert expr == (
        '(sum(rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{Hostname=~"$Hostname"}[$__rate_interval])) / 1000) / on () '
        '(sum(rate(llmchaos_output_tokens_sum{run_id=~"$run_id",target=~"$target"}[$__rate_interval])) > 0)'
    )  # every language's tokens: the energy is shared out by them; no token, no point (never +Inf)


def test_the_gpus_power_and_the_run_s_cost_by_language_and_phase():
    dash = load()
    assert exprs(dash, "GPU power") == ['max by (Hostname, gpu) (DCGM_FI_DEV_POWER_USAGE{Hostname=~"$Hostname"})']
    sel = '{run_id=~"$run_id",target=~"$target",lang=~"$lang",phase=~"$phase"}'
    assert exprs(dash, "J/token by language and phase") == [
        f"max by (lang, phase) (llmchaos_energy_per_token_joules{sel})"
    ]
    assert exprs(dash, "$/Mtok by language and phase") == [f"max by (lang, phase) (llmchaos_cost_per_mtok_usd{sel})"]
    (gpu,) = [v for v in dash["templating"]["list"] if v["name"] == "Hostname"]
    assert gpu["query"] == "label_values(DCGM_FI_DEV_POWER_USAGE, Hostname)"
    assert gpu["multi"]
