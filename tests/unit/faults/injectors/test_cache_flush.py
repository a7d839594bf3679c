"""`cache_flush` (faults/injectors/cache_flush.py): its schedule fields, each bad one named; the flush
and its read back against stand-ins answering as the reference server and as vLLM do (the real
server: tests/integration/test_cache_flush.py); a fault host's --allow-sim."""

from __future__ import annotations

import argparse

import httpx
import pytest

from faults.host import reach
from faults.injectors import KINDS
from faults.injectors.base import InjectError, TargetGone
from faults.injectors.cache_flush import CacheFlush
from tests.unit.faults.injectors.test_corrupt import CORRUPT
from tests.unit.faults.schedules import assert_rejected, load

CACHE_FLUSH = CORRUPT.replace("name: garbage", "name: cold").replace("kind: corrupt", "kind: cache_flush")


def test_a_cache_flush_window_loads_with_or_without_params(tmp_path):
    assert KINDS["cache_flush"] is CacheFlush
    assert not CacheFlush.aimed
    s = load(tmp_path, CACHE_FLUSH)
    assert [(w.kind, w.target, w.params, w.start, w.end) for w in s.windows(10)] == [
        ("cache_flush", {"sim": "http://127.0.0.1:8000"}, {}, 1.0, 3.0)
    ]
    assert load(tmp_path, CACHE_FLUSH.replace("    params: {}\n", "")).faults[0].params == {}


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("params: {}", "params: {every: 1s}", ":8: faults[0].params.every: unknown field"),
        ('{sim: "http://127.0.0.1:8000"}', '{sim: "127.0.0.1:8000"}', ":5: faults[0].target.sim: must be the server's"),
        ('{sim: "http://127.0.0.1:8000"}', "{replica: 0}", ":5: faults[0].target.replica: unknown field"),
        ('{sim: "http://127.0.0.1:8000"}', "{token_env: T}", ":5: faults[0].target.sim: missing"),
    ],
)
def test_bad_cache_flush_fields_name_file_line_and_field(tmp_path, old, new, message):
    assert_rejected(tmp_path, CACHE_FLUSH.replace(old, new), message)


class Server:
    """The reference server's /reset_prefix_cache: GET reads the resets, POST adds one (unless
    `stuck`); `calls`: (method, path with query, authorization) each."""

    def __init__(self) -> None:
        self.resets, self.stuck = 0, False
        self.calls: list[tuple[str, str, str]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.raw_path.decode()
        self.calls.append((request.method, path, request.headers.get("authorization", "")))
        if request.method == "POST" and not self.stuck:
            self.resets += 1
        return httpx.Response(200, json={"resets": self.resets})


class VLLM:
    """vLLM's route under VLLM_SERVER_DEV_MODE=1: POST only (GET 405), answering `post` (status, body)."""

    def __init__(self, post: tuple[int, bytes] = (200, b"")) -> None:
        self.post, self.posts = post, 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method != "POST":
            return httpx.Response(405, json={"detail": "Method Not Allowed"})
        self.posts += 1
        return httpx.Response(self.post[0], content=self.post[1])


def injector(transport, target: dict | None = None) -> CacheFlush:
    c = CacheFlush(target or {"sim": "http://127.0.0.1:8000/"})
    c.admin.http = httpx.Client(transport=httpx.MockTransport(transport), headers=c.admin.http.headers)
    return c


def test_the_flush_posts_with_the_token_and_counts_once_the_server_reads_back_one_more_reset(monkeypatch):
    monkeypatch.setenv("LLMCHAOS_ADMIN_TOKEN", "s3cret")
    server = Server()
    server.resets = 2
    c = injector(server)
    assert c.probe() is None
    saved = c.save({})
    assert saved == {"resets": 2}
    c.apply("cold", {}, saved)
    assert c.read_back() == {"resets": 3}
    c.revert(saved)  # nothing to undo: no call
    assert [(m, p) for m, p, _ in server.calls] == [
        ("GET", "/reset_prefix_cache"),
        ("GET", "/reset_prefix_cache"),
        ("POST", "/reset_prefix_cache?reset_running_requests=true"),
        ("GET", "/reset_prefix_cache"),
        ("GET", "/reset_prefix_cache"),
    ]
    assert {a for _, _, a in server.calls} == {"Bearer s3cret"}
    server.stuck = True  # answers the POST, yet counts no reset
    with pytest.raises(InjectError, match="still reads back 3 resets after the flush"):
        c.apply("cold", {}, c.save({}))


def test_vllm_answers_the_post_alone_and_its_refusals_are_inject_errors():
    for body in (b"", b'{"success": true}'):
        vllm = VLLM((200, body))
        c = injector(vllm)
        assert c.probe() is None  # GET 405: the route is there
        saved = c.save({})
        assert saved == {"resets": None}
        c.apply("cold", {}, saved)
        assert vllm.posts == 1
    with pytest.raises(InjectError, match=r"could not reset its prefix cache \(success: false\)"):
        injector(VLLM((200, b'{"success": false}'))).apply("cold", {}, {"resets": None})
    with pytest.raises(InjectError, match=r"server refused \(409\): .*reset failed"):
        injector(VLLM((409, b'{"detail": "Prefix cache reset failed."}'))).apply("cold", {}, {"resets": None})
    # without VLLM_SERVER_DEV_MODE (or a reference server without --admin-token): a probe says how
    missing = injector(lambda r: httpx.Response(404, json={"detail": "Not Found"}))
    assert "VLLM_SERVER_DEV_MODE=1" in (missing.probe() or "")
    assert "--admin-token" in (missing.probe() or "")
    denied = injector(lambda r: httpx.Response(403, json={"error": {"message": "admin API disabled"}}))
    assert "refused (403)" in (denied.probe() or "")

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    gone = injector(refuse)
    assert "is gone" in (gone.probe() or "")
    with pytest.raises(TargetGone):
        gone.apply("cold", {}, {"resets": 0})


def test_a_fault_host_lets_cache_flush_hit_only_the_servers_its_allow_sim_names():
    p = argparse.ArgumentParser()
    reach.add_arguments(p)
    r = reach.from_args(p.parse_args(["--allow-sim", "http://127.0.0.1:8000/"]))
    assert r.refusal("cache_flush", {"sim": "http://127.0.0.1:8000"}) is None
    assert "(--allow-sim)" in (r.refusal("cache_flush", {"sim": "http://10.0.0.9:8000"}) or "")
