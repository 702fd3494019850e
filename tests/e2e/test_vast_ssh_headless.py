"""A rented node end to end, headless: the fake Vast API leases an "instance" whose SSH
endpoint is a real OpenSSH sshd on loopback; the engine uploads the node agent over SFTP,
the agent serves the tiny model with llama.cpp's server, prompts stream through the SSH port
forward, and teardown leaves no process and nothing billing."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from tests.agent.procs import alive
from tests.e2e.headless import HeadlessRun, event
from tests.e2e.node import Node, container_env, vast_node_env
from tests.e2e.test_vast_headless import cli
from tests.fakes.vastai_server import FakeVast

KEY = "fake-vast-key-0123456789"


async def test_rented_node_serves_a_prompt_over_ssh_and_tears_down(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    sshd = node.sshd
    with FakeVast(api_key=KEY) as fake:
        fake.add_offer(dph_total=0.40)
        fake.ssh_endpoint = ("127.0.0.1", sshd.port, True)
        env = vast_node_env(fake, node, KEY, tmp_path)
        args = ["--yes", "--gguf-local-path", str(tiny_gguf), "--prompt", "hello node",
                "--max-tokens", "12", "--down-after"]
        async with HeadlessRun(args, tmp_path / "state", env=env) as run:
            code = await run.finish(within=180)
        assert code == 0, run.stderr
        assert fake.billing() == []
    (running,) = run.events("lease_running")
    assert running["port"] == sshd.port and running["via"] == "direct"
    assert run.events("host_key_pinned")[0]["fingerprint"] == sshd.fingerprint
    (ready,) = run.events("node_ready")
    assert ready["local_url"].startswith("http://127.0.0.1:")
    assert run.events("port_forwarded")
    (done,) = run.events("prompt_done")
    assert done["tokens_generated"] >= 1
    weights = [f["payload"] for f in run.frames("mvp.worker.weights")]
    assert weights[0]["type"] == "WeightsLoaded"
    assert not alive(weights[0]["engine_pid"])
    (started,) = run.events("agent_started")
    assert not alive(started["pid"])
    assert run.events("lease_deleted")
    record_text = "".join(p.read_text() for p in (tmp_path / "state").rglob("*.json"))
    assert KEY not in record_text and KEY not in run.stderr


async def test_until_ready_leaves_the_rented_node_serving_for_down(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    sshd, client = node.sshd, node.client_key
    with FakeVast(api_key=KEY) as fake:
        fake.add_offer(dph_total=0.40)
        fake.ssh_endpoint = ("127.0.0.1", sshd.port, True)
        env = {
            "MVP_NODE_PROVIDER": "vastai", "VASTAI_API_KEY": KEY, "VAST_URL": fake.url,
            "MVP_VASTAI_SSH_IDENTITY": str(client), "MVP_VASTAI_POLL_INTERVAL_SECS": "1",
            "MVP_NODE_PYTHON": sys.executable, "MVP_NODE_DIR": str(node.node_dir),
            **container_env(fake, tmp_path),
        }
        async with HeadlessRun(["--yes", "--until", "ready", "--gguf-local-path", str(tiny_gguf)],
                               tmp_path / "state", env=env) as run:
            code = await run.finish(within=180)
        assert code == 0, run.stderr
        assert len(fake.billing()) == 1
        await run.until(event("node_ready"))
        engine_pid = run.frames("mvp.worker.weights")[0]["payload"]["engine_pid"]
        assert alive(engine_pid), "the node keeps serving after the command exits"
        result = cli(
            "down", "--all", "--yes", env={**env, "MVP_STATE_DIR": str(tmp_path / "state")}
        )
        assert result.returncode == 0, result.stderr
        assert fake.billing() == []
    # Destroying a rented machine ends everything on it; here the "node" is this machine,
    # so stop what the agent left running, as the provider's destroy would.
    os.kill(engine_pid, signal.SIGTERM)
