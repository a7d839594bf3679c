"""A Docker daemon a test session starts for itself (its own socket, data root and no host
networking changes), and a tiny image built from the host's static busybox: no registry needed."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
from docker.models.containers import Container

from tests import ahead

IMAGE = "llmchaos-test/busybox:1"
DOCKERFILE = """FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
CMD ["sh"]
"""
PACKAGES = {"dockerd": "docker.io", "busybox": "busybox-static"}
ALLOW = {"llmchaos.allow": "true"}  # the label a container needs before a fault may hit it


def install_missing() -> None:
    """`make test` installs these; a test run on its own installs what is still missing."""
    missing = [pkg for cmd, pkg in PACKAGES.items() if shutil.which(cmd) is None]
    busybox = shutil.which("busybox")
    if busybox and subprocess.run(["ldd", busybox], capture_output=True).returncode == 0:
        missing.append("busybox-static")  # a dynamic busybox cannot run alone in an empty image
    if missing:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(
            ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing],
            env=env,
            check=True,
            capture_output=True,
        )


@contextlib.contextmanager
def dockerd() -> Iterator[docker.DockerClient]:
    """Start dockerd (no iptables, no default bridge) on a private socket; stop it and remove its files.
    Started by a timing test, its containers run ahead of the other tests too (tests/ahead.py)."""
    install_missing()
    parent = ahead.cgroup()
    root = Path(tempfile.mkdtemp(prefix="llmc-dockerd-"))
    url = f"unix://{root}/docker.sock"
    log = open(root / "dockerd.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            "dockerd",
            "--iptables=false",
            "--ip-masq=false",
            "--bridge=none",
            "--data-root",
            str(root / "data"),
            "--exec-root",
            str(root / "exec"),
            "--pidfile",
            str(root / "dockerd.pid"),
            "-H",
            url,
            *(["--cgroup-parent", parent] if parent else []),
        ],
        stdout=log,
        stderr=log,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(Exception):  # docker's and requests' errors until the socket answers
                client = docker.DockerClient(base_url=url, timeout=60)
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"dockerd did not start: {(root / 'dockerd.log').read_text()[-2000:]}")
            time.sleep(0.2)
        try:
            yield client
        finally:
            for c in client.containers.list(all=True):
                c.remove(force=True)
            client.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        with open("/proc/self/mounts") as f:  # dockerd leaves its netns file bound under exec-root
            mounts = [line.split()[1] for line in f if line.split()[1].startswith(str(root))]
        for path in reversed(mounts):
            subprocess.run(["umount", "-l", path], check=False)
        shutil.rmtree(root)


def build_image(client: docker.DockerClient) -> str:
    with tempfile.TemporaryDirectory() as ctx:
        shutil.copy(shutil.which("busybox"), Path(ctx) / "busybox")  # type: ignore[arg-type]  # dockerd() ran install_missing(): busybox is on PATH
        (Path(ctx) / "Dockerfile").write_text(DOCKERFILE)
        client.images.build(path=ctx, tag=IMAGE, rm=True)
    return IMAGE


def sleeper(client: docker.DockerClient, prefix: str, labels: dict[str, str] = ALLOW, **options: object) -> Container:
    """A container of the test image that only sleeps, off any network, named `prefix-<random>`."""
    return client.containers.run(
        IMAGE,
        ["sleep", "600"],
        detach=True,
        network_mode="none",
        labels=labels,
        name=f"{prefix}-{uuid.uuid4().hex[:6]}",
        **options,
    )


def sock(client: docker.DockerClient) -> str:
    """The daemon's URL, for a schedule's docker target."""
    return "unix://" + client.api._custom_adapter.socket_path


def change_cost(client: docker.DockerClient) -> float:
    """What a docker window's change costs on this machine now: a spare container inspected, paused
    and unpaused, throttled and freed in three rounds, then inspected and killed, to its exit (what a
    kill window waits for); the slowest (seconds)."""
    spare = sleeper(client, "llmc-spare")
    try:
        took = []
        for _ in range(3):
            t = time.monotonic()
            spare.reload()
            spare.pause()
            spare.unpause()
            spare.update(cpu_period=100_000, cpu_quota=25_000)
            spare.update(cpu_quota=-1)
            took.append(time.monotonic() - t)
        t = time.monotonic()
        spare.reload()
        spare.kill()
        spare.wait()
        took.append(time.monotonic() - t)
        return max(took)
    finally:
        spare.remove(force=True)
