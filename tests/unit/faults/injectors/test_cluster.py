"""The cluster's kinds, `replica`, `kv_link` and `router` (faults/injectors/replica.py, kv_link.py,
router.py): their schedule fields, each bad one named; the overlap check (one replica of one router
is one target); the dry run; and save, apply, confirm, revert and the journal against a router's
admin API played on loopback as the contract gives it (tests/servers/router_admin.py), with the
reads that fail: a replica that never comes back up, a router gone."""

from __future__ import annotations

import argparse
import time

import pytest

from faults.host import reach
from faults.injectors import KINDS
from faults.injectors import replica as replica_module
from faults.injectors.base import InjectError, TargetGone
from faults.injectors.kv_link import KvLink
from faults.injectors.replica import Replica
from faults.injectors.router import RouterDrop
from faults.journal import Journal
from faults.recover import recover
from faults.runner import Runner
from tests.inprocess import llmchaos
from tests.servers.router_admin import TOKEN, RouterAdmin, serving
from tests.unit.faults.schedules import assert_rejected, load

URL = "http://127.0.0.1:8000"
WINDOW = (
    "  - name: {name}\n    kind: {kind}\n    target: {target}\n    at: {at}\n    duration: 2s\n    params: {params}\n"
)
PROMPT = "You are a helpful assistant. Answer in German."  # over one block


def schedule(*windows: tuple[str, str, str, str]) -> str:
    """A schedule of (kind, target, params, at) windows, named w0, w1, ..."""
    return "seed: 7\nfaults:\n" + "".join(
        WINDOW.format(name=f"w{i}", kind=kind, target=target, params=params, at=at)
        for i, (kind, target, params, at) in enumerate(windows)
    )


KILL = ("replica", f'{{sim: "{URL}", replica: 0}}', "{action: kill}", "1s")
PARTITION = ("kv_link", f'{{sim: "{URL}"}}', "{action: partition}", "1s")
DROP = ("router", f'{{sim: "{URL}", replica: 1}}', "{}", "1s")


def test_the_three_kinds_load_with_their_targets_and_params(tmp_path):
    assert (KINDS["replica"], KINDS["kv_link"], KINDS["router"]) == (Replica, KvLink, RouterDrop)
    assert [k.aimed for k in (Replica, KvLink, RouterDrop)] == [False] * 3
    s = load(
        tmp_path,
        schedule(
            KILL,
            ("replica", f'{{sim: "{URL}", holding: "{PROMPT}", token_env: T}}', "{action: pause}", "5s"),
            PARTITION,
            ("kv_link", f'{{sim: "{URL}"}}', "{action: delay, delay: 200ms}", "5s"),
            ("kv_link", f'{{sim: "{URL}"}}', "{action: loss, loss: 20%}", "9s"),
            DROP,
            ("router", f'{{sim: "{URL}", replica: 0}}', "{action: drop}", "5s"),
        ),
    )
    assert [(f.kind, f.params) for f in s.faults] == [
        ("replica", {"action": "kill"}),
        ("replica", {"action": "pause"}),
        ("kv_link", {"action": "partition"}),
        ("kv_link", {"action": "delay", "delay": "200ms"}),
        ("kv_link", {"action": "loss", "loss": "20%"}),
        ("router", {}),
        ("router", {"action": "drop"}),
    ]
    assert s.faults[1].target == {"sim": URL, "holding": PROMPT, "token_env": "T"}


T0 = f'{{sim: "{URL}", replica: 0}}'
BAD = [
    (KILL, T0, f'{{sim: "{URL}", replica: -1}}', ":5: faults[0].target.replica: must be a replica's index, 0 to 1023"),
    (KILL, T0, f'{{sim: "{URL}", replica: 1024}}', ":5: faults[0].target.replica: must be a replica's index"),
    (KILL, T0, f'{{sim: "{URL}", replica: "0"}}', ":5: faults[0].target.replica: must be a replica's index"),
    (KILL, T0, f'{{sim: "{URL}", replica: true}}', ":5: faults[0].target.replica: must be a string or an integer"),
    (KILL, T0, f'{{sim: "{URL}", replica: 0, holding: "{PROMPT}"}}', ":5: faults[0].target: give exactly one of"),
    (KILL, T0, f'{{sim: "{URL}"}}', ":5: faults[0].target: give exactly one of replica (an index) or holding"),
    (KILL, T0, f'{{sim: "{URL}", holding: " "}}', ":5: faults[0].target.holding: must be the text of a prompt"),
    (KILL, T0, "{replica: 0}", ":5: faults[0].target.sim: missing"),
    (KILL, T0, '{sim: "127.0.0.1:8000", replica: 0}', ":5: faults[0].target.sim: must be the server's http(s) URL"),
    (KILL, T0, f'{{sim: "{URL}", replica: 0, gpu: 0}}', ":5: faults[0].target.gpu: unknown field"),
    (KILL, "{action: kill}", "{action: explode}", ":8: faults[0].params.action: must be one of kill, pause, restart"),
    (KILL, "{action: kill}", "{action: [kill]}", ":8: faults[0].params.action: must be one of kill, pause, restart"),
    (KILL, "{action: kill}", "{}", ":8: faults[0].params.action: missing"),
    (KILL, "{action: kill}", "{action: kill, signal: 9}", ":8: faults[0].params.signal: unknown field"),
    (PARTITION, "{action: partition}", "{action: delay}", ":8: faults[0].params.delay: missing (action: delay needs"),
    (PARTITION, "{action: partition}", "{action: loss, loss: 0}", ":8: faults[0].params.loss: must be positive"),
    (PARTITION, "{action: partition}", "{action: loss, loss: 0%}", ":8: faults[0].params.loss: must be positive"),
    (PARTITION, "{action: partition}", "{action: loss, loss: 101%}", ":8: faults[0].params.loss: at most 100%"),
    (PARTITION, "{action: partition}", "{action: delay, delay: 1 week}", ":8: faults[0].params.delay: expected a time"),
    (PARTITION, "{action: partition}", "{action: loss, delay: 1ms}", ":8: faults[0].params.delay: goes with action"),
    (PARTITION, "{action: partition}", "{action: jitter}", ":8: faults[0].params.action: must be one of delay, loss"),
    (PARTITION, "{action: partition}", "{action: partition, rate: 1}", ":8: faults[0].params.rate: unknown field"),
    (PARTITION, f'{{sim: "{URL}"}}', f'{{sim: "{URL}", replica: 0}}', ":5: faults[0].target.replica: unknown field"),
    (DROP, "{}", "{action: kill}", ":8: faults[0].params.action: must be drop (or left out), got 'kill'"),
    (DROP, "{}", "{action: drop, for: 1s}", ":8: faults[0].params.for: unknown field"),
    (DROP, f'{{sim: "{URL}", replica: 1}}', f'{{sim: "{URL}"}}', ":5: faults[0].target.replica: missing"),
    (
        DROP,
        f'{{sim: "{URL}", replica: 1}}',
        f'{{sim: "{URL}", replica: 1.5}}',
        ":5: faults[0].target.replica: must be a",
    ),
]


@pytest.mark.parametrize(("window", "old", "new", "message"), BAD)
def test_bad_fields_name_file_line_and_field(tmp_path, window, old, new, message):
    assert_rejected(tmp_path, schedule(window).replace(old, new, 1), message)


def test_two_windows_on_one_replica_of_one_router_overlap_and_other_replicas_do_not(tmp_path):
    def holding(at: str) -> tuple[str, str, str, str]:
        return ("replica", f'{{sim: "{URL}", holding: "{PROMPT}"}}', "{action: pause}", at)

    other = ("replica", f'{{sim: "{URL}/", replica: 0}}', "{action: pause}", "2s")  # the same router
    assert_rejected(tmp_path, schedule(KILL, other), ":9: faults[1]: overlaps")
    assert_rejected(tmp_path, schedule(KILL, holding("2s")), ":9: faults[1]: overlaps")  # may be replica 0
    assert_rejected(tmp_path, schedule(holding("1s"), holding("2s")), ":9: faults[1]: overlaps")
    kv = ("kv_link", f'{{sim: "{URL}/"}}', "{action: loss, loss: 1%}", "2s")
    assert_rejected(tmp_path, schedule(PARTITION, kv), ":9: faults[1]: overlaps")
    drop = ("router", f'{{sim: "{URL}/", replica: 1}}', "{}", "2s")
    assert_rejected(tmp_path, schedule(DROP, drop), ":9: faults[1]: overlaps")
    fine = [
        schedule(KILL, (other[0], other[1].replace("replica: 0", "replica: 1"), *other[2:])),  # another replica
        schedule(KILL, (other[0], '{sim: "http://127.0.0.1:8001", replica: 0}', *other[2:])),  # another router
        schedule(KILL, holding("3s")),  # after it
        schedule(KILL, (DROP[0], T0, *DROP[2:])),  # another kind: a killed replica can be out of the pool too
        schedule(holding("1s"), holding("3s")),
    ]
    for text in fine:
        assert len(load(tmp_path, text).faults) == 2


def test_dry_run_prints_each_window_with_its_target_and_params(tmp_path, capsys):
    p = tmp_path / "s.yaml"
    p.write_text(schedule(KILL, PARTITION, DROP))
    r = llmchaos(capsys, "faults", "run", str(p), "--dry-run")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("seed 7; 3 windows")
    assert lines[1].split()[3:] == [
        "w0",
        "replica",
        '{"sim":',
        f'"{URL}",',
        '"replica":',
        "0}",
        '{"action":',
        '"kill"}',
    ]
    assert lines[2].split()[3:6] == ["w1", "kv_link", '{"sim":']
    assert lines[3].split()[3:] == ["w2", "router", '{"sim":', f'"{URL}",', '"replica":', "1}", "{}"]


# -- against the router's admin API --


@pytest.fixture
def router(monkeypatch):
    monkeypatch.setenv("LLMCHAOS_ADMIN_TOKEN", TOKEN)
    with serving(RouterAdmin(replicas=3, prefill=1)) as admin:
        yield admin


def paths(admin: RouterAdmin) -> list[str]:
    return [f"{m} {p}" + (f" {b}" if b is not None else "") for m, p, b in admin.calls]


@pytest.mark.parametrize(("action", "state"), [("kill", "killed"), ("pause", "paused")])
def test_a_replica_killed_or_paused_reads_back_so_and_comes_back_up_on_the_revert(router, action, state):
    r = Replica({"sim": router.url + "/", "replica": 1})
    assert r.probe() is None
    saved = r.save({"action": action})
    assert saved == {"replica": 1, "state": "up", "pid": 1001}
    r.apply("w", {"action": action}, saved)
    r.confirm({"action": action})
    assert router.replicas[1]["state"] == state
    assert [e["state"] for e in r.read_back()["replicas"]] == ["up", state, "up"]
    router.calls.clear()
    r.revert(saved)
    assert router.replicas[1]["state"] == "up"
    assert paths(router)[:2] == ["GET /admin/replicas/1", "DELETE /admin/replicas/1"]
    r.revert(saved)  # already up: nothing to undo
    assert paths(router)[-1] == "GET /admin/replicas/1"


def test_a_restart_is_a_new_process_and_its_revert_only_waits_for_it(router):
    r = Replica({"sim": router.url, "replica": 0})
    saved = r.save({"action": "restart"})
    r.apply("w", {"action": "restart"}, saved)
    assert router.replicas[0]["pid"] != saved["pid"]
    r.confirm({"action": "restart"})  # up by now, and a new pid
    router.calls.clear()
    r.revert(saved)
    assert not [c for c in paths(router) if c.startswith("DELETE")]


def test_a_holding_target_is_resolved_once_when_saved_and_the_journal_reverts_that_replica(router, tmp_path):
    target = {"sim": router.url, "holding": PROMPT}
    r = Replica(target)
    assert r.probe() is None  # nothing routed yet: no holder, which is no reason to refuse
    with pytest.raises(InjectError, match=r"no replica holds the prefix of target.holding"):
        r.save({"action": "kill"})
    router.holders[PROMPT] = 2
    saved = r.save({"action": "kill"})
    assert saved["replica"] == 2
    journal = Journal(tmp_path / "journal.json")
    journal.add("w", "replica", target, {"action": "kill"}, saved)
    r.apply("w", {"action": "kill"}, saved)
    router.holders[PROMPT] = 0  # what the router believes later does not move the revert
    (entry,) = journal.entries()
    assert (entry["kind"], entry["target"], entry["saved"]["replica"]) == ("replica", target, 2)
    assert recover(journal) == [f"reverted replica w on {target}"]
    assert journal.entries() == []
    assert [e["state"] for e in router.replicas] == ["up", "up", "up"]
    assert "DELETE /admin/replicas/2" in paths(router)
    assert "DELETE /admin/replicas/0" not in paths(router)
    assert f"POST /admin/router/holder {{'prompt': '{PROMPT}'}}" in paths(router)
    short = Replica({"sim": router.url, "holding": "hi"})
    assert (short.probe() or "").startswith("target.holding: router refused (400)")


def test_what_the_router_reads_back_wrong_is_an_inject_error_naming_the_replica(router, monkeypatch):
    r = Replica({"sim": router.url, "replica": 1})
    assert Replica({"sim": router.url, "replica": 5}).probe() == (
        f"the router at {router.url} has no replica 5 (it has 0, 1, 2)"
    )
    router.ignore = {"PUT"}  # a PUT that does not take
    with pytest.raises(InjectError, match=r"replica 1 reads back up .* after the PUT, not killed"):
        r.apply("w", {"action": "kill"}, r.save({"action": "kill"}))
    with pytest.raises(InjectError, match=r"replica 1 reads back up .* once applied, not killed"):
        r.confirm({})
    router.ignore = set()
    saved = r.save({"action": "kill"})
    r.apply("w", {"action": "kill"}, saved)
    with pytest.raises(InjectError, match="replica 1 is killed, not up: another fault holds it"):
        r.save({"action": "pause"})
    router.never_up = {1}
    monkeypatch.setattr(replica_module, "UP_WAIT_S", 0.3)
    started = time.monotonic()
    with pytest.raises(InjectError, match=r"replica 1 reads back starting 0.3 s after the revert, not up"):
        r.revert(saved)
    assert time.monotonic() - started < 2


def test_a_router_that_is_gone_took_its_faults_with_it(router):
    r, kv, drop = (
        Replica({"sim": router.url, "replica": 0}),
        KvLink({"sim": router.url}),
        RouterDrop({"sim": router.url, "replica": 0}),
    )
    saved = r.save({"action": "pause"})
    r.apply("w", {"action": "pause"}, saved)
    router.close()
    for injector in (r, kv, drop):
        with pytest.raises(TargetGone, match=f"router at {router.url} is gone|KV link at {router.url} is gone"):
            injector.revert(saved)
    assert "is gone" in (r.probe() or "")


def test_a_wrong_token_and_a_server_that_is_no_router_are_said_so(router, monkeypatch):
    monkeypatch.setenv("LLMCHAOS_ADMIN_TOKEN", "wrong")
    assert "router refused (401)" in (Replica({"sim": router.url, "replica": 0}).probe() or "")
    monkeypatch.setenv("LLMCHAOS_ADMIN_TOKEN", TOKEN)
    with serving(RouterAdmin(replicas=1)) as single:
        assert KvLink({"sim": single.url}).probe() == (
            'KV link refused (404): {"error": {"message": "not disaggregated"}} '
            "(no KV link: llmchaos serve --disaggregate P:D --admin-token T)"
        )
        single.replicas.clear()  # no /admin/replicas/0 either
        assert "has no replica 0" in (RouterDrop({"sim": single.url, "replica": 0}).probe() or "")


@pytest.mark.parametrize(
    ("params", "body"),
    [
        ({"action": "partition"}, {"action": "partition"}),
        ({"action": "delay", "delay": "200ms"}, {"action": "delay", "delay_ms": 200}),
        ({"action": "delay", "delay": "1.5s"}, {"action": "delay", "delay_ms": 1500}),
        ({"action": "loss", "loss": "20%"}, {"action": "loss", "loss_pct": 20}),
        ({"action": "loss", "loss": 0.5}, {"action": "loss", "loss_pct": 0.5}),
    ],
)
def test_the_kv_link_is_set_read_back_and_cleared(router, params, body):
    kv = KvLink({"sim": router.url})
    assert kv.probe() is None
    saved = kv.save(params)
    assert saved == {"action": None, "delay_ms": None, "loss_pct": None}
    kv.apply("w", params, saved)
    kv.confirm(params)
    assert {k: router.kv[k] for k in body} == body
    kv.revert(saved)
    assert router.kv["action"] is None
    assert paths(router)[-2:] == ["DELETE /admin/kv_link", "GET /admin/kv_link"]
    assert f"PUT /admin/kv_link {body}" in paths(router)


def test_a_kv_link_that_does_not_take_or_clear_is_an_inject_error(router):
    kv = KvLink({"sim": router.url})
    router.ignore = {"PUT"}
    with pytest.raises(InjectError, match=r"KV link at .* reads back action: None after setting it"):
        kv.apply("w", {"action": "partition"}, {})
    with pytest.raises(InjectError, match="reads back action: None, delay_ms: None once applied"):
        kv.confirm({"action": "delay", "delay": 5})
    router.ignore = {"DELETE"}
    router.kv["action"] = "partition"
    with pytest.raises(InjectError, match="reads back action: partition after the revert"):
        kv.revert({})
    router.kv["action"] = ["garbage"]
    with pytest.raises(InjectError, match="without action: null"):
        kv.read_back()


def test_a_replica_out_of_the_pool_reads_back_so_and_is_put_back(router):
    drop = RouterDrop({"sim": router.url, "replica": 2})
    assert drop.probe() is None
    saved = drop.save({})
    assert (saved["index"], saved["in_pool"]) == (2, True)
    drop.apply("w", {}, saved)
    drop.confirm({})
    assert (router.replicas[2]["state"], router.replicas[2]["in_pool"]) == ("up", False)
    drop.revert(saved)
    assert router.replicas[2]["in_pool"] is True
    assert paths(router)[-1] == "DELETE /admin/router/pool/2"
    router.ignore = {"PUT", "DELETE"}
    with pytest.raises(InjectError, match=r"replica 2 reads back in_pool: True \(state up\) after the drop"):
        drop.apply("w", {}, saved)
    router.replicas[2]["in_pool"] = False
    with pytest.raises(InjectError, match=r"in_pool: False .* after the revert"):
        drop.revert(saved)
    router.replicas[2]["state"] = "down"  # out of the pool by its health check: no fault's doing
    drop.revert(saved)


def test_a_runner_applies_and_reverts_each_kind_and_leaves_the_journal_empty(router, tmp_path):
    windows = (
        ("replica", f'{{sim: "{router.url}", replica: 1}}', "{action: kill}", "0s"),
        ("kv_link", f'{{sim: "{router.url}"}}', "{action: partition}", "0s"),
        ("router", f'{{sim: "{router.url}", replica: 2}}', "{}", "0s"),
    )
    plan = load(tmp_path, schedule(*windows).replace("duration: 2s", "duration: 300ms"))
    journal = Journal(tmp_path / "journal.json")
    runner = Runner(plan, journal, horizon=plan.end())
    runner.start()
    deadline = time.monotonic() + 10
    while runner.running() and time.monotonic() < deadline:
        time.sleep(0.02)
    runner.stop()
    assert sorted((w.name, w.error) for w in runner.windows()) == [("w0", None), ("w1", None), ("w2", None)]
    assert all(w.actual_start and w.actual_end for w in runner.windows())
    assert journal.entries() == []
    assert [(e["state"], e["in_pool"]) for e in router.replicas] == [("up", True)] * 3
    assert router.kv["action"] is None
    done = paths(router)
    for call in ("PUT /admin/replicas/1 {'action': 'kill'}", "DELETE /admin/replicas/1", "PUT /admin/router/pool/2 {}"):
        assert call in done


def test_a_fault_host_lets_the_cluster_kinds_hit_only_the_routers_its_allow_sim_names():
    p = argparse.ArgumentParser()
    reach.add_arguments(p)
    r = reach.from_args(p.parse_args(["--allow-sim", f"{URL}/"]))
    for kind, target in [("replica", {"replica": 0}), ("kv_link", {}), ("router", {"replica": 0})]:
        assert r.refusal(kind, {"sim": URL, **target}) is None
        assert "(--allow-sim)" in (r.refusal(kind, {"sim": "http://10.0.0.9:8000", **target}) or "")
