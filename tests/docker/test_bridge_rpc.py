"""A worker's ggml-rpc-server never listens where others reach it (no daemon needed): the
bridge launcher tells the agent where its *engine* binds (MVP_ENGINE_HOST) and patches
nothing, the RPC server binds loopback through its own constant, and more than one node on a
bridge network is refused with exit 2 before anything starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mvp_tui.node.roles import RPC_SERVER_BIN
from mvp_tui.node.settings import ConfigError, Settings
from mvp_tui.node_protocol import RPC_SERVER_READY, WEIGHTS_CHANNEL
from mvp_tui.providers.docker.spec import DockerSettings, create_config
from tests.agent.agent_run import AGENT_PATH, AgentRun, agent_env

# A stand-in ggml-rpc-server: listens where it is told (-H, -p) and writes its argv down.
FAKE_RPC_SERVER = """\
import socket, sys
args = sys.argv[1:]
host, port = args[args.index("-H") + 1], int(args[args.index("-p") + 1])
with open(sys.argv[0] + ".argv", "w") as out:
    out.write(" ".join(args))
server = socket.create_server((host, port))
while True:
    server.accept()[0].close()
"""


def _fake_rpc_bin(tmp: Path) -> Path:
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    binary = bin_dir / RPC_SERVER_BIN
    binary.write_text(f"#!{sys.executable}\n{FAKE_RPC_SERVER}")
    binary.chmod(0o755)
    return bin_dir


async def test_a_worker_in_a_bridge_container_binds_its_rpc_server_on_loopback(
    tmp_path: Path,
) -> None:
    bin_dir = _fake_rpc_bin(tmp_path)
    request = {"MVP_RUN_ID": "r-0000abcd", "MVP_NODE_ROLE": "worker",
               "MVP_LOGICAL_NODE_ID": "2", "MVP_RPC_BIN_DIR": str(bin_dir)}
    agent_source = AGENT_PATH.read_bytes()
    settings = DockerSettings(image="i", gpus="none", network="bridge")
    _, config = create_config(
        settings, image="i", label="mvp-r-0000abcd-2-1", request_env=request,
        agent_bytes=len(agent_source),
    )
    container_env = dict(item.split("=", 1) for item in config["Env"])
    assert container_env["MVP_ENGINE_HOST"] == "0.0.0.0"  # the engine's bind, not the RPC's
    # The container's command, run here: the launcher reads the agent from stdin and runs it.
    launcher = tmp_path / "launch.py"
    launcher.write_text(config["Cmd"][2])
    env = agent_env(tmp_path, **{**container_env, "MVP_LOGICAL_NODE_ID": "2"})
    agent = await AgentRun.start(env, agent=launcher)
    try:
        await agent.send(agent_source)
        ready = await agent.wait_for(
            lambda ch, p: ch == WEIGHTS_CHANNEL and isinstance(p, dict), within=60
        )
        assert ready["type"] == RPC_SERVER_READY, ready
        argv = (bin_dir / f"{RPC_SERVER_BIN}.argv").read_text().split()
        assert argv[argv.index("-H") + 1] == "127.0.0.1"
        assert ready["endpoint"] == f"127.0.0.1:{ready['port']}"
        await agent.send("shutdown\n")
        assert await agent.wait_exit(within=60) == 0
    finally:
        await agent.kill()


def test_an_engine_host_other_than_loopback_or_every_interface_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"MVP_ENGINE_HOST='192\.0\.2\.5'"):
        Settings({"MVP_ENGINE_HOST": "192.0.2.5"})
    assert Settings({}).engine_host == "127.0.0.1"


def _cli(tmp: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MVP_", "VAST", "RUNPOD"))}
    env = {**base, "XDG_CONFIG_HOME": str(tmp / "xdg"), "MVP_STATE_DIR": str(tmp / "state"),
           **env}
    return subprocess.run([sys.executable, "-m", "mvp_tui", *args], capture_output=True,
                          text=True, env=env, timeout=120, check=False)


@pytest.mark.parametrize("network", [(), ("--docker-network", "bridge")])
def test_two_nodes_on_a_bridge_network_exit_2_naming_the_network(
    tmp_path: Path, network: tuple[str, ...]
) -> None:
    done = _cli(tmp_path, "up", "--headless", "--provider", "docker", "--nodes", "2", *network,
                "--gguf-local-path", str(tmp_path / "absent.gguf"))
    assert done.returncode == 2, done.stderr
    assert "[docker] network = 'bridge'" in done.stderr
    assert "[runtime] nodes = 2 from flag --nodes" in done.stderr
    assert "ggml-rpc-server" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""  # nothing started: no event was printed
    assert not (tmp_path / "state").exists()  # and no run was recorded
