"""The Kubernetes API's reads of one Chaos Mesh Workflow and its WorkflowNodes, answered on the
loopback from recorded objects, and a kubeconfig that points the official client at it: what
`--k8s-workflow` and `llmchaos k8s wait` read, without a cluster. The nodes are those recorded as of
each read (`nodes(now)`), so a test sees a Workflow run in real time."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PREFIX = "/apis/chaos-mesh.org/v1alpha1/namespaces/"


class KubeAPI:
    def __init__(self, workflow: dict | None, nodes: Callable[[float], list[dict]]) -> None:
        self.workflow, self.nodes = workflow, nodes  # workflow None: deleted (404)
        self.paths: list[str] = []

    def answer(self, path: str) -> tuple[int, dict]:
        self.paths.append(path)
        wf = self.workflow
        if path.startswith(PREFIX) and path.endswith("/workflownodes"):  # a list: 200, empty once it is deleted
            items = self.nodes(time.time()) if wf is not None else []  # (its nodes are its own: deleted with it)
            return 200, {"apiVersion": "chaos-mesh.org/v1alpha1", "kind": "WorkflowNodeList", "items": items}
        if wf is not None and path == f"{PREFIX}{wf['metadata']['namespace']}/workflows/{wf['metadata']['name']}":
            return 200, wf
        return 404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}


@contextlib.contextmanager
def running(api: KubeAPI, tmp: Path) -> Iterator[Path]:
    """Serve `api` on a free loopback port; the kubeconfig's path (namespace `staging`)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, body = api.answer(self.path.split("?")[0])
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
