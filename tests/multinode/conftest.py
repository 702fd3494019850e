"""Fixtures for multi-node runs on llama.cpp's RPC backend: the real `ggml-rpc-server` and
`llama-server` binaries (built once by scripts/llama-rpc-build.sh; missing → skip on a
laptop, fail under CI) and tiny GGUF models the native llama-server loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.tiny_gguf import write_tiny_gguf
from tests.peers import require_llama_rpc


@pytest.fixture(scope="session")
def rpc_bin_dir() -> str:
    return require_llama_rpc()


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_gguf(tmp_path_factory.mktemp("model") / "tiny.gguf")


@pytest.fixture(scope="session")
def four_layer_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four layers: enough for two stages with an uneven split."""
    return write_tiny_gguf(tmp_path_factory.mktemp("model4") / "tiny4.gguf", layers=4)


@pytest.fixture(scope="session")
def slow_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Big enough that a 900-token answer over RPC takes seconds (time to kill a worker)."""
    return write_tiny_gguf(
        tmp_path_factory.mktemp("model-slow") / "slow.gguf",
        f16=True, embd=256, layers=4, heads=8, ctx=1024,
    )
