"""Real peers (sshd, an inference engine, a Docker engine) that some tests need.

On a laptop without the peer those tests skip, saying what to install; under CI (`CI=true`)
a missing peer is a failure, never a silent skip.
"""

from __future__ import annotations

import os
import shutil
from typing import NoReturn

import pytest


def under_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def left_out(kind: str) -> bool:
    """A run that leaves a kind of peer out on purpose, naming it in MVP_TEST_LEAVE_OUT
    (scripts/other-pythons.sh: `engine`, the tests on other Pythons need no engine build)."""
    return kind in os.environ.get("MVP_TEST_LEAVE_OUT", "").split(",")


def missing_peer(name: str, why: str, fix: str, kind: str | None = None) -> NoReturn:
    """Skip (laptop) or fail (CI) a test whose peer is absent; skip where this run leaves
    that kind of peer out on purpose."""
    message = f"peer {name} unavailable: {why}; fix: {fix}"
    if kind is not None and left_out(kind):
        pytest.skip(f"{message} (MVP_TEST_LEAVE_OUT={kind}: left out of this run)")
    if under_ci():
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def require_executable(name: str, path_candidates: list[str], fix: str) -> str:
    """The path of a peer's executable, or skip/fail via `missing_peer`."""
    for candidate in path_candidates:
        found = shutil.which(candidate) or (candidate if os.access(candidate, os.X_OK) else None)
        if found:
            return found
    missing_peer(name, f"none of {path_candidates} found", fix)


LLAMA_CPP_VERSION = "0.3.36"  # the llama-cpp-python sdist whose vendored llama.cpp is built
LLAMA_RPC_BINARIES = ("ggml-rpc-server", "llama-server")


def llama_rpc_bin_dir() -> str:
    """Where scripts/llama-rpc-build.sh caches llama.cpp's RPC binaries (by version)."""
    root = os.environ.get("MVP_LLAMA_CACHE") or os.path.expanduser("~/.cache/mvp-tui")
    return os.path.join(root, f"llama.cpp-{LLAMA_CPP_VERSION}", "bin")


def require_llama_rpc() -> str:
    """The bin directory holding `ggml-rpc-server` and `llama-server`, or skip/fail."""
    bin_dir = llama_rpc_bin_dir()
    missing = [n for n in LLAMA_RPC_BINARIES if not os.access(os.path.join(bin_dir, n), os.X_OK)]
    if missing:
        missing_peer(
            "llama.cpp RPC binaries",
            f"{', '.join(missing)} not in {bin_dir}",
            "scripts/llama-rpc-build.sh (builds them once, ~7 min on 2 cores)",
        )
    return bin_dir
