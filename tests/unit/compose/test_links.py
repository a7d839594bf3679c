"""Without Grafana, each panel's query as a Prometheus graph link, its variables read as every value."""

from urllib.parse import parse_qs, urlsplit

from compose import links
from compose.services import DASHBOARDS


def test_variables_read_as_every_value_and_the_rate_interval_as_given():
    expr = 'rate(x_bucket{run_id=~"$run_id",target="$target_a"}[$__rate_interval])'
    assert links.promql(expr, "20s") == 'rate(x_bucket{run_id=~".*",target=~".*"}[20s])'


def test_a_link_per_panel_query_of_the_generated_dashboards(tmp_path):
    found = list(links.panel_links(DASHBOARDS, "http://prom:9090", "20s"))
    titles = {dash for dash, _, _ in found}
    assert titles == {"llmchaos: load", "llmchaos: A/B", "llmchaos: server (vLLM and DCGM)"}
    for _, _, link in found:
        query = parse_qs(urlsplit(link).query)["g0.expr"][0]
        assert "$" not in query
    assert links.write(tmp_path / "p.md", DASHBOARDS, "http://prom:9090", "20s") == len(found)
