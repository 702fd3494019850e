"""A real, private Docker engine for the Docker tests, and the node image in it.

`scripts/test.sh` starts one private dockerd for the whole session (`scripts/dockerd.sh`)
and hands its socket over as MVP_TEST_DOCKER_HOST. Run directly (`pytest tests/docker`),
each test worker starts its own the same way and stops it at the end of its session. The
system's daemon (DOCKER_HOST, /var/run/docker.sock) is never used. Without dockerd or root
the tests skip, or fail under CI=true.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.docker.image import ensure_image
from tests.e2e.conftest import tiny_gguf  # noqa: F401  (the session's one tiny model)
from tests.peers import missing_peer

REPO = Path(__file__).resolve().parents[2]
DOCKERD_FIX = "run scripts/dockerd.sh install as root (apt-get install docker.io)"


@pytest.fixture(scope="session")
def docker_host() -> Iterator[str]:
    """The socket URL of a private dockerd (started here when test.sh did not)."""
    given = os.environ.get("MVP_TEST_DOCKER_HOST", "").strip()
    if given:
        yield given
        return
    if os.geteuid() != 0:
        missing_peer("dockerd", "a private dockerd needs root", DOCKERD_FIX)
    if subprocess.run(["sh", "-c", "command -v dockerd"], capture_output=True).returncode:
        missing_peer("dockerd", "dockerd is not installed", DOCKERD_FIX)
    workdir = tempfile.mkdtemp(prefix="mvp-dockerd.", dir="/tmp")
    script = str(REPO / "scripts" / "dockerd.sh")
    started = subprocess.run(
        [script, "start", workdir], capture_output=True, text=True, timeout=60, check=False
    )
    host_file = Path(workdir) / "docker_host"
    if started.returncode != 0 or not host_file.is_file():
        subprocess.run([script, "stop", workdir], check=False, timeout=60)
        missing_peer("dockerd", f"the private dockerd did not start: {started.stderr}", DOCKERD_FIX)
    try:
        yield host_file.read_text().strip()
    finally:
        subprocess.run([script, "stop", workdir], check=False, timeout=60)


@pytest.fixture(scope="session")
def docker_client(docker_host: str) -> Iterator[Any]:
    import docker  # type: ignore[import-untyped]

    client = docker.DockerClient(base_url=docker_host, timeout=60)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="session")
def node_image(docker_client: Any) -> str:
    """The test node image (python3 + llama-cpp-python's server), imported when missing."""
    return ensure_image(docker_client)


class DockerScope:
    """One test's share of the (possibly shared) test daemon: its own label prefix, so
    tests on other workers never see or touch each other's containers."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.prefix = "dk" + secrets.token_hex(4)
        self.run_id = "r-" + secrets.token_hex(4)  # for tests that make their own labels

    def containers(self) -> list[Any]:
        """This test's containers (by label), running or not."""
        return [
            c
            for c in our_containers(self.client)
            if str(c.labels.get("mvp.lease", "")).startswith(self.prefix + "-")
        ]


def our_containers(client: Any) -> list[Any]:
    """Every container mvp-tui made on the test daemon, running or not."""
    return list(client.containers.list(all=True, filters={"label": "mvp.managed-by=mvp-tui"}))


@pytest.fixture
def docker_scope(docker_client: Any) -> Iterator[DockerScope]:
    """A test's label prefix; at its end no container of it and no volume is left."""
    scope = DockerScope(docker_client)
    yield scope
    left = [c.name for c in scope.containers()]
    volumes = [v.name for v in docker_client.volumes.list()]
    assert not left and not volumes, (left, volumes)
