"""What the cluster's records say of a step, from records a reader may meet: a record it cannot read
(a malformed time, NaN, a termination message of garbage) is no record, never a time or a crash."""

import json

from faults.k8s import evidence
from faults.k8s.evidence import Evidence


def chaos(*events: dict, selected: str = "True") -> dict:
    record = {"id": "staging/llm-0", "selectorKey": ".", "phase": "Injected", "events": list(events)}
    status = {"conditions": [{"type": "Selected", "status": selected}], "experiment": {"containerRecords": [record]}}
    return {"kind": "NetworkChaos", "status": status}


def event(operation: str, kind: str, timestamp: object, message: str = "") -> dict:
    return {"operation": operation, "type": kind, "timestamp": timestamp, "message": message}


def test_a_chaos_objects_apply_and_recover():
    found = evidence.chaos(
        chaos(
            event("Apply", "Failed", "2026-12-07T10:00:00Z", "retrying"),
            event("Apply", "Succeeded", "2026-12-07T10:00:02Z"),
            event("Recover", "Succeeded", "2026-12-07T10:01:02Z"),
        )
    )
    assert found == Evidence(1796637602.0, 1796637662.0)
    assert evidence.chaos(chaos(event("Apply", "Failed", "2026-12-07T10:00:00Z", "no device"))) == Evidence(
        why="Apply failed: no device"
    )
    assert evidence.chaos(chaos(selected="False")) == Evidence(why="selected no pod")
    assert evidence.chaos(None) is None


def test_a_record_it_cannot_read_is_no_record():
    unreadable = chaos(
        event("Apply", "Succeeded", "yesterday"), event("Apply", "Succeeded", None), event("Apply", "Succeeded", 42)
    )
    assert evidence.chaos(unreadable) == Evidence()  # none of them an RFC 3339 time: no Apply read
    for message in ("locked soon\nreset later\n", "locked nan\n", "locked inf\n", "\x00\xff", ""):
        pod = {"status": {"containerStatuses": [{"state": {"terminated": {"exitCode": 0, "message": message}}}]}}
        found = evidence.gpu_job(pod)
        assert found is not None
        assert found.applied is None, message
        assert found.why is not None
        assert found.why.startswith("the GPU Job ended without a lock")
    pod = {"status": {"containerStatuses": [{"state": {"terminated": {"message": "locked 12.5\nreset nan\n"}}}]}}
    assert evidence.gpu_job(pod) == Evidence(12.5, None)  # its reset unreadable: the step's deadline ends it
    task = {"status": {"phase": "Running", "containerStatuses": [{"state": {"running": {"startedAt": "soon"}}}]}}
    assert evidence.task(task) == Evidence(why="its pod is Running")
    running = evidence.task({"status": {"containerStatuses": [{"state": {"running": {
        "startedAt": "2026-12-07T10:00:00Z"}}}]}})  # fmt: skip
    assert running == Evidence(started=1796637600.0)  # on, its record to come as it ends
    for message in ("", "not json", "[]", "{}", '[{"actual_start": "soon"}]', "[1]", '[{"actual_start": NaN}]', "\x00"):
        ended = evidence.task(task_pod({"exitCode": 137, "reason": "OOMKilled", "message": message}))
        assert ended is not None
        assert ended.applied is None, message
        assert ended.why is not None, message
        assert ended.started == 1796637600.0


def task_pod(terminated: dict) -> dict:
    state = {"terminated": {"startedAt": "2026-12-07T10:00:00Z", "finishedAt": "2026-12-07T10:00:33Z", **terminated}}
    return {"status": {"phase": "Succeeded", "containerStatuses": [{"state": state}]}}


def test_a_task_pods_window_is_the_one_faults_run_recorded_not_its_containers_start():
    window = {"name": "chunk-drop", "actual_start": 1796637601.25, "actual_end": 1796637631.5, "error": None}
    found = evidence.task(task_pod({"exitCode": 0, "message": json.dumps([window], indent=1)}))
    assert found == Evidence(1796637601.25, 1796637631.5, started=1796637600.0)
    refused = {"name": "chunk-drop", "actual_start": None, "actual_end": None, "error": "sse: 503 from the proxy"}
    found = evidence.task(task_pod({"exitCode": 1, "message": json.dumps([refused])}))
    assert found is not None
    assert found.applied is None
    assert found.why == "its window never started: sse: 503 from the proxy"
    found = evidence.task(task_pod({"exitCode": 137, "reason": "OOMKilled"}))
    assert found is not None
    assert found.why == "its pod ended with no record of its window (exit 137: OOMKilled)"
