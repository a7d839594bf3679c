from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import pytest

from tests.system import kernel_lab
from tests.system.dockerd import build_image, dockerd


@pytest.fixture(scope="session")
def daemon() -> Iterator[tuple[docker.DockerClient, str]]:
    """A dockerd of the session's own, and the busybox image built on it."""
    with dockerd() as client:
        yield client, build_image(client)


@pytest.fixture
def lab(tmp_path: Path) -> Callable[..., dict]:
    """Run a lab_probe spec in the kernel lab (skipped, with the reason, where the lab cannot boot)."""
    reason = kernel_lab.unavailable()
    if reason:
        pytest.skip(reason)

    def measure(spec: dict, modules: tuple[str, ...] = kernel_lab.NET_MODULES, timeout: float = 120) -> dict:
        (tmp_path / "spec.json").write_text(json.dumps(spec))
        command = f"{shlex.quote(sys.executable)} -m tests.system.lab_probe {tmp_path}/spec.json {tmp_path}/out.json"
        run = kernel_lab.run(command, tmp_path, timeout=timeout, modules=modules)
        assert run.returncode == 0, run.failure()
        return json.loads((tmp_path / "out.json").read_text())

    return measure
