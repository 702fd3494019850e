"""Fixtures for the prompt tests: generated models and real llama-cpp-python servers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fakes.tiny_gguf import write_tiny_gguf
from tests.prompt.engine import LlamaServer

TINY_CTX = 256
SLOW_CTX = 1024


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_gguf(tmp_path_factory.mktemp("models") / "tiny.gguf", ctx=TINY_CTX)


@pytest.fixture(scope="session")
def slow_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 9 MB: streams of up to 1,000 tokens, long enough to cancel or kill mid-way."""
    path = tmp_path_factory.mktemp("models") / "slow.gguf"
    return write_tiny_gguf(path, f16=True, embd=256, layers=4, heads=8, ctx=SLOW_CTX)


@pytest.fixture(scope="session")
def engine(tiny_model: Path) -> Iterator[LlamaServer]:
    """One shared tiny-model server (context 256) for tests that leave it running."""
    server = LlamaServer(tiny_model, n_ctx=TINY_CTX)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def private_engine(slow_model: Path) -> Iterator[Callable[[], LlamaServer]]:
    """Start a server of the slow model that only this test uses (it may kill it)."""
    started: list[LlamaServer] = []

    def start() -> LlamaServer:
        server = LlamaServer(slow_model, n_ctx=SLOW_CTX)
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop()
