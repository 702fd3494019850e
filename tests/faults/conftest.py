"""Fixtures of the fault matrix: a fake Vast server per case, its environment, the verdict.

The rented node (`node`: a real OpenSSH sshd on loopback) comes from tests/conftest.py, the
tiny model from tests/e2e/conftest.py; both skip on a laptop without the peer and fail
under CI=true (tests/peers.py).
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import asyncssh
import pytest

from tests.e2e.conftest import tiny_gguf  # noqa: F401  (the session's one tiny model)
from tests.e2e.node import Node, container_env
from tests.fakes.vastai_server import FakeVast
from tests.faults.harness import KEY, Verdict, vast_env


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port held bound but not listening: SSH to it is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.fixture
def fake(closed_port: int) -> Iterator[FakeVast]:
    with FakeVast(api_key=KEY, loading_polls=1) as server:
        server.ssh_endpoint = ("127.0.0.1", closed_port, True)
        server.add_offer(dph_total=0.30, gpu_name="RTX 3090")
        server.add_offer(dph_total=0.50, gpu_name="RTX 4090")
        server.add_offer(dph_total=2.50, gpu_name="H100 SXM")  # over the price cap
        yield server


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def identity(tmp_path: Path) -> Path:
    path = tmp_path / "id_ed25519"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(path))
    path.chmod(0o600)
    return path


@pytest.fixture
def env(fake: FakeVast, identity: Path, state: Path) -> dict[str, str]:
    """Renting on the fake; the instances' SSH port is closed (bring-up never succeeds)."""
    return vast_env(fake, identity, state)


@pytest.fixture
def node_env(
    node: Node,
    tiny_gguf: Path,  # noqa: F811
    fake: FakeVast,
    state: Path,
) -> dict[str, str]:
    """Renting on the fake, whose instances are the real sshd node: the real agent serves
    the tiny model with llama.cpp."""
    fake.ssh_endpoint = ("127.0.0.1", node.port, True)
    return {
        **vast_env(fake, node.client_key, state),
        "MVP_NODE_PYTHON": sys.executable,  # the "node" is this machine, engine in our venv
        "MVP_NODE_DIR": str(node.node_dir),
        "MVP_GGUF_LOCAL_PATH": str(tiny_gguf),
        "MVP_PROMPT_RPC_BIND": "127.0.0.1:0",
        **container_env(fake, state.parent),
    }


@pytest.fixture
def verdict(record_property: Callable[[str, object], None], fake: FakeVast) -> Iterator[Verdict]:
    """The case's checks; at the end, how many instances it left alive (for the table)."""
    verdict = Verdict(record_property)
    yield verdict
    record_property("instances_left", len(fake.billing()))
