"""`kv_link` windows as a NetworkChaos step on what the prefill pods (--prefill-selector) send the
decode pods (--decode-selector: `target`, `direction: to`): `partition`, `loss` (a share of the
packets, which TCP retransmits) and `delay` (each packet, so a transfer's first byte as in the
stand-in, and every round trip of a transfer longer than its TCP window). The target's `sim` (the
stand-in's URL) has no meaning there."""

from __future__ import annotations

from faults.k8s import network
from faults.k8s.cluster import Cluster, Piece, Step, go_duration
from faults.schedule import FaultSpec


def check(spec: FaultSpec, cluster: Cluster) -> None:
    peers(cluster)


def peers(cluster: Cluster) -> tuple[dict, dict]:
    """(the prefill pods' selector, the decode pods')."""
    why = "kv_link acts between a disaggregated cluster's prefill and decode pods"
    return (
        cluster.pods(cluster.prefill, why, "--prefill-selector", "role=prefill"),
        cluster.pods(cluster.decode, why, "--decode-selector", "role=decode"),
    )


def piece(step: Step, cluster: Cluster) -> Piece:
    w = step.window
    action = w.params["action"]
    fields = {"action": "partition"} if action == "partition" else network.netem({action: w.params[action]})
    prefill, decode = peers(cluster)
    chaos = {
        "action": fields.pop("action"),
        "mode": "all",
        "selector": prefill,
        "direction": "to",
        "target": {"mode": "all", "selector": decode},
        **fields,
    }
    return Piece(
        {
            "name": step.name,
            "templateType": "NetworkChaos",
            "deadline": go_duration(w.end - w.start),
            "networkChaos": chaos,
        }
    )
