"""A fault host on the GPU host: three network namespaces as three machines (three_hosts.py), the
reference server and `llmchaos faults host` on the GPU host, a Locust master with a worker on its
own host, a worker on the client host; the schedule's windows run on the GPU host under leases
(root needed)."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

import pytest

from faults.journal import Journal
from tests.integration.conftest import math_bound
from tests.integration.loadtest_helpers import only_run, report, summary
from tests.noise import WakeNoise
from tests.system import fault_lab as fl

LABEL_S = 0.05  # a request's phase matches its window's acknowledged times within this (the labelling)


def schedule(tmp: Path, tbf_at: float, tbf_for: float, gpu_at: float, gpu_for: float) -> Path:
    path = tmp / "schedule.yaml"
    path.write_text(f"""seed: 1
faults:
  - name: thin-link
    kind: tbf
    target: {{host: {fl.HOST}, interface: g2c}}
    at: {tbf_at}s
    duration: {tbf_for}s
    params: {{rate: 96kbit, burst: 4096, latency: 400ms}}
  - name: gpu-660
    kind: gpu_clock
    target: {{host: {fl.HOST}, sim: "{fl.SIM}"}}
    at: {gpu_at}s
    duration: {gpu_for}s
    params: {{graphics_mhz: 660}}
""")
    return path


def phases_of(requests: list[dict], window: dict) -> tuple[list[dict], list[dict]]:
    """Requests that started well inside the window's acknowledged span, and well outside it."""
    a, r = window["actual_start"], window["actual_end"]
    inside = [q for q in requests if a + LABEL_S <= q["intended"] <= r - LABEL_S]
    outside = [q for q in requests if q["intended"] < a - LABEL_S or q["intended"] > r + LABEL_S]
    return inside, outside


@pytest.mark.timing
def test_phases_follow_the_acknowledged_times_and_the_faults_move_the_latencies(tmp_path):
    """Each window's phase follows the times the fault host acknowledged (what a watcher on the GPU host saw), and
    the thin link slows TTFT and the clock lock ITL.

    Long (about 35 s here): the lab (three namespaces with a server, a fault host, a master and two workers, each
    started and stopped) and a 26 s run: two 6 s windows, each with baseline on both sides."""
    math = math_bound(tmp_path)  # steps all math: the lock slows ITL in proportion (the default's decode hardly)
    with fl.staged(tmp_path, "--profile", math, "--sim-time-scale", "0.3") as (lab, procs, secret, journal):
        with WakeNoise() as noise, fl.Watch(lab, "g2c") as watch:
            fl.load(procs, lab, secret, schedule(tmp_path, 6, 6, 16, 6), tmp_path / "results", 26)
            assert procs.running["master"].wait(120) == 0, procs.log("master")[-3000:]
        assert fl.inside(lab.gpu, lambda: fl.root_qdisc("g2c")) is None
        assert fl.inside(lab.gpu, fl.clocks)["locked"] is False
        assert Journal(journal).entries() == []
    run, _, requests = only_run(tmp_path / "results")
    print("\n".join(line for line in report(tmp_path / "results").splitlines() if line.startswith("fault")))
    (gpu_host,) = run["fault_hosts"]
    assert gpu_host["connected"], gpu_host
    assert gpu_host["uncertainty_s"] < LABEL_S, gpu_host
    assert abs(gpu_host["offset_s"]) <= gpu_host["uncertainty_s"] + 1e-3  # one kernel clock: offset 0
    windows = {w["name"]: w for w in run["faults"]}
    slack = 0.03 + 2 * noise.worst  # the watcher's read period and a late wake of either side
    for name, seen in (("thin-link", watch.qdisc), ("gpu-660", watch.locked)):
        w = windows[name]
        assert (w["host"], w["error"], w["unconfirmed"]) == (fl.HOST, None, []), w
        ((on_after, on_seen), (off_after, off_seen)) = fl.Watch.spans(seen)[0]
        # what the host acknowledged is what the GPU host really did (its clock is the master's here)
        assert on_after - slack <= w["actual_start"] <= on_seen + slack, (w, on_after, on_seen)
        assert off_after - slack <= w["actual_end"] <= off_seen + slack, (w, off_after, off_seen)
        assert 0 <= w["apply_ack_lag_s"] < 1.0 + slack, w  # leased at its start, heard back at once
        assert w["revert_ack_lag_s"] < 1.0 + slack, w
        inside, outside = phases_of(requests, w)
        assert inside, w
        assert {q["phase"] for q in inside} == {name}
        assert not [q for q in outside if name in q["phase"]]
        a, r = w["actual_start"], w["actual_end"]
        print(
            f"{name}: applied {a - w['planned_start']:+.3f} s (seen changed {on_after - a:+.3f}..{on_seen - a:+.3f} s "
            f"from it), reverted {r - w['planned_end']:+.3f} s (seen {off_after - r:+.3f}..{off_seen - r:+.3f}); "
            f"ack lag {w['apply_ack_lag_s']:.3f} / {w['revert_ack_lag_s']:.3f} s; {len(inside)} requests inside"
        )
    offset, u = gpu_host["offset_s"] * 1000, gpu_host["uncertainty_s"] * 1000
    print(f"clock offset {offset:+.3f} ms +- {u:.3f} ms; the machine's worst wake-up delay {noise.worst:.3f} s")
    assert {q["phase"] for q in requests} == {"baseline", "thin-link", "gpu-660"}
    base, thin, slow = (
        summary(run, "en", m, p) for m, p in (("ttft", "baseline"), ("ttft", "thin-link"), ("itl", "gpu-660"))
    )
    base_itl = summary(run, "en", "itl", "baseline")
    print(f"TTFT p50 baseline {base['p50'] * 1000:.1f} ms, thin-link {thin['p50'] * 1000:.1f} ms")
    print(f"ITL p50 baseline {base_itl['p50'] * 1000:.2f} ms, gpu-660 {slow['p50'] * 1000:.2f} ms")
    assert thin["p50"] > 3 * base["p50"], (base, thin)  # the answers queue behind a 96 kbit/s link
    assert slow["p50"] > 2 * base_itl["p50"]  # 1980/660 MHz: 3x the step time, less what does not scale


@pytest.mark.timing
def test_a_master_killed_mid_window_leaves_nothing_after_its_lease(tmp_path):
    """A master killed while both windows are applied: the fault host reverts both once the lease runs out.

    Long (about 40 s here): the lab (three namespaces with a server, a fault host, a master and two workers, each
    started and stopped), a run until both windows are on (4 s in), then the 3 s lease and the revert waited for."""
    lease = 3.0  # two renewals and the host's default lateness of a second: the least a run allows
    with fl.staged(tmp_path) as (lab, procs, secret, journal):
        with WakeNoise() as noise:
            fl.load(
                procs,
                lab,
                secret,
                schedule(tmp_path, 4, 60, 4, 60),
                tmp_path / "results",
                60,
                "--fault-lease",
                str(lease),
            )
            fl.wait_for(
                "both windows applied",
                lambda: fl.inside(lab.gpu, lambda: fl.root_qdisc("g2c") == "tbf" and fl.clocks()["locked"]),
                60,
            )
            time.sleep(1.0)
            procs.running["master"].send_signal(signal.SIGKILL)
            killed = time.time()
            gone = fl.wait_for(
                "qdisc gone and clock reset",
                lambda: fl.inside(lab.gpu, lambda: fl.root_qdisc("g2c") is None and not fl.clocks()["locked"]),
                lease + 10,
            )
        # the last renewal came before the kill: both are reverted by then + the lease, give or take
        # the fault host's read-back of each and a late wake
        print(f"master killed: reverted and read back {gone - killed:.3f} s later (lease {lease:g} s)")
        assert gone - killed <= lease + 0.5 + 4 * noise.worst, (gone - killed, noise.worst)
        notes = [n for n in Journal(journal).notes() if n["event"] == "reverted"]
        assert {n["name"] for n in notes} == {"thin-link", "gpu-660"}
        assert all(n["why"].startswith("lease expired: no renewal from the master for") for n in notes), notes
        assert Journal(journal).entries() == []


@pytest.mark.timing
def test_a_cut_link_reverts_within_the_lease_and_no_request_of_that_time_is_baseline(tmp_path):
    """The link to the fault host cut mid-window: the host reverts within the lease, and the master labels the
    requests of the time it could not confirm unconfirmed, never baseline.

    Long (about 27 s here): the lab (three namespaces with a server, a fault host, a master and two workers, each
    started and stopped) and a 20 s run, its link down for about 6 s of it (back 7 s before the end)."""
    lease = 3.0  # two renewals and the host's default lateness of a second: the least a run allows
    with fl.staged(tmp_path) as (lab, procs, secret, journal):
        with WakeNoise() as noise:
            plan = schedule(tmp_path, 5, 7, 5, 7)  # both windows end while the link is down
            fl.load(procs, lab, secret, plan, tmp_path / "results", 20, "--fault-lease", str(lease))
            fl.wait_for("applied", lambda: fl.inside(lab.gpu, lambda: fl.root_qdisc("g2c") == "tbf"), 60)
            time.sleep(2.0)
            lab.link(up=False)
            cut = time.time()
            gone = fl.wait_for(
                "qdisc gone", lambda: fl.inside(lab.gpu, lambda: fl.root_qdisc("g2c") is None), lease + 10
            )
            time.sleep(4.0)
            lab.link(up=True)
            assert procs.running["master"].wait(120) == 0, procs.log("master")[-3000:]
        print(f"link cut: reverted and read back {gone - cut:.3f} s later (lease {lease:g} s)")
        # the last renewal came at most a second before the cut
        assert gone - cut <= lease + 1.0 + 4 * noise.worst, (gone - cut, noise.worst)
        assert Journal(journal).entries() == []
    run, _, requests = only_run(tmp_path / "results")
    (host,) = run["fault_hosts"]
    assert host["lost_contact"], host
    assert cut - 1.5 <= host["lost_contact"][0][0] <= cut, host
    for w in run["faults"]:
        assert w["unconfirmed"], w  # the master could not see what happened after the cut
        assert w["why"].startswith("lease expired"), w  # the host's own record, heard once the link was back
        lost_from = w["unconfirmed"][0][0]
        assert cut - 1.5 <= lost_from <= cut, (w, cut)
        during = [q for q in requests if lost_from <= q["intended"] <= gone]
        assert during, w
        assert "baseline" not in {q["phase"] for q in during}
        print(f"{w['name']}: lost {cut - lost_from:.3f} s before the cut; {len(during)} requests until the revert")
        assert all(f"{w['name']}:unconfirmed" in q["phase"] for q in during if q["intended"] >= lost_from + LABEL_S)


@pytest.mark.timing
def test_a_killed_fault_host_is_unacknowledged_then_recovered_and_a_new_one_resyncs(tmp_path):
    """A fault host killed mid-window: its fault stays and is unacknowledged, `faults recover` reverts it, and a new
    fault host applies the window again.

    Long (about 27 s here): the lab (three namespaces with a server, a fault host, a master and two workers, each
    started and stopped) and a 20 s run, in which a second fault host is started (about 6 s before the window's end)."""
    with fl.staged(tmp_path) as (lab, procs, secret, journal):
        fl.load(procs, lab, secret, schedule(tmp_path, 4, 12, 40, 1), tmp_path / "results", 20, "--fault-lease", "3")
        fl.wait_for("applied", lambda: fl.inside(lab.gpu, lambda: fl.root_qdisc("g2c") == "tbf"), 60)
        time.sleep(1.0)
        procs.running["fault-host"].send_signal(signal.SIGKILL)
        killed = time.time()
        time.sleep(3.0)  # nobody reverts it: the host is gone
        assert fl.inside(lab.gpu, lambda: fl.root_qdisc("g2c")) == "tbf"
        assert [e["name"] for e in Journal(journal).entries()] == ["thin-link"]
        recover = fl.run_in(lab.gpu, [*fl.LLMCHAOS, "faults", "recover", "--journal", str(journal)])
        assert recover.returncode == 0, recover
        assert recover.stdout.startswith("reverted tbf thin-link"), recover
        assert fl.inside(lab.gpu, lambda: fl.root_qdisc("g2c")) is None
        assert Journal(journal).entries() == []
        fl.fault_host(procs, lab, secret, journal, *fl.ALLOW, name="fault-host-again")
        back = fl.wait_for("applied again", lambda: fl.inside(lab.gpu, lambda: fl.root_qdisc("g2c") == "tbf"), 30)
        assert procs.running["master"].wait(120) == 0, procs.log("master")[-3000:]
        assert fl.inside(lab.gpu, lambda: fl.root_qdisc("g2c")) is None
    run, _, requests = only_run(tmp_path / "results")
    (w,) = [w for w in run["faults"] if w["name"] == "thin-link"]
    first, second = w["spans"]
    assert first[1] is not None
    assert first[1] <= killed  # closed where the master last heard of it
    assert second[0] >= back - 3.0  # the new run applied it again, and reverted it
    assert second[1] is not None
    (u,) = w["unconfirmed"]
    print(f"host killed: unconfirmed {u[0] - killed:+.3f} s .. {u[1] - killed:+.3f} s from the kill; applied again")
    assert u[0] <= killed + 0.1, (u, killed)  # unacknowledged from the kill on
    assert u[1] >= killed + 3.0, (u, killed)
    assert not [q for q in requests if u[0] + LABEL_S <= q["intended"] <= u[1] - LABEL_S and q["phase"] == "baseline"]


def test_a_lease_without_the_secret_or_outside_the_allowlist_changes_nothing(tmp_path):
    with fl.staged(tmp_path) as (lab, procs, secret, journal):
        out = tmp_path / "rogue.json"
        rogue = fl.run_in(lab.master, [sys.executable, "-m", "tests.system.rogue_master", str(secret), str(out)], 60)
        assert rogue.returncode == 0, rogue.stdout + rogue.stderr
        acks = json.loads(out.read_text())
        for interface in ("g2c", "g2m"):
            assert fl.inside(lab.gpu, lambda i=interface: fl.root_qdisc(i)) is None
        assert fl.inside(lab.gpu, fl.clocks)["locked"] is False
        log = procs.log("fault-host")
    assert "refused a llmchaos_lease message: unauthenticated: wrong MAC" in log
    assert "refused a llmchaos_lease message: unauthenticated: no seal" in log
    assert "refused a llmchaos_lease message: addressed to another run of this host" in log
    assert "refused a llmchaos_lease message: lease 1 is not newer than 1 (a replay?)" in log
    assert "refused a llmchaos_lease message: malformed Lease: expires_in is 'soon', not <class 'float'>" in log
    assert [acks[k] for k in ("wrong-secret", "no-seal", "wrong-boot", "replay", "mistyped")] == [None] * 5
    assert acks["valid"] is not None
    assert acks["after"] is not None  # the host lived on
    errors = {r["name"]: r["error"] for r in acks["outside"]["windows"]}
    assert errors == {
        "other-link": "refused: interface 'g2m' is not in the allowlist (--allow-interface)",
        "other-server": "refused: simulated device http://127.0.0.1:9 is not in this host's allowlist (--allow-sim)",
    }
    refused = [n for n in Journal(journal).notes() if n["event"] == "refused"]
    assert {n["name"] for n in refused} == {"other-link", "other-server"}
    assert Journal(journal).entries() == []
