"""Local multi-node puts the workers' ggml-rpc-server (no authentication, the process's
memory to any client) on this machine's loopback: refused, naming the flag and the key,
unless acknowledged; a Docker bridge network is refused even then."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mvp_tui.config import ConfigError
from tests.foundation.test_config import load


def test_local_multi_node_without_the_acknowledgement_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        load(tmp_path, flags={"--nodes": "2"})
    text = str(refused.value)
    assert "[runtime] nodes = 2 from flag --nodes with provider local" in text
    assert "ggml-rpc-server listens on this machine's loopback with no authentication" in text
    # The refusal names both ways to acknowledge it.
    assert "--local-rpc-unauthenticated" in text
    assert "[runtime] local_rpc_unauthenticated = true" in text


@pytest.mark.parametrize(
    "ack",
    [
        {"flags": {"--local-rpc-unauthenticated": "true"}},
        {"env": {"MVP_LOCAL_RPC_UNAUTHENTICATED": "1"}},
        {"toml": "[runtime]\nlocal_rpc_unauthenticated = true\n"},
    ],
)
def test_local_multi_node_runs_once_acknowledged(tmp_path: Path, ack: dict[str, object]) -> None:
    flags = {"--nodes": "2", **ack.get("flags", {})}  # type: ignore[dict-item]
    config = load(tmp_path, toml=ack.get("toml"), env=ack.get("env"), flags=flags)  # type: ignore[arg-type]
    assert config["runtime.nodes"] == 2


def test_one_node_needs_no_acknowledgement(tmp_path: Path) -> None:
    assert load(tmp_path)["runtime.nodes"] == 1
    rented = load(tmp_path, env={"MVP_NODE_PROVIDER": "vastai"}, flags={"--nodes": "2"})
    assert rented["runtime.nodes"] == 2  # rented workers are reached through SSH tunnels


def test_docker_multi_node_on_the_host_network_needs_the_acknowledgement(tmp_path: Path) -> None:
    flags = {"--provider": "docker", "--docker-network": "host", "--nodes": "2"}
    with pytest.raises(ConfigError, match="provider docker on the host network"):
        load(tmp_path, flags=flags)
    acked = load(tmp_path, flags={**flags, "--local-rpc-unauthenticated": "yes"})
    assert acked["runtime.nodes"] == 2
    # A bridge network is refused even when acknowledged: other containers reach it.
    bridge = {**flags, "--docker-network": "bridge", "--local-rpc-unauthenticated": "yes"}
    with pytest.raises(ConfigError, match=r"\[docker\] network = 'bridge'"):
        load(tmp_path, flags=bridge)


def test_up_with_two_local_nodes_unacknowledged_exits_2_before_anything_starts(
    tmp_path: Path,
) -> None:
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF" + bytes(60))  # a model that exists: the refusal comes first
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MVP_", "VAST", "RUNPOD"))}
    env = {**base, "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "MVP_STATE_DIR": str(tmp_path / "s")}
    done = subprocess.run(
        [sys.executable, "-m", "mvp_tui", "up", "--headless", "--provider", "local",
         "--nodes", "2", "--gguf-local-path", str(model)],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "--local-rpc-unauthenticated" in done.stderr
    assert "local_rpc_unauthenticated" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == "" and not (tmp_path / "s").exists()  # no event, no run record
