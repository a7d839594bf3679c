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

PREFIX = "/apis/chaos-mesh.org/v1alpha1/namespaces/"


class KubeAPI:
    def __init__(self, workflow: dict | None, nodes: Callable[[float], list[dict]], pods: Sequence[dict] = ()) -> None:
        self.workflow, self.nodes = workflow, nodes  # workflow None: deleted (404)
        self.pods = list(pods)
        self.paths: list[str] = []

    def answer(self, path: str, query: dict[str, list[str]] | None = None) -> tuple[int, dict]:
        self.paths.append(path)
        if path.startswith("/api/v1/namespaces/") and path.endswith("/pods"):
            return 200, {"apiVersion": "v1", "kind": "PodList", "items": self.listed(path.split("/")[4], query or {})}
        wf = self.workflow
        if path.startswith(PREFIX) and path.endswith("/workflownodes"):  # a list: 200, empty once it is deleted
            items = self.nodes(time.time()) if wf is not None else []  # (its nodes are its own: deleted with it)
            return 200, {"apiVersion": "chaos-mesh.org/v1alpha1", "kind": "WorkflowNodeList", "items": items}
        if wf is not None and path == f"{PREFIX}{wf['metadata']['namespace']}/workflows/{wf['metadata']['name']}":
            return 200, wf
        return 404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}

    def listed(self, namespace: str, query: dict[str, list[str]]) -> list[dict]:
        """The pods of `namespace` the query's labelSelector (KEY=VALUE,...) and fieldSelector
        (spec.nodeName=NODE, the one field selector `k8s gpu` sends) select."""
        labels = dict(kv.split("=", 1) for kv in query.get("labelSelector", [""])[0].split(",") if kv)
        fields = dict(kv.split("=", 1) for kv in query.get("fieldSelector", [""])[0].split(",") if kv)
        assert set(fields) <= {"spec.nodeName"}, fields
        return [
            p
            for p in self.pods
            if p["metadata"]["namespace"] == namespace
            and labels.items() <= p["metadata"].get("labels", {}).items()
            and fields.get("spec.nodeName", p["spec"].get("nodeName")) == p["spec"].get("nodeName")
        ]


@contextlib.contextmanager
def running(api: KubeAPI, tmp: Path) -> Iterator[Path]:
    """Serve `api` on a free loopback port; the kubeconfig's path (namespace `staging`)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            status, body = api.answer(url.path, parse_qs(url.query))
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
