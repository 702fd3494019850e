"""The node agent's multi-node roles on their own, as real processes: what a worker and a
main node check before they serve, and what they say when they cannot."""

from __future__ import annotations

import asyncio
import http.client
import socket
from pathlib import Path

import asyncssh
import pytest

from tests.agent.agent_run import AgentRun, agent_env


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # nothing listens here once the socket is closed


async def test_a_worker_down_at_start_fails_the_main_before_its_engine_starts(
    rpc_bin_dir: str, tiny_gguf: Path, tmp_path: Path
) -> None:
    endpoint = f"127.0.0.1:{_closed_port()}"
    env = agent_env(tmp_path, MVP_NODE_ROLE="main", MVP_RPC_SERVERS=endpoint, MVP_RPC_NODES="2",
                    MVP_RPC_BIN_DIR=rpc_bin_dir, MVP_GGUF_LOCAL_PATH=str(tiny_gguf))
    agent = await AgentRun.start(env)
    fatal = await agent.weights(within=60)
    assert await agent.wait_exit() == 1
    assert fatal["type"] == "WorkerFatal" and fatal["phase"] == "engine_start"
    assert (
        fatal["reason"]
        == f"worker node 2 (RPC {endpoint}) does not answer: llama-server would abort"
    )
    assert not any(
        p.get("phase") == "engine_health" for _, p in agent.frames if isinstance(p, dict)
    )


async def test_a_worker_without_the_rpc_binary_says_what_is_missing(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    env = agent_env(tmp_path, MVP_NODE_ROLE="worker", MVP_RPC_BIN_DIR=str(empty),
                    MVP_LOGICAL_NODE_ID="2", PATH=str(empty),
                    MVP_LLAMA_CACHE=str(tmp_path / "no-build"))
    agent = await AgentRun.start(env)
    fatal = await agent.weights(within=60)
    assert await agent.wait_exit() == 1
    assert "ggml-rpc-server is not in MVP_RPC_BIN_DIR" in fatal["reason"]
    assert "the build cache" in fatal["reason"]
    assert "-DGGML_RPC=ON" in fatal["fix"] and "scripts/llama-rpc-build.sh" in fatal["fix"]


def test_the_projects_own_rpc_build_is_found_without_path_or_bin_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mvp_tui.node.roles import RPC_SERVER_BIN, find_engine_binary

    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    for version in ("0.3.9", "0.3.36"):  # the newest build wins
        bin_dir = tmp_path / f"llama.cpp-{version}" / "bin"
        bin_dir.mkdir(parents=True)
        binary = bin_dir / RPC_SERVER_BIN
        binary.write_text("#!/bin/sh\n")
        binary.chmod(0o755)
    env = {"MVP_LLAMA_CACHE": str(tmp_path)}
    found = find_engine_binary(RPC_SERVER_BIN, "", env)
    assert found == str(tmp_path / "llama.cpp-0.3.36" / "bin" / RPC_SERVER_BIN)


async def test_a_bad_role_setting_is_a_config_failure_naming_the_key(tmp_path: Path) -> None:
    env = agent_env(tmp_path, MVP_NODE_ROLE="main", MVP_RPC_SERVERS="nohostport")
    agent = await AgentRun.start(env)
    fatal = await agent.weights(within=60)
    assert await agent.wait_exit() == 2
    assert "MVP_RPC_SERVERS entry 'nohostport' is not host:port" in fatal["reason"]


async def test_a_rented_worker_authorizes_the_tunnel_key_for_its_port_only(
    rpc_bin_dir: str, tmp_path: Path
) -> None:
    authorized = tmp_path / "authorized_keys"
    authorized.write_text("ssh-ed25519 AAAAexisting me@laptop\n")
    public = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    env = agent_env(tmp_path, MVP_NODE_ROLE="worker", MVP_RPC_BIN_DIR=rpc_bin_dir,
                    MVP_LOGICAL_NODE_ID="2", MVP_RPC_TUNNEL_PUBKEY=public,
                    MVP_RPC_AUTHORIZED_FILE=str(authorized))
    agent = await AgentRun.start(env)
    ready = await agent.weights(within=60)
    assert ready["type"] == "RpcServerReady"
    port = ready["endpoint"].rpartition(":")[2]
    lines = authorized.read_text().splitlines()
    assert lines[0] == "ssh-ed25519 AAAAexisting me@laptop"
    kind, blob = public.split()[:2]
    assert lines[1] == (
        f'restrict,port-forwarding,permitopen="127.0.0.1:{port}",permitlisten="127.0.0.1:1",'
        f'command="/bin/false" {kind} {blob} mvp-tui-tunnel:r-0000abcd'
    )
    assert authorized.stat().st_mode & 0o077 == 0
    await agent.send("shutdown\n")
    assert await agent.wait_exit() == 0
    assert authorized.read_text() == "ssh-ed25519 AAAAexisting me@laptop\n"


def _status(port: int, path: str, headers: dict[str, str]) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", path, headers=headers)
    answer = conn.getresponse()
    answer.read()
    conn.close()
    return answer.status


async def test_the_main_node_serves_behind_the_gate_with_its_key_and_idle_stop(
    rpc_bin_dir: str, tiny_gguf: Path, tmp_path: Path
) -> None:
    key = "mvp-multinode-key-0123456789abcdef"
    worker = await AgentRun.start(agent_env(
        tmp_path / "w", MVP_NODE_ROLE="worker", MVP_RPC_BIN_DIR=rpc_bin_dir,
        MVP_LOGICAL_NODE_ID="2"))
    main: AgentRun | None = None
    try:
        ready = await worker.weights(within=60)
        assert ready["type"] == "RpcServerReady"
        main = await AgentRun.start(agent_env(
            tmp_path / "m", MVP_NODE_ROLE="main", MVP_RPC_SERVERS=ready["endpoint"],
            MVP_RPC_NODES="2", MVP_RPC_BIN_DIR=rpc_bin_dir, MVP_GGUF_LOCAL_PATH=str(tiny_gguf),
            MVP_API_KEY=key, MVP_NODE_PROVIDER="local", MVP_IDLE_STOP_MINS="30"))
        loaded = await main.weights(within=90)
        assert loaded["type"] == "WeightsLoaded", loaded
        assert loaded["auth"] == "key" and loaded["idle_stop_mins"] == 30
        port, private = loaded["port"], main.phase_detail("engine_start", "ready")["port"]
        assert private != port
        bearer = {"Authorization": f"Bearer {key}"}
        assert await asyncio.to_thread(_status, port, "/v1/models", {}) == 401
        assert await asyncio.to_thread(_status, port, "/v1/models", bearer) == 200
        rebound = {**bearer, "Host": f"evil.example:{port}"}
        assert await asyncio.to_thread(_status, port, "/v1/models", rebound) == 403
        # llama-server checks the key itself: its private port is no way around the gate.
        assert await asyncio.to_thread(_status, private, "/v1/models", {}) == 401
        assert main.find(lambda c, p: isinstance(p, dict)
                         and p.get("state") == "idle_stop_armed") is not None
        await main.send("shutdown\n")
        assert await main.wait_exit() == 0
    finally:
        if main is not None:
            await main.kill()
        await worker.send("shutdown\n")
        await worker.wait_exit()
        await worker.kill()
