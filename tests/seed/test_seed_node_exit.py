"""A local node whose agent (or a Docker node whose container) exits on its own ends the
run, as the seed's `Exited` observation does: `NodeStopped` with its provider on
`mvp.provisioning.events`, the run fails (exit 1) and what it leased is torn down,
confirmed. Contract: 002_…txt `emit_plugin_observation`, `drain_observations`."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from tests.agent.procs import alive
from tests.docker.conftest import DockerScope
from tests.docker.conftest import docker_client as docker_client
from tests.docker.conftest import docker_host as docker_host
from tests.docker.conftest import docker_scope as docker_scope
from tests.docker.conftest import node_image as node_image
from tests.e2e.headless import HeadlessRun, event


async def test_a_local_agent_killed_while_serving_ends_the_run(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    args = ["--gguf-local-path", str(tiny_gguf), "--rpc-bind", "127.0.0.1:0"]
    async with HeadlessRun(args, tmp_path / "state") as run:
        await run.until(event("prompt_rpc_listening"), within=90)
        (running,) = run.events("lease_running")
        pid = int(running["provider_id"].removeprefix("local-"))
        os.kill(pid, signal.SIGKILL)
        code = await run.finish(within=60)
    assert code == 1, run.stderr
    (exited,) = run.events("agent_exited")
    assert exited["exit_code"] == -9 and exited["before_ready"] is False
    (failed,) = run.events("node_failed")
    assert failed["reason"] == "the node's agent exited on its own (code -9)"
    kinds = [
        (f["payload"]["event"]["kind"], f["payload"]["event"]["provider"])
        for f in run.frames("mvp.provisioning.events")
    ]
    assert ("NodeStopped", "local") in kinds
    stopped = [
        f["payload"]["event"]["message"]
        for f in run.frames("mvp.provisioning.events")
        if f["payload"]["event"]["kind"] == "NodeStopped"
    ]
    assert stopped[0] == "node process exited with code -9"
    assert run.events("lease_deleted") and not alive(pid)
    assert "the node's agent exited on its own" in run.stderr


@pytest.mark.peer("dockerd")
async def test_a_node_container_that_exits_on_its_own_ends_the_run(
    tiny_gguf: Path, tmp_path: Path, docker_host: str, node_image: str, docker_scope: DockerScope
) -> None:
    args = [
        "--provider",
        "docker",
        "--label-prefix",
        docker_scope.prefix,
        "--docker-network",
        "host",
        "--docker-image",
        node_image,
        "--rpc-bind",
        "127.0.0.1:0",
        "--gguf-local-path",
        str(tiny_gguf),
    ]
    env = {"DOCKER_HOST": docker_host, "MVP_HF_ENDPOINT": "http://127.0.0.1:9"}
    async with HeadlessRun(args, tmp_path / "state", env=env) as run:
        await run.until(event("prompt_rpc_listening"), within=90)
        (running,) = run.events("lease_running")
        container = docker_scope.client.containers.get(running["provider_id"])
        await asyncio.to_thread(container.kill, "SIGKILL")  # not by the run: on its own
        code = await run.finish(within=60)
    assert code == 1, run.stderr
    (exited,) = run.events("agent_exited")
    assert exited["exit_code"] == 137 and exited["before_ready"] is False
    events = [f["payload"]["event"] for f in run.frames("mvp.provisioning.events")]
    stopped = [(e["provider"], e["message"]) for e in events if e["kind"] == "NodeStopped"]
    assert stopped[0] == ("docker", "node process exited with code 137")
    assert run.events("node_failed") and run.events("lease_deleted")
