"""The Kubernetes API's reads of one Chaos Mesh Workflow and its WorkflowNodes, and of pods by
label and node, answered on the loopback from recorded objects, and a kubeconfig that points the
official client at it: what `--k8s-workflow`, `llmchaos k8s wait` and `k8s gpu` read, without a
cluster. The nodes are those recorded as of each read (`nodes(now)`), so a test sees a Workflow run
in real time."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from faults.k8s.cluster import API

PREFIX = "/apis/chaos-mesh.org/v1alpha1/namespaces/"
LISTS = {"pods": ("v1", "PodList"), "networkchaos": (API, "NetworkChaosList"), "podchaos": (API, "PodChaosList")}
NOT_FOUND = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}


class KubeAPI:
    """`workflow` (None: deleted, 404), its nodes as of each read (`nodes(now)`), and more objects
    (pods, PersistentVolumeClaims, chaos objects: `pods` always, `objects(now)` as of each read),
    each list selected by the query's labelSelector and fieldSelector as the API server selects; a
    pod created (Running at once) or deleted."""

    def __init__(
        self,
        workflow: dict | None,
        nodes: Callable[[float], list[dict]],
        pods: Sequence[dict] = (),
        objects: Callable[[float], list[dict]] | None = None,
    ) -> None:
        self.workflow, self.nodes = workflow, nodes
        self.pods = list(pods)
        self.objects = objects
        self.paths: list[str] = []
        self.queries: list[tuple[str, dict[str, list[str]]]] = []

    def change(self, method: str, path: str, body: dict | None) -> tuple[int, dict]:
        """POST a pod (stored, and Running at once: a kubelet that starts it) or DELETE one."""
        parts = path.strip("/").split("/")
        self.paths.append(f"{method} {path}")
        if method == "POST" and parts[-1] == "pods" and body is not None:
            if any(
                (p["metadata"]["namespace"], p["metadata"]["name"]) == (parts[-2], body["metadata"]["name"])
                for p in self.pods
            ):
                return 409, {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "reason": "AlreadyExists",
                    "code": 409,
                }
            body = body | {"kind": "Pod", "status": {"phase": "Running"}}
            body["metadata"] = body["metadata"] | {"namespace": parts[-2]}
            self.pods.append(body)
            return 201, body
        if method == "DELETE" and parts[-2] == "pods":
            found = [
                p for p in self.pods if (p["metadata"]["namespace"], p["metadata"]["name"]) == (parts[-3], parts[-1])
            ]
            self.pods = [p for p in self.pods if p not in found]
            return (200, found[0]) if found else (404, NOT_FOUND)
        return 405, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 405}

    def answer(self, path: str, query: dict[str, list[str]] | None = None) -> tuple[int, dict]:
        self.paths.append(path)
        self.queries.append((path, query or {}))
        parts, wf = path.strip("/").split("/"), self.workflow
        now = time.time()
        if parts[-2] in ("pods", "persistentvolumeclaims") and parts[-4] == "namespaces":  # one object by name
            kind = "Pod" if parts[-2] == "pods" else "PersistentVolumeClaim"
            found = [
                o
                for o in self.pods
                if o.get("kind", "Pod") == kind
                and (o["metadata"]["namespace"], o["metadata"]["name"]) == (parts[-3], parts[-1])
            ]
            return (200, found[0]) if found else (404, NOT_FOUND)
        if path.endswith("/workflownodes"):  # a list: 200, empty once it is deleted (its nodes are its own)
            items = self.nodes(now) if wf is not None else []
            return 200, {"apiVersion": API, "kind": "WorkflowNodeList", "items": select(items, query or {})}
        if parts[-1] in LISTS and parts[-3] == "namespaces":
            api, kind = LISTS[parts[-1]]
            more = self.objects(now) if self.objects and wf is not None else []
            kinds = {"pods": "Pod", "networkchaos": "NetworkChaos", "podchaos": "PodChaos"}[parts[-1]]
            items = [
                o for o in self.pods + more if o.get("kind", "Pod") == kinds and o["metadata"]["namespace"] == parts[-2]
            ]
            return 200, {"apiVersion": api, "kind": kind, "items": select(items, query or {})}
        if wf is not None and path == f"{PREFIX}{wf['metadata']['namespace']}/workflows/{wf['metadata']['name']}":
            return 200, wf
        return 404, NOT_FOUND


def select(items: list[dict], query: dict[str, list[str]]) -> list[dict]:
    """`items` the query's labelSelector (KEY=VALUE,...) and fieldSelector (spec.nodeName=NODE, the one
    field selector sent here) select."""
    labels = dict(kv.split("=", 1) for kv in query.get("labelSelector", [""])[0].split(",") if kv)
    fields = dict(kv.split("=", 1) for kv in query.get("fieldSelector", [""])[0].split(",") if kv)
    assert set(fields) <= {"spec.nodeName"}, fields
    return [
        o
        for o in items
        if labels.items() <= (o["metadata"].get("labels") or {}).items()
        and fields.get("spec.nodeName", o.get("spec", {}).get("nodeName")) == o.get("spec", {}).get("nodeName")
    ]


@contextlib.contextmanager
def running(api: KubeAPI, tmp: Path) -> Iterator[Path]:
    """Serve `api` on a free loopback port; the kubeconfig's path (namespace `staging`)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            self.reply(*api.answer(url.path, parse_qs(url.query)))

        def do_POST(self) -> None:
            size = int(self.headers.get("content-length") or 0)
            self.reply(*api.change("POST", urlsplit(self.path).path, json.loads(self.rfile.read(size) or b"null")))

        def do_DELETE(self) -> None:
            size = int(self.headers.get("content-length") or 0)
            self.rfile.read(size)
            self.reply(*api.change("DELETE", urlsplit(self.path).path, None))

        def reply(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = tmp / "kubeconfig"
    config.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "recorded", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}],
                "users": [{"name": "reader", "user": {"token": "recorded"}}],
                "contexts": [
                    {"name": "recorded", "context": {"cluster": "recorded", "user": "reader", "namespace": "staging"}}
                ],
                "current-context": "recorded",
            }
        )
    )
    try:
        yield config
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
