"""Fixtures for the node agent and local provider tests: the tiny model, the real engine
(llama_cpp.server; missing → skip on a laptop, fail under CI), a fake llama-server on PATH
and a fake model hub on loopback."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent.hub_server import HubServer
from tests.fakes.tiny_gguf import write_tiny_gguf
from tests.peers import missing_peer

HERE = Path(__file__).parent


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_gguf(tmp_path_factory.mktemp("model") / "tiny.gguf", seed=0)


@pytest.fixture(scope="session")
def tiny_bytes(tiny_model: Path) -> bytes:
    return tiny_model.read_bytes()


@pytest.fixture
def real_engine() -> None:
    """The agent's default engine must be importable by the Python that runs the agent."""
    if importlib.util.find_spec("llama_cpp") is None:
        missing_peer(
            "llama_cpp.server",
            f"llama-cpp-python is not installed for {sys.executable}",
            "./scripts/setup.sh dev local (builds llama.cpp from source, ~5 min)",
            kind="engine",
        )


@pytest.fixture
def fake_llama_server_dir(tmp_path: Path) -> Path:
    """A directory holding an executable `llama-server` (the fake), to put first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "llama-server"
    fake = HERE / "fake_llama_server.py"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{fake}" "$@"\n')
    script.chmod(0o755)
    return bin_dir


@pytest.fixture
def path_with(fake_llama_server_dir: Path) -> str:
    return f"{fake_llama_server_dir}{os.pathsep}{os.environ.get('PATH', '')}"


@pytest.fixture
def hub() -> Iterator[HubServer]:
    with HubServer() as server:
        yield server
