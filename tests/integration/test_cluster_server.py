"""`llmchaos serve --replicas N` and `--disaggregate P:D`, real processes on loopback: the router
names the replica that served, fails over before a head, cuts a stream its replica lost, takes a
paused one out and puts it back; the prefix policy keeps a prompt's prefix where it was cached;
/metrics holds the router's counts and every replica's series; a prefill engine's KV reaches the
decode engine over TCP, byte-counted on both sides, and each --kv-failure does what it says."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.procs import ROOT, Server, free_port, serve

TOKEN = "cluster-secret"
AUTH = {"authorization": f"Bearer {TOKEN}"}
MODEL = "llmchaos-sim-8b"


def chat(text: str, max_tokens: int = 4, stream: bool = True) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens, "stream": stream}


def ask(server: Server, body: dict) -> httpx.Response:
    r = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=60)
    r.read()
    return r


def admin(server: Server, method: str, path: str, body: dict | None = None) -> dict:
    r = httpx.request(method, server.url + path, json=body, headers=AUTH, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def until(server: Server, i: int, state: str, healthy: bool | None = None, within_s: float = 30.0) -> dict:
    deadline = time.monotonic() + within_s
    while True:
        entry = admin(server, "GET", f"/admin/replicas/{i}")
        if entry["state"] == state and healthy in (None, entry["healthy"]):
            return entry
        assert time.monotonic() < deadline, entry
        time.sleep(0.1)


def series(server: Server, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels`."""
    total = 0.0
    for line in server.scrape().splitlines():
        key, _, value = line.rpartition(" ")
        if key.split("{")[0] == name and all(f'{k}="{v}"' in key for k, v in labels.items()):
            total += float(value)
    return total


@pytest.fixture(scope="module")
def pair():
    with serve("--replicas", "2", "--router", "round-robin", "--admin-token", TOKEN, "--pacer-rate", "20") as s:
        yield s


def test_round_robin_names_each_replica_and_counts_it(pair):
    before = {i: series(pair, "llmchaos_router_requests_total", replica=str(i), result="routed") for i in (0, 1)}
    served = [ask(pair, chat(f"question {n}")).headers["x-llmchaos-replica"] for n in range(4)]
    assert sorted(served) == ["0", "0", "1", "1"]
    for i in (0, 1):
        assert series(pair, "llmchaos_router_requests_total", replica=str(i), result="routed") == before[i] + 2
        assert series(pair, "llmchaos_router_replica_up", replica=str(i)) == 1
        # each replica's own series, labelled with it: its requests, as its engine counted them
        assert series(pair, "vllm:request_success_total", replica=str(i)) >= 2
    # the whole page parses, and each engine's simulated GPU is its own (dcgm-exporter's names, as written)
    families = {f.name: f for f in text_string_to_metric_families(pair.scrape())}
    energy = families["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"].samples
    assert sorted((s.labels["replica"], s.labels["UUID"]) for s in energy) == [
        ("0", "GPU-sim-vllm-llama3-8b-h100-0"),
        ("1", "GPU-sim-vllm-llama3-8b-h100-1"),
    ]


def test_a_killed_replica_is_failed_over_cut_mid_stream_and_started_again(pair):
    """A stream on the killed replica ends without its terminator; the next request that the
    router sends there (before a health check) goes to the other, saying so; undone, it comes back."""
    body = chat("a long answer", max_tokens=40)  # 2 s at 20 tokens a second
    with httpx.stream("POST", pair.url + "/v1/chat/completions", json=body, timeout=60) as r:
        victim = r.headers["x-llmchaos-replica"]
        lines = r.iter_lines()
        assert next(lines).startswith("data: ")
        assert admin(pair, "PUT", f"/admin/replicas/{victim}", {"action": "kill"})["state"] == "killed"
        with pytest.raises(httpx.RemoteProtocolError):
            for _ in lines:
                pass
    assert series(pair, "llmchaos_router_requests_total", replica=victim, result="failed") >= 1
    other = str(1 - int(victim))
    answers = [ask(pair, chat("after the kill")) for _ in range(3)]
    assert {a.status_code for a in answers} == {200}
    assert {a.headers["x-llmchaos-replica"] for a in answers} == {other}
    entry = admin(pair, "DELETE", f"/admin/replicas/{victim}")
    assert entry["state"] == "starting"
    until(pair, int(victim), "up", healthy=True)
    assert {ask(pair, chat(f"back {n}")).headers["x-llmchaos-replica"] for n in range(4)} == {"0", "1"}


def test_a_paused_replica_is_found_out_and_a_dropped_one_left_alone(pair):
    admin(pair, "PUT", "/admin/replicas/1", {"action": "pause"})
    until(pair, 1, "paused", healthy=False)  # its health check timed out
    assert {ask(pair, chat(f"paused {n}")).headers["x-llmchaos-replica"] for n in range(3)} == {"0"}
    admin(pair, "DELETE", "/admin/replicas/1")
    until(pair, 1, "up", healthy=True)
    entry = admin(pair, "PUT", "/admin/router/pool/0")
    assert (entry["in_pool"], entry["state"]) == (False, "up")
    assert {ask(pair, chat(f"dropped {n}")).headers["x-llmchaos-replica"] for n in range(3)} == {"1"}
    assert admin(pair, "DELETE", "/admin/router/pool/0")["in_pool"] is True


def test_the_device_clocks_are_set_on_every_replica(pair):
    locked = admin(pair, "PUT", "/admin/device/clocks", {"graphics_mhz": 900})
    assert {r["graphics_mhz"] for r in locked["replicas"].values()} == {900}
    assert set(locked["replicas"]) == {"0", "1"}
    reset = admin(pair, "DELETE", "/admin/device/clocks")
    assert not any(r["locked"] for r in reset["replicas"].values())
    bad = httpx.put(pair.url + "/admin/device/clocks", json={"graphics_mhz": 5}, headers=AUTH)
    assert bad.status_code == 400, bad.text  # the engine's own refusal, as it gave it


def test_the_admin_api_refuses_what_it_cannot_do(pair):
    assert httpx.get(pair.url + "/admin/replicas").status_code == 401
    assert httpx.get(pair.url + "/admin/replicas/7", headers=AUTH).status_code == 404
    r = httpx.put(pair.url + "/admin/replicas/0", json={"action": "explode"}, headers=AUTH)
    assert r.status_code == 400
    assert "action" in r.json()["error"]["message"]
    r = httpx.post(pair.url + "/admin/router/holder", json={"prompt": "x" * 100}, headers=AUTH)
    assert r.status_code == 404  # round-robin holds no prefixes
    assert httpx.get(pair.url + "/admin/kv_link", headers=AUTH).status_code == 503  # no prefill engine


def test_the_prefix_router_keeps_a_conversation_where_it_is_cached_and_forgets_a_dead_replica():
    history = "You are a helpful assistant who answers in one short sentence. " * 8
    with serve("--replicas", "2", "--router", "prefix", "--admin-token", TOKEN) as s:
        first = ask(s, chat(history + "Turn one.")).headers["x-llmchaos-replica"]
        turns = [ask(s, chat(history + f"Turn {n}.")).headers["x-llmchaos-replica"] for n in range(2, 6)]
        assert set(turns) == {first}
        assert admin(s, "POST", "/admin/router/holder", {"prompt": history})["replica"] == int(first)
        hits = series(s, "vllm:prefix_cache_hits_total", replica=first)
        assert hits >= 4 * (len(history) // 8)  # the history's blocks, from the cache, each turn (~1 token / 8 chars)
        admin(s, "PUT", f"/admin/replicas/{first}", {"action": "kill"})
        assert admin(s, "POST", "/admin/router/holder", {"prompt": history})["replica"] is None
        other = str(1 - int(first))
        cold = series(s, "vllm:prefix_cache_queries_total", replica=other)
        assert ask(s, chat(history + "Turn six.")).headers["x-llmchaos-replica"] == other
        assert series(s, "vllm:prefix_cache_queries_total", replica=other) > cold
        r = httpx.post(s.url + "/admin/router/holder", json={"prompt": "short"}, headers=AUTH)
        assert r.status_code == 400


def kv_bytes(s: Server, role: str) -> float:
    return series(s, "llmchaos_kv_transfer_bytes_total", role=role)


@pytest.mark.parametrize("mode", ["fail-fast", "recompute", "hang"])
def test_a_partitioned_kv_link_fails_as_the_decode_engine_is_told(mode):
    cluster = ("--disaggregate", "1:1", "--kv-failure", mode, "--kv-timeout", "1.5", "--kv-bytes-scale", "0.01")
    with serve(*cluster, "--kv-stall", "0.6", "--admin-token", TOKEN) as s:
        ok = ask(s, chat("a prompt of some length " * 10))
        assert ok.status_code == 200
        assert (ok.headers["x-llmchaos-kv"], ok.headers["x-llmchaos-prefill-replica"]) == ("pulled", "0")
        assert ok.headers["x-llmchaos-replica"] == "1"
        tokens = series(s, "vllm:prompt_tokens_total", replica="1")
        assert kv_bytes(s, "prefill") == kv_bytes(s, "decode") == round(tokens * 131072 * 0.01)
        # decode computed the last prompt token alone: the rest came over the link
        assert series(s, "vllm:prompt_tokens_by_source_total", replica="1", source="external_kv_transfer") == tokens - 1
        admin(s, "PUT", "/admin/kv_link", {"action": "partition"})
        start = time.monotonic()
        with httpx.stream("POST", s.url + "/v1/chat/completions", json=chat("another prompt " * 10), timeout=60) as r:
            head_s = time.monotonic() - start
            r.read()
        want = {"fail-fast": (503, "failed"), "recompute": (200, "recomputed"), "hang": (504, "timed_out")}[mode]
        assert (r.status_code, r.headers["x-llmchaos-kv"]) == want, r.text
        # no head at all until decode gave the KV up: after --kv-stall without a byte, or the KV timeout
        assert head_s >= (1.5 if mode == "hang" else 0.6), head_s
        assert series(s, "llmchaos_kv_transfers_total", result=want[1]) == 1
        assert admin(s, "DELETE", "/admin/kv_link")["action"] is None
        assert ask(s, chat("after the partition " * 10)).headers["x-llmchaos-kv"] == "pulled"


def test_the_kv_link_reads_back_each_fault_and_refuses_a_bad_one():
    with serve("--disaggregate", "1:1", "--kv-bytes-scale", "0.01", "--admin-token", TOKEN) as s:
        assert admin(s, "PUT", "/admin/kv_link", {"action": "delay", "delay_ms": 150})["delay_ms"] == 150
        start = time.monotonic()
        assert ask(s, chat("delayed " * 20)).headers["x-llmchaos-kv"] == "pulled"
        assert time.monotonic() - start > 0.15
        assert admin(s, "PUT", "/admin/kv_link", {"action": "loss", "loss_pct": 30})["loss_pct"] == 30
        assert admin(s, "GET", "/admin/kv_link")["action"] == "loss"
        bad = httpx.put(s.url + "/admin/kv_link", json={"action": "delay"}, headers=AUTH)
        assert bad.status_code == 400
        assert "delay_ms" in bad.text
        assert admin(s, "GET", "/admin/kv_link")["action"] == "loss"  # a refusal changes nothing


@pytest.mark.parametrize(
    ("flags", "field"),
    [
        (("--replicas", "2", "--disaggregate", "1:1"), "--disaggregate"),
        (("--router", "prefix"), "--router"),
        (("--kv-failure", "hang"), "--kv-failure"),
        (("--kv-stall", "1"), "--kv-stall"),
        (("--disaggregate", "1:1", "--kv-stall", "0"), "--kv-stall"),
        (("--disaggregate", "1:1", "--kv-bytes-scale", "2"), "--kv-bytes-scale"),
        (("--replicas", "1000"), "--replicas"),
        (("--disaggregate", "40:40"), "--disaggregate"),
    ],
)
def test_contradictory_cluster_flags_are_one_line_and_exit_2(flags, field):
    proc = subprocess.run(
        [sys.executable, "-m", "llmchaos.cli", "serve", "--port", "1", *flags],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert field in line, line


def test_stopping_the_router_stops_its_engines():
    with serve("--replicas", "2", "--admin-token", TOKEN) as s:
        pids = [r["pid"] for r in admin(s, "GET", "/admin/replicas")["replicas"]]
        proc = s.proc
    assert proc.poll() is not None
    for pid in pids:
        deadline = time.monotonic() + 10
        while _alive(pid):
            assert time.monotonic() < deadline, f"engine {pid} outlived its router"
            time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_both_apis_go_through_a_disaggregated_cluster_and_a_clients_kv_headers_are_dropped():
    with serve("--disaggregate", "1:1", "--kv-bytes-scale", "0.01", "--admin-token", TOKEN) as s:
        gemini = {
            "contents": [{"role": "user", "parts": [{"text": "hello from gemini " * 10}]}],
            "generationConfig": {"maxOutputTokens": 4},
        }
        path = f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"
        r = httpx.post(s.url + path, json=gemini, timeout=60)
        assert (r.status_code, r.headers["x-llmchaos-kv"]) == (200, "pulled"), r.text
        assert r.text.startswith("data: ")
        r = httpx.post(s.url + f"/v1beta/models/{MODEL}:generateContent", json=gemini, timeout=60)
        assert (r.status_code, r.headers["x-llmchaos-kv"]) == (200, "pulled"), r.text
        assert r.json()["candidates"][0]["content"]["parts"][0]["text"]
        whole = ask(s, chat("not streamed " * 10, stream=False))
        assert whole.json()["choices"][0]["message"]["content"]
        assert whole.headers["x-llmchaos-kv"] == "pulled"
        assert httpx.get(s.url + "/v1/models", timeout=30).json()["data"][0]["id"] == MODEL
        # a client cannot aim decode at a host of its choosing: the router's own header wins
        aimed = httpx.post(
            s.url + "/v1/chat/completions",
            json=chat("aimed " * 10),
            headers={"x-llmchaos-kv-from": "10.0.0.1:9/x", "x-llmchaos-kv-transfer": "mine"},
            timeout=60,
        )
        assert (aimed.status_code, aimed.headers["x-llmchaos-kv"]) == (200, "pulled"), aimed.text
        bad = httpx.post(s.url + "/v1/chat/completions", json={"model": MODEL}, timeout=60)
        assert bad.status_code == 400  # the prompt's own refusal, from prefill, passed back
        assert bad.headers["x-llmchaos-prefill-replica"] == "0"


def test_an_engine_that_cannot_start_ends_the_router_saying_which():
    flags = ("--port", str(free_port()), "--replicas", "2", "--engine", "torch", "--model", "/nonexistent")
    proc = subprocess.run(
        [sys.executable, "-m", "llmchaos.cli", "serve", *flags],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert "--model: not tiny, small or a model directory" in proc.stderr  # the engine's own line
    assert proc.stderr.strip().splitlines()[-1].endswith("exited with status 2 before it was up")


def test_a_router_whose_port_is_taken_starts_no_engine():
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        proc = subprocess.run(
            [sys.executable, "-m", "llmchaos.cli", "serve", "--port", port, "--replicas", "2"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
        )
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()  # no engine started, so none said anything
    assert line.startswith(f"llmchaos: error: --port: cannot listen on 127.0.0.1:{port}"), line


def test_a_router_killed_by_sigkill_takes_its_engines_with_it():
    with serve("--replicas", "2", "--admin-token", TOKEN) as s:
        pids = [r["pid"] for r in admin(s, "GET", "/admin/replicas")["replicas"]]
        s.proc.kill()
        s.proc.wait()
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in pids):
            assert time.monotonic() < deadline, "an engine outlived its router's SIGKILL"
            time.sleep(0.05)
