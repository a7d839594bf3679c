"""`llmchaos k8s render` of a `corrupt` or `cache_flush` window: refused in one line naming target.sim
(the fault is the server's admin API, reached by URL from a runner), as a gpu_clock window's sim
target is."""

import pytest

from faults import schedule
from faults.injectors import KINDS
from faults.k8s.cluster import Cluster
from faults.k8s.workflow import render
from llmchaos.errors import UsageError
from tests.inprocess import llmchaos
from tests.unit.faults.injectors.test_cache_flush import CACHE_FLUSH
from tests.unit.faults.injectors.test_corrupt import CORRUPT


@pytest.mark.parametrize(
    ("text", "reason"),
    [(CORRUPT, "garbage: corrupt is the reference server's"), (CACHE_FLUSH, "cold: cache_flush is the server's")],
)
def test_a_cluster_refuses_an_admin_api_window_in_one_line_naming_its_field(tmp_path, capsys, text, reason):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    plan = schedule.load(str(path), KINDS)
    with pytest.raises(UsageError) as e:
        render(plan, str(path), Cluster(run="r", selector={"app": "llm"}), plan.end())
    assert str(e.value).startswith(f"{path}:5: faults[0].target.sim: {reason}")
    r = llmchaos(capsys, "k8s", "render", str(path), "--selector", "app=llm")
    assert r.returncode == 2
    assert r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1
    assert "faults[0].target.sim" in r.stderr
    assert "Traceback" not in r.stderr
