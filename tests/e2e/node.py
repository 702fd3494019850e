"""A "rented node" for end-to-end tests: a real OpenSSH sshd on loopback that trusts a fresh
client key, with the agent's directory under the test's tmp dir. Whatever a test leaves
running there (agent, engine) is stopped afterwards, even when the test failed."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import asyncssh
import pytest

from tests.fakes.vastai_server import FakeVast
from tests.ssh.sshd import Sshd, sshd_executable, write_key


@dataclass(frozen=True)
class Node:
    sshd: Sshd
    client_key: Path
    node_dir: Path  # MVP_NODE_DIR for the run

    @property
    def port(self) -> int:
        return self.sshd.port


def processes_under(directory: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if os.readlink(entry / "cwd").startswith(str(directory)):
                    found.append(int(entry.name))
    return found


@contextlib.asynccontextmanager
async def rented_node(directory: Path) -> AsyncIterator[Node]:
    """A node under `directory`: its sshd started, then stopped with whatever ran there."""
    client = write_key(directory / "id_ed25519", asyncssh.generate_private_key("ssh-ed25519"))
    sshd = Sshd(sshd_executable(), directory / "sshd")
    sshd.authorize(asyncssh.read_private_key(str(client)).export_public_key().decode())
    node_dir = directory / "node"
    await sshd.start()
    try:
        yield Node(sshd, client, node_dir)
    finally:
        await sshd.stop()
        for pid in processes_under(node_dir):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Node]:
    async with rented_node(tmp_path) as rented:
        yield rented


def container_env(fake: FakeVast, directory: Path) -> dict[str, str]:
    """The rented node's container environment: the fake writes each new instance's id and
    instance key where PID 1's environ would be, and the agent is told to read it there."""
    path = directory / "container.environ"
    fake.node_env_file = path
    return {"MVP_NODE_PROVIDER_ENV_FILE": str(path)}


def vast_node_env(fake: FakeVast, node: Node, key: str, directory: Path) -> dict[str, str]:
    """A run renting from the fake Vast API whose instance is `node` (this machine's sshd,
    the engine in this venv)."""
    return {
        "MVP_NODE_PROVIDER": "vastai", "VASTAI_API_KEY": key, "VAST_URL": fake.url,
        "MVP_VASTAI_SSH_IDENTITY": str(node.client_key), "MVP_VASTAI_POLL_INTERVAL_SECS": "1",
        "MVP_NODE_PYTHON": sys.executable, "MVP_NODE_DIR": str(node.node_dir),
        "MVP_SSH_RETRY_INITIAL_SECS": "0.2", **container_env(fake, directory),
        **node.sshd.rotation_env(),
    }
