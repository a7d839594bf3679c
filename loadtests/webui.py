"""The llmchaos tabs in Locust's web UI (the master's, or a single process's): per target and language,
live P50/P99 TTFT and ITL from the run's exactly merged HDR histograms, outcomes and SLO state with
the current fault phase; and the fault schedule, what is active and what lies ahead.

Locust's own extension points carry them: `extended_tabs` and `extended_tables` in the web UI's
template arguments declare each tab and its columns, and every `/stats/requests` answer (the UI polls
it) gains `extended_stats`, the tabs' rows. `/llmchaos/tab` serves the same rows as JSON.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from flask import Response, jsonify, request

from faults.host.ledger import LOST_S
from faults.schedule import Window
from faults.session import FaultSession
from llmchaos import slo
from loadtests.merge import Merged

if TYPE_CHECKING:  # importing locust monkey-patches the process: the rows' tests import this module without it
    from locust.env import Environment

    from loadtests.harness import Harness

LANGS, FAULTS = "llmchaos-languages", "llmchaos-faults"
ROUTE = "/llmchaos/tab"
AHEAD = 8  # windows of the schedule listed ahead
CACHE_S = 1.0  # a snapshot serves every request within this long
LANG_COLUMNS = {
    "target": "Target",
    "lang": "Language",
    "issued": "Requests",
    "outcomes": "Outcomes",
    "ttft_p50_ms": "TTFT P50 (ms)",
    "ttft_p99_ms": "TTFT P99 (ms)",
    "itl_p50_ms": "ITL P50 (ms)",
    "itl_p99_ms": "ITL P99 (ms)",
    "attainment_pct": "SLO attainment (%)",
    "slo": "SLO",
    "phase": "Phase now",
}
FAULT_COLUMNS = {
    "name": "Fault",
    "kind": "Kind",
    "target": "Target",
    "host": "Host (clock offset)",
    "state": "State",
    "starts_in_s": "Starts in (s)",
    "ends_in_s": "Ends in (s)",
}


def percentiles_ms(merged: Merged, metric: str, **match: str) -> tuple[float | None, float | None]:
    """P50 and P99 over every phase of `match`'s histograms, in ms to 0.1 ms; None without samples."""
    h = merged.hist.combined(metric, **match)
    if h is None or not h.count:
        return None, None
    return round(h.quantile(50.0) * 1000.0, 1), round(h.quantile(99.0) * 1000.0, 1)


def language_rows(merged: Merged, slos: slo.Slos, elapsed_s: float, phase: str) -> list[dict[str, Any]]:
    """One row per (target, lang, api) seen so far, in key order."""
    outcomes: dict[tuple[str, ...], Counter[str]] = {}
    for (*key, outcome), n in merged.outcomes.items():
        outcomes.setdefault((key[0], key[1], key[2]), Counter())[outcome] += n
    rows = []
    for r in slo.evaluate(slos, merged.hist, merged.slo_counts, elapsed_s):
        match = {"target": r.target, "lang": r.lang, "api": r.api}
        counts = outcomes.get((r.target, r.lang, r.api), Counter())
        failed = [f"{c.slo} {c.value_ms:.1f} > {c.threshold_ms:g} ms" for c in r.checks if c.value_ms and not c.passed]
        (ttft_p50, ttft_p99), (itl_p50, itl_p99) = (percentiles_ms(merged, m, **match) for m in ("ttft", "itl"))
        rows.append(
            {
                "target": r.target,
                "lang": r.lang,
                "issued": r.issued,
                "outcomes": ", ".join(f"{o} {n}" for o, n in counts.most_common()),
                "ttft_p50_ms": ttft_p50,
                "ttft_p99_ms": ttft_p99,
                "itl_p50_ms": itl_p50,
                "itl_p99_ms": itl_p99,
                "attainment_pct": None if r.attainment is None else round(r.attainment * 100.0, 1),
                "slo": "FAIL " + "; ".join(failed) if r.passed is False and failed else r.verdict,
                "phase": phase,
            }
        )
    return rows


def _host(session: FaultSession, name: str | None) -> str:
    """A fault host's name with its clock offset from the master's, as estimated so far."""
    if name is None:
        return "master"
    info = session.hosts.summary().get(name, {}) if session.hosts is not None else {}
    if not info.get("connected"):
        return f"{name} (not connected)"
    if info.get("offset_ms") is None:
        return name
    return f"{name} ({info['offset_ms']:+.2f} ± {info['uncertainty_ms']:.2f} ms)"


def _state(session: FaultSession, w: Window, start: float, now: float) -> str:
    """planned, ahead, active; for a fault host's window what it acknowledged: applied, not yet
    acknowledged, or unconfirmed (contact lost)."""
    if session.t0 is None:
        return "planned"
    if start > 0:
        return "ahead"
    if w.host is None or session.hosts is None:
        return "active"
    if w.name in session.hosts.ledger.provisional(now):
        return "applied (acknowledged)"
    host = session.hosts.ledger.hosts[w.host]
    lost = host.last_ack is None or now - host.last_ack > LOST_S
    return "unconfirmed (no answer from its host)" if lost else "due, not acknowledged yet"


def fault_rows(h: Harness, now: float) -> list[dict[str, Any]]:
    """The schedule's windows active now and the next `AHEAD` to come (offsets from its start while
    the test has not started)."""
    if not isinstance(h.timeline, FaultSession):  # none, or the cluster's (it plans nothing ahead here)
        return []
    session = h.timeline
    t0 = session.t0
    rows = []
    for w in session.schedule.windows(session.horizon):
        start, end = (w.start, w.end) if t0 is None else (t0 + w.start - now, t0 + w.end - now)
        if t0 is not None and end <= 0:
            continue
        target = ",".join(f"{k}={v}" for k, v in sorted(w.target.items()))
        rows.append(
            {
                "name": w.name,
                "kind": w.kind,
                "target": target,
                "host": _host(session, w.host),
                "state": _state(session, w, start, now),
                "starts_in_s": round(start, 1),
                "ends_in_s": round(end, 1),
            }
        )
        if len(rows) >= AHEAD:
            break
    return rows


def snapshot(h: Harness) -> dict[str, Any]:
    """The tabs' content now: the run's id, the phase now, whether the totals are final, the language
    and fault rows."""
    now, writer = time.time(), h.writer
    phase = h.phase(now) if writer is not None else "not started"
    return {
        "run_id": writer.run_id if writer is not None else None,
        "phase": phase,
        "settled": h.settled(),
        "languages": (
            language_rows(writer.merged, h.settings.slos, now - writer.started, phase) if writer is not None else []
        ),
        "faults": fault_rows(h, now),
    }


def install(environment: Environment, h: Harness) -> None:
    """Declare the tabs, serve their JSON and add their rows to every `/stats/requests` answer."""
    web_ui = environment.web_ui
    if web_ui is None or web_ui.app is None:
        return
    web_ui.template_args["extended_tabs"] = [
        {"title": "llmchaos: languages", "key": LANGS},
        {"title": "llmchaos: faults", "key": FAULTS},
    ]
    web_ui.template_args["extended_tables"] = [
        {"key": key, "structure": [{"key": k, "title": t} for k, t in columns.items()]}
        for key, columns in ((LANGS, LANG_COLUMNS), (FAULTS, FAULT_COLUMNS))
    ]
    app = web_ui.app
    cache: dict[str, Any] = {"at": 0.0, "snap": None}

    def current() -> dict[str, Any]:
        """The snapshot, computed at most once a second however many browsers poll (60-75 ms of the
        master's loop for 8 languages in 3 phases here, mostly hdrh's percentile walk)."""
        now = time.monotonic()
        if cache["snap"] is None or now - cache["at"] >= CACHE_S:
            cache["at"], cache["snap"] = now, snapshot(h)
        return cache["snap"]

    @app.route(ROUTE)
    def tab() -> Response:
        return jsonify(current())

    @app.after_request
    def extend_stats(response: Response) -> Response:
        if request.path != "/stats/requests" or response.status_code != 200:
            return response
        snap = current()
        extended = [{"key": LANGS, "data": snap["languages"]}, {"key": FAULTS, "data": snap["faults"]}]
        response.set_data(json.dumps({**response.get_json(), "extended_stats": extended}))
        return response
