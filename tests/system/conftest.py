from __future__ import annotations

from collections.abc import Iterator

import docker
import pytest

from tests.system.dockerd import build_image, dockerd


@pytest.fixture(scope="session")
def daemon() -> Iterator[tuple[docker.DockerClient, str]]:
    """A dockerd of the session's own, and the busybox image built on it."""
    with dockerd() as client:
        yield client, build_image(client)
