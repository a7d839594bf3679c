"""`corrupt` (faults/injectors/corrupt.py) and the admin API call it shares with gpu_clock
(faults/injectors/admin.py): its schedule fields, each bad one named; apply, revert and read back
against a stand-in answering as the reference server does (the real one: tests/integration/test_corrupt.py);
a fault host's --allow-sim."""

from __future__ import annotations

import re

import httpx
import pytest

from faults.host import reach
from faults.injectors import KINDS
from faults.injectors.admin import AdminAPI
from faults.injectors.base import InjectError, TargetGone
from faults.injectors.corrupt import Corrupt
from faults.injectors.gpu_clock import GpuClock
from tests.unit.faults.schedules import assert_rejected, load

CORRUPT = """seed: 7
faults:
  - name: garbage
    kind: corrupt
    target: {sim: "http://127.0.0.1:8000"}
    at: 1s
    duration: 2s
    params: {}
"""


def test_a_corrupt_window_loads_with_or_without_params_and_with_a_token_variable(tmp_path):
    assert KINDS["corrupt"] is Corrupt
    assert not Corrupt.aimed
    s = load(tmp_path, CORRUPT)
    assert [(w.kind, w.target, w.params, w.start, w.end) for w in s.windows(10)] == [
        ("corrupt", {"sim": "http://127.0.0.1:8000"}, {}, 1.0, 3.0)
    ]
    assert load(tmp_path, CORRUPT.replace("    params: {}\n", "")).faults[0].params == {}
    target = '{sim: "https://llm:8000", token_env: MY_TOKEN}'
    assert load(tmp_path, CORRUPT.replace('{sim: "http://127.0.0.1:8000"}', target)).faults[0].target == {
        "sim": "https://llm:8000",
        "token_env": "MY_TOKEN",
    }


BAD = [
    ("params: {}", "params: {ratio: 0.5}", ":8: faults[0].params.ratio: unknown field"),
    ("params: {}", "params: [1]", ":8: faults[0].params: must be a mapping"),
    ('{sim: "http://127.0.0.1:8000"}', '{sim: "127.0.0.1:8000"}', ":5: faults[0].target.sim: must be the server's"),
    ('{sim: "http://127.0.0.1:8000"}', "{sim: 8000}", ":5: faults[0].target.sim: must be the server's http(s) URL"),
    ('{sim: "http://127.0.0.1:8000"}', "{gpu: 0}", ":5: faults[0].target.gpu: unknown field"),
    ('{sim: "http://127.0.0.1:8000"}', "{token_env: T}", ":5: faults[0].target.sim: missing"),
    (
        '{sim: "http://127.0.0.1:8000"}',
        '{sim: "http://h:1", token_env: "A B"}',
        ":5: faults[0].target.token_env: must be an environment variable's name",
    ),
    ("    at: 1s\n", "    at: 1s\n    direction: egress\n", ":7: faults[0].direction: only netem and tbf take"),
]


@pytest.mark.parametrize(("old", "new", "message"), BAD)
def test_bad_corrupt_fields_name_file_line_and_field(tmp_path, old, new, message):
    assert_rejected(tmp_path, CORRUPT.replace(old, new), message)


class StandIn:
    """What a reference server's /admin/faults/corrupt answers (`state`), or `status`/`body` instead;
    `calls`: (method, path, authorization) each."""

    def __init__(self) -> None:
        self.state, self.status, self.body, self.stuck = False, 200, None, False
        self.calls: list[tuple[str, str, str]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls.append((request.method, request.url.path, request.headers.get("authorization", "")))
        if request.method == "PUT":
            self.state = True
        elif request.method == "DELETE" and not self.stuck:
            self.state = False
        if self.body is not None:
            return httpx.Response(self.status, content=self.body)
        return httpx.Response(self.status, json={"corrupt": self.state})


def injector(server: StandIn, target: dict | None = None) -> Corrupt:
    c = Corrupt(target or {"sim": "http://127.0.0.1:8000/"})
    c.admin.http = httpx.Client(transport=httpx.MockTransport(server), headers=c.admin.http.headers)
    return c


def test_apply_puts_revert_deletes_and_reads_back_with_the_token(monkeypatch):
    monkeypatch.setenv("LLMCHAOS_ADMIN_TOKEN", "s3cret")
    server = StandIn()
    c = injector(server)
    assert c.probe() is None
    assert c.save({}) == {"corrupt": False}
    c.apply("garbage", {}, {})
    c.confirm({})
    assert c.read_back() == {"corrupt": True}
    c.revert({"corrupt": False})
    assert c.read_back() == {"corrupt": False}
    url = "/admin/faults/corrupt"  # the base URL's own slash dropped
    assert [m for m, _, _ in server.calls] == ["GET", "GET", "PUT", "GET", "GET", "DELETE", "GET", "GET"]
    assert {(p, a) for _, p, a in server.calls} == {(url, "Bearer s3cret")}
    # a token from the variable the target names
    monkeypatch.setenv("MY_TOKEN", "other")
    c = injector(server := StandIn(), {"sim": "http://127.0.0.1:8000", "token_env": "MY_TOKEN"})
    c.read_back()
    assert server.calls[0][2] == "Bearer other"


def test_a_revert_counts_only_once_the_server_reads_back_clear():
    server = StandIn()
    c = injector(server)
    c.apply("garbage", {}, {})
    server.stuck = True  # answers DELETE, yet still corrupt
    with pytest.raises(InjectError, match="reads back corrupt: True after the revert"):
        c.revert({})
    server.stuck = False
    c.revert({})  # already clear or cleared now: reverted
    c.revert({})


def test_refusals_and_garbage_answers_are_inject_errors_and_a_server_gone_is_target_gone():
    server = StandIn()
    c = injector(server)
    server.status, server.body = 401, b'{"error": {"message": "invalid admin token"}}'
    with pytest.raises(InjectError, match=r"reference server refused \(401\): .*invalid admin token"):
        c.apply("garbage", {}, {})
    assert "refused (401)" in (c.probe() or "")
    server.status, server.body = 200, b"<html>"
    with pytest.raises(InjectError, match="something other than a JSON object"):
        c.read_back()
    server.body = b'{"locked": false}'
    with pytest.raises(InjectError, match=re.escape("without corrupt: true|false")):
        c.read_back()
    server.body = b'{"corrupt": false}'  # a PUT that does not take
    with pytest.raises(InjectError, match="reads back corrupt: False after setting it"):
        c.apply("garbage", {}, {})
    with pytest.raises(InjectError, match="reads back corrupt: False once applied"):
        c.confirm({})

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    def hang(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    c.admin.http = httpx.Client(transport=httpx.MockTransport(refuse))
    with pytest.raises(TargetGone, match=re.escape("reference server at http://127.0.0.1:8000 is gone")):
        c.revert({})
    assert "is gone" in (c.probe() or "")
    c.admin.http = httpx.Client(transport=httpx.MockTransport(hang))
    with pytest.raises(InjectError, match="unreachable: timed out") as e:
        c.revert({})
    assert not isinstance(e.value, TargetGone)


def test_gpu_clock_and_corrupt_share_one_admin_call():
    """gpu_clock's sim target goes through the same AdminAPI, naming itself 'simulated device'."""
    clock = GpuClock({"sim": "http://127.0.0.1:8000/", "token_env": "NONE_SET_HERE"})
    assert isinstance(clock.admin, AdminAPI)
    assert (clock.admin.url, clock.admin.what) == ("http://127.0.0.1:8000", "simulated device")
    assert clock.admin.http.headers["authorization"] == "Bearer "
    assert GpuClock({"gpu": 0}).admin is None
    seen = []
    clock.admin.http = httpx.Client(
        transport=httpx.MockTransport(lambda r: seen.append(r.url.path) or httpx.Response(503, text="starting"))
    )
    with pytest.raises(InjectError, match=r"simulated device refused \(503\): starting"):
        clock.read_back()
    assert seen == ["/admin/device/clocks"]


def test_a_fault_host_lets_corrupt_hit_only_the_servers_its_allow_sim_names():
    import argparse

    p = argparse.ArgumentParser()
    reach.add_arguments(p)
    r = reach.from_args(p.parse_args(["--allow-sim", "http://127.0.0.1:8000/"]))
    assert r.refusal("corrupt", {"sim": "http://127.0.0.1:8000"}) is None
    assert "(--allow-sim)" in (r.refusal("corrupt", {"sim": "http://10.0.0.9:8000"}) or "")
    r = reach.from_args(p.parse_args(["--allow-gpu", "0"]))
    assert "(--allow-sim)" in (r.refusal("corrupt", {"sim": "http://127.0.0.1:8000"}) or "")
