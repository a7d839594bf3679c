"""The router's merge of its replicas' expositions: names as the engines wrote them, each family
once, every sample labelled with its replica, and the whole parseable."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from reference_server.cluster.metrics import merged, with_replica
from reference_server.cluster.supervisor import Replica

ENGINE = """# HELP vllm:prompt_tokens_total Prompt tokens.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} VALUE
# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).
# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{UUID="GPU-sim-p-I",gpu="0"} VALUE
# DCGM_FI_DEV_* gauges absent: a comment
untyped VALUE
"""


def test_each_family_once_every_sample_its_replicas_names_as_written():
    rs = [Replica(i, "mixed", [], port=9000 + i) for i in (0, 1)]
    text = merged((r, ENGINE.replace("VALUE", str(10 + r.index)).replace("-I", f"-{r.index}")) for r in rs)
    lines = text.splitlines()
    assert lines.count("# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter") == 1
    assert 'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{replica="1",UUID="GPU-sim-p-1",gpu="0"} 11' in lines
    assert 'vllm:prompt_tokens_total{replica="0",engine="0",model_name="m"} 10' in lines
    assert 'untyped{replica="1"} 11' in lines
    assert not any("absent" in line for line in lines)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    energy = families["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"]
    assert [(s.labels["replica"], s.value) for s in energy.samples] == [("0", 10.0), ("1", 11.0)]


def test_the_replica_label_goes_into_any_label_set():
    assert with_replica("a 1", 3) == 'a{replica="3"} 1'
    assert with_replica("a{} 1", 3) == 'a{replica="3"} 1'
    assert with_replica('a{b="x,y}"} 1 123', 3) == 'a{replica="3",b="x,y}"} 1 123'
