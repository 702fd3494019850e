"""`mvp-tui up --headless --provider docker` against a real (private) dockerd: the node agent
runs in a container of the test image, its engine serves the tiny model, and every way out
leaves no container, no volume and no process behind.

The tests use `[docker] network = "host"` (this machine allows no bridge); the bridge path is
covered by the container-spec unit tests.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.agent.procs import alive
from tests.docker.conftest import DockerScope
from tests.e2e.headless import HeadlessRun, event, weights

pytestmark = pytest.mark.peer("dockerd")


def _args(scope: DockerScope, image: str, *extra: str) -> list[str]:
    return [
        "--provider", "docker",
        "--label-prefix", scope.prefix,
        "--docker-network", "host",
        "--docker-image", image,
        "--rpc-bind", "127.0.0.1:0",
        *extra,
    ]


def _env(docker_host: str, **extra: str) -> dict[str, str]:
    # The node must never download: a model source that is not the mounted file fails fast.
    return {"DOCKER_HOST": docker_host, "MVP_HF_ENDPOINT": "http://127.0.0.1:9", **extra}


def _agent_processes(run: HeadlessRun) -> list[int]:
    """Host pids of this run's node agent or engine, in a container or not (found by the
    run id in their environment)."""
    (started,) = run.events("run_started")
    marker = f"MVP_RUN_ID={started['run_id']}".encode() + b"\0"
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:
            continue
        if marker in environ and alive(int(entry)):
            found.append(int(entry))
    return found


def _container_id(run: HeadlessRun) -> str:
    (answered,) = [e for e in run.events("attempt_answered") if e.get("provider_id")]
    return str(answered["provider_id"])


async def _removed(client: Any, container_id: str, within: float) -> None:
    """Returns once the daemon has removed the container (its own `wait` for "removed"; a
    container already gone answers 404 at once)."""
    import docker  # type: ignore[import-untyped]

    def wait() -> None:
        try:
            client.api.wait(container_id, timeout=within, condition="removed")
        except docker.errors.NotFound:
            return

    await asyncio.wait_for(asyncio.to_thread(wait), within + 1)


async def test_whole_run_streams_tokens_and_leaves_nothing(
    tiny_gguf: Path, tmp_path: Path, docker_host: str, node_image: str, docker_scope: DockerScope
) -> None:
    args = _args(
        docker_scope,
        node_image,
        "--gguf-local-path", str(tiny_gguf),
        "--prompt", "hello there",
        "--max-tokens", "16",
        "--down-after",
    )
    async with HeadlessRun(args, tmp_path / "state", env=_env(docker_host)) as run:
        code = await run.finish()
    assert code == 0, run.stderr
    (offers,) = run.events("offer_picked")
    assert "CPU only" in offers["gpu_name"]  # no NVIDIA runtime here: the offer says so
    (ready,) = run.events("node_ready")
    assert ready["local_url"].startswith("http://127.0.0.1:")
    (done,) = run.events("prompt_done")
    assert done["tokens_generated"] >= 1 and done["final_text"]
    assert "".join(e["text"] for e in run.events("text_delta")) == done["final_text"]
    model = [
        f["payload"]
        for f in run.frames("mvp.node.1.agent")
        if f["payload"].get("phase") == "model" and f["payload"].get("status") == "ready"
    ]
    assert model[0]["detail"]["path"] == f"/models/local/{tiny_gguf.name}"
    provider_lines = [f["payload"]["line"]["line"] for f in run.frames(
        "mvp.provisioning.logs.node.1.provider")]
    assert any("mvp-orchestrator-" in line and "network host" in line for line in provider_lines)
    exits = [
        f["payload"]
        for f in run.frames("mvp.node.1.agent")
        if f["payload"].get("phase") == "agent_exit"
    ]
    assert exits and exits[-1]["detail"]["source"] == "stdin"  # "shutdown" went down stdin
    assert run.events("lease_deleted") and run.events("run_finished")[-1]["exit_code"] == 0
    assert not _agent_processes(run)


async def test_engine_killed_in_the_container_is_fatal_and_exits_1(
    tiny_gguf: Path, tmp_path: Path, docker_host: str, node_image: str, docker_scope: DockerScope
) -> None:
    client = docker_scope.client
    args = _args(docker_scope, node_image, "--gguf-local-path", str(tiny_gguf))
    async with HeadlessRun(args, tmp_path / "state", env=_env(docker_host)) as run:
        loaded = await run.until(weights("WeightsLoaded"))
        await run.until(event("prompt_rpc_listening"))
        container = client.containers.get(_container_id(run))
        pid = loaded["payload"]["engine_pid"]  # in the container's pid namespace
        killed = await asyncio.to_thread(
            container.exec_run, ["python3", "-c", f"import os; os.kill({pid}, 9)"]
        )
        assert killed.exit_code == 0, killed.output
        fatal = await run.until(weights("WorkerFatal"))
        code = await run.finish()
    assert "engine exited unexpectedly" in fatal["payload"]["reason"]
    assert code == 1, run.stderr
    assert run.events("node_failed") and run.events("lease_deleted")
    assert not _agent_processes(run)


async def test_gpus_all_without_nvidia_runtime_is_exit_2_before_any_container(
    tiny_gguf: Path, tmp_path: Path, docker_host: str, node_image: str, docker_scope: DockerScope
) -> None:
    args = _args(docker_scope, node_image, "--gguf-local-path", str(tiny_gguf), "--gpus", "all")
    async with HeadlessRun(args, tmp_path / "state", env=_env(docker_host)) as run:
        code = await run.finish()
    assert code == 2, run.stderr
    assert "[docker] gpus" in run.stderr and "no NVIDIA runtime" in run.stderr
    assert "flag --gpus" in run.stderr  # where the value came from
    assert not run.events("attempt_started")
    assert not docker_scope.containers()


async def test_missing_image_is_named_and_nothing_is_left(
    tiny_gguf: Path, tmp_path: Path, docker_host: str, node_image: str, docker_scope: DockerScope
) -> None:
    missing = "mvp-tui-test-missing:nope"
    args = _args(docker_scope, missing, "--gguf-local-path", str(tiny_gguf), "--down-after")
    async with HeadlessRun(args, tmp_path / "state", env=_env(docker_host)) as run:
        code = await run.finish()
    assert code == 2, run.stderr
    assert f"[docker] image = {missing!r}" in run.stderr and "never pulls" in run.stderr
    assert not run.events("attempt_started")
    assert not docker_scope.containers()


async def test_sigkill_of_mvp_tui_ends_the_container_within_10_s(
    tiny_gguf: Path, tmp_path: Path, docker_host: str, node_image: str, docker_scope: DockerScope
) -> None:
    args = _args(docker_scope, node_image, "--gguf-local-path", str(tiny_gguf))
    async with HeadlessRun(args, tmp_path / "state", env=_env(docker_host)) as run:
        await run.until(event("prompt_rpc_listening"))
        container_id = _container_id(run)
        assert [c.short_id for c in docker_scope.containers()] == [container_id]
        run.signal(signal.SIGKILL)
        assert run.proc is not None
        await run.proc.wait()
        # Our end of the attach stream is gone: the agent's stdin closes, it shuts down,
        # the container ends and auto-removes — no one calls the daemon for it.
        await _removed(docker_scope.client, container_id, within=10.0)
    assert not docker_scope.containers()
    assert not _agent_processes(run)
    # The run's record still says "open": `down --all` asks the daemon and closes it.
    down = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mvp_tui", "down", "--all", "--yes",
        env={**run.env, "DOCKER_HOST": docker_host},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(down.communicate(), 60)
    assert down.returncode == 0, err
    assert container_id in err.decode()


async def test_cached_model_mount_serves_without_download(
    tiny_gguf: Path, tmp_path: Path, docker_host: str, node_image: str, docker_scope: DockerScope
) -> None:
    args = _args(
        docker_scope,
        node_image,
        "--cached-model-host-path", str(tiny_gguf),
        "--prompt", "hello",
        "--max-tokens", "8",
        "--down-after",
    )
    size = tiny_gguf.stat().st_size  # noqa: ASYNC240  (before the run; a local file)
    async with HeadlessRun(args, tmp_path / "state", env=_env(docker_host)) as run:
        code = await run.finish()
    assert code == 0, run.stderr
    (model,) = [
        f["payload"]
        for f in run.frames("mvp.node.1.agent")
        if f["payload"].get("phase") == "model" and f["payload"].get("status") == "ready"
    ]
    assert model["detail"] == {
        "source": "local",
        "path": f"/models/cached/{tiny_gguf.name}",
        "bytes": size,
    }
    downloads = [
        f for f in run.frames("mvp.node.1.agent") if f["payload"].get("type") == "NodeAgentProgress"
        and f["payload"].get("phase") == "model"
    ]
    assert not downloads
    (done,) = run.events("prompt_done")
    assert done["tokens_generated"] >= 1
