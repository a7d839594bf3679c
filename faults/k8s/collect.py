"""`llmchaos k8s collect NAMESPACE/RUN DIR`: a load run's results home from its volume, so that
`llmchaos report` and `compare` read them as a local run's.

The results are on the run's PersistentVolumeClaim (`RUN-results`, ReadWriteOnce), which no pod
mounts once the headless master's Job has ended. So a pod of our own mounts it read-only (restricted,
as every pod we make), the directory leaves it as a gzipped tar through the API's exec stream (what
`kubectl cp` does, in base64: the client's stream is text), decoded into a file beside DIR as it
comes (a long run's requests.jsonl is never held in memory), and the pod is deleted, whatever
happened. No kubectl needed: the official client, in a pod with its ServiceAccount, elsewhere with
the kubeconfig."""

from __future__ import annotations

import base64
import gzip
import logging
import tarfile
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api

from faults.k8s import kube, names
from faults.k8s.podsecurity import HOME, USER, container_context
from llmchaos.errors import UsageError

log = logging.getLogger("llmchaos.faults")

MOUNT = "/results"
TAR = ["sh", "-c", f"tar czf - -C {MOUNT} . | base64"]
START_S = 300.0  # the pod's wait to start: scheduling beside the volume, the image's pull
Sink = Callable[[str], None]  # takes a command's stdout, a chunk at a time
Exec = Callable[["CoreV1Api", str, str, list[str], Sink], None]  # (CoreV1Api, namespace, pod, command, stdout)
STDERR_KEPT = 4096  # of a failed command's stderr, the end, for its line


def api() -> CoreV1Api:
    from kubernetes import client

    kube.configure()
    return client.CoreV1Api()


def exec_stream(core: CoreV1Api, namespace: str, pod: str, command: list[str], stdout: Sink) -> None:
    """Run `command` in `pod` through the API's exec stream, its stdout to `stdout` as it comes;
    UsageError on a non-zero exit."""
    from kubernetes.stream import stream

    resp = stream(
        core.connect_get_namespaced_pod_exec,
        pod,
        namespace,
        command=command,
        stdout=True,
        stderr=True,
        stdin=False,
        tty=False,
        _preload_content=False,
    )
    err = ""
    try:
        while resp.is_open():
            resp.update(timeout=1)
            if resp.peek_stdout():
                stdout(resp.read_stdout())
            if resp.peek_stderr():
                err = (err + resp.read_stderr())[-STDERR_KEPT:]
    finally:
        resp.close()
    if resp.returncode:
        raise UsageError(f"reading the results in pod {pod}: exit {resp.returncode}: {err.strip()}")


class Unwritable(Exception):
    """The decoded results could not be written (a full disk): the OSError says why."""


class Base64Sink:
    """Base64 text, in chunks of any length (line breaks anywhere), decoded into `out` as it comes;
    ValueError when it is not base64 or ends cut short, Unwritable when `out` takes no more."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out, self._rest = out, ""

    def __call__(self, text: str) -> None:
        text = self._rest + "".join(text.split())
        whole = len(text) // 4 * 4  # base64 decodes by groups of four characters
        data = base64.b64decode(text[:whole], validate=True)
        try:
            self.out.write(data)
        except OSError as e:
            raise Unwritable(e.strerror or str(e)) from None
        self._rest = text[whole:]

    def close(self) -> None:
        if self._rest:
            raise ValueError(f"the base64 ends cut short ({len(self._rest)} characters of a group of 4)")


def reader_pod(namespace: str, run: str, image: str) -> dict:
    """A pod that mounts the run's results read-only and waits to be read."""
    container = {
        "name": "results",
        "image": image,
        "command": ["sleep", "3600"],  # deleted once read: at most an hour if this side dies
        "volumeMounts": [{"name": "results", "mountPath": MOUNT, "readOnly": True}],
        "env": [HOME],
        "securityContext": container_context(),
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
    }
    claim = {"claimName": f"{run}-results", "readOnly": True}
    spec = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "securityContext": {"fsGroup": USER},
        "containers": [container],
        "volumes": [{"name": "results", "persistentVolumeClaim": claim}],
    }
    meta = names.meta(f"{run}-collect", namespace, run)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def collect(
    namespace: str,
    run: str,
    dest: Path,
    image: str,
    core: CoreV1Api | None = None,
    run_exec: Exec = exec_stream,
    start_s: float = START_S,
) -> list[Path]:
    """Bring RUN's results directory into `dest`; the run directories it holds."""
    from kubernetes import client

    core = core if core is not None else api()
    claim = f"{run}-results"
    try:
        core.read_namespaced_persistent_volume_claim(claim, namespace)
    except client.ApiException as e:
        raise UsageError(
            f"no results volume {namespace}/{claim} ({e.status} {e.reason}): is RUN render-load's --name?"
        ) from None
    master = f"app.kubernetes.io/instance={run}-master"
    pods = core.list_namespaced_pod(namespace, label_selector=master).items
    running = [
        str(p.metadata.name) for p in pods if p.metadata and p.status and p.status.phase in ("Pending", "Running")
    ]
    if running:
        raise UsageError(f"the load test is still running ({', '.join(running)}): collect once its master has ended")
    beside = next(p for p in (dest, *dest.parents) if p.is_dir())  # DIR's disk, not a small /tmp
    try:
        packed = tempfile.TemporaryFile(dir=beside)  # noqa: SIM115 - the with below closes it
    except OSError as e:  # before any pod: nothing to undo
        raise UsageError(f"cannot write the results: {e.strerror or e}", file=str(dest)) from None
    with packed:
        _read(core, namespace, run, image, run_exec, start_s, packed)
        packed.seek(0)
        return unpack(packed, dest)


def _read(
    core: CoreV1Api, namespace: str, run: str, image: str, run_exec: Exec, start_s: float, packed: IO[bytes]
) -> None:
    """The results' gzipped tar into `packed`, through a reading pod of ours, deleted whatever happens."""
    from kubernetes import client

    pod = reader_pod(namespace, run, image)
    name = pod["metadata"]["name"]
    try:
        core.create_namespaced_pod(namespace, pod)  # type: ignore[arg-type]  # the client takes a manifest's dict
    except client.ApiException as e:
        if e.status == 409:  # its name is taken: one collect at a time, or one killed left its pod (an hour)
            raise UsageError(
                f"pod {namespace}/{name} exists: another collect is reading, or a killed one left it "
                f"(kubectl -n {namespace} delete pod {name})"
            ) from None
        raise UsageError(f"creating pod {namespace}/{name}: {e.status} {e.reason}") from None
    try:
        _started(core, namespace, name, start_s)
        sink = Base64Sink(packed)
        run_exec(core, namespace, name, TAR, sink)
        sink.close()
    except ValueError as e:  # not base64 (binascii.Error is one), or cut short
        raise UsageError(f"the results came back damaged: {e}") from None
    except Unwritable as e:
        raise UsageError(f"cannot write the results: {e}") from None
    finally:
        try:
            core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        except client.ApiException as e:  # gone already; anything else is worth a line, not the results
            if e.status != 404:
                log.warning("k8s collect: deleting pod %s/%s: %s %s", namespace, name, e.status, e.reason)


def _started(core: CoreV1Api, namespace: str, name: str, start_s: float) -> None:
    deadline = time.monotonic() + start_s
    while True:
        status = core.read_namespaced_pod(name, namespace).status
        phase = status.phase if status else None
        if phase == "Running":
            return
        if phase in ("Failed", "Succeeded") or time.monotonic() > deadline:
            conditions = (status.conditions if status else None) or []
            why = "; ".join(f"{c.type}={c.status} {c.reason or ''}".strip() for c in conditions)
            raise UsageError(f"pod {namespace}/{name} did not start to read the results ({phase}: {why})")
        time.sleep(1.0)


def unpack(packed: IO[bytes], dest: Path) -> list[Path]:
    """A gzipped tar into `dest`, nothing outside it (tarfile's data filter); the run directories
    (those with a run.json) in it."""
    try:
        with tarfile.open(fileobj=packed, mode="r:gz") as tar:
            tops = {m.name.removeprefix("./") for m in tar.getmembers() if m.isdir() and len(Path(m.name).parts) == 1}
            there = sorted(t for t in tops if (dest / t).exists())
            if there:  # never mixed into a run already here
                raise UsageError(f"{dest / there[0]} exists: collect into another directory", field="DIR")
            dest.mkdir(parents=True, exist_ok=True)
            tar.extractall(dest, filter="data")
    except (tarfile.TarError, EOFError, gzip.BadGzipFile, zlib.error) as e:  # BadGzipFile before OSError: it is one
        raise UsageError(f"the results came back damaged: {e}") from None
    except OSError as e:
        raise UsageError(f"cannot write the results: {e.strerror or e}", file=str(dest)) from None
    return sorted(p.parent for p in dest.rglob("run.json"))
