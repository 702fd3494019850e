"""Engine readiness and configuration with a fake `llama-server` (503 "Loading model", then
200) found on PATH, as the native server behaves."""

from __future__ import annotations

import json
from pathlib import Path

from tests.agent.agent_run import AgentRun, agent_env

SECRET = "test-secret-never-reaches-the-engine-4242"


async def test_503_loading_is_progress_then_weights_loaded(
    tmp_path: Path, tiny_model: Path, path_with: str
) -> None:
    env = agent_env(
        tmp_path,
        PATH=path_with,
        MVP_GGUF_LOCAL_PATH=str(tiny_model),
        FAKE_LOADING_PROBES="3",
        OPENAI_API_KEY=SECRET,
    )
    run = await AgentRun.start(env)
    try:
        loaded = await run.weights()
        assert loaded["type"] == "WeightsLoaded", loaded
        assert loaded["engine"] == "llama-server"
        health = [
            p["state"]
            for p in run.channel("mvp.node.1.agent")
            if p["type"] == "NodeAgentProgress" and p["phase"] == "engine_health"
        ]
        assert "loading" in health and health[-1] == "ready"
        assert ("engine_health", "failed") not in run.phases()
        # The native server's flags, and no secret in the engine's environment.
        started = json.loads(run.channel("mvp.node.1.engine")[0])
        argv = started["argv"]
        assert argv[argv.index("-m") + 1] == str(tiny_model)
        assert argv[argv.index("--host") + 1] == "127.0.0.1"
        assert argv[argv.index("--port") + 1] == str(loaded["port"])
        assert argv[argv.index("-a") + 1] == "tiny"
        assert argv[argv.index("-c") + 1] == "256"
        assert started["secret_env"] == []
        await run.send("shutdown\n")
        assert await run.wait_exit() == 0
        assert SECRET.encode() not in bytes(run.stdout + run.stderr)
    finally:
        await run.kill()


async def test_engine_never_ready_times_out_with_a_worker_fatal(
    tmp_path: Path, tiny_model: Path, path_with: str
) -> None:
    env = agent_env(
        tmp_path,
        PATH=path_with,
        MVP_GGUF_LOCAL_PATH=str(tiny_model),
        FAKE_LOADING_PROBES="-1",
        MVP_ENGINE_READY_TIMEOUT_S="1",
    )
    run = await AgentRun.start(env)
    try:
        fatal = await run.weights()
        assert fatal["type"] == "WorkerFatal"
        assert "not ready after 1 s" in fatal["reason"] and "loading" in fatal["reason"]
        assert "MVP_ENGINE_READY_TIMEOUT_S" in fatal["fix"]
        assert await run.wait_exit() == 1
        assert ("engine_health", "failed") in run.phases()
    finally:
        await run.kill()


async def test_engine_cmd_placeholders_and_explicit_port(
    tmp_path: Path, tiny_model: Path, fake_llama_server_dir: Path
) -> None:
    env = agent_env(
        tmp_path,
        MVP_GGUF_LOCAL_PATH=str(tiny_model),
        MVP_ENGINE_CMD=f"{fake_llama_server_dir / 'llama-server'} -m {{model}} --host {{host}} "
        "--port {port} -a {alias}",
        FAKE_LOADING_PROBES="0",
    )
    run = await AgentRun.start(env)
    try:
        loaded = await run.weights()
        assert loaded["type"] == "WeightsLoaded"
        assert loaded["engine"] == "llama-server"
        argv = json.loads(run.channel("mvp.node.1.engine")[0])["argv"]
        port = str(loaded["port"])
        assert argv == ["-m", str(tiny_model), "--host", "127.0.0.1", "--port", port, "-a", "tiny"]
        await run.send("shutdown\n")
        assert await run.wait_exit() == 0
    finally:
        await run.kill()


async def test_bad_setting_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    run = await AgentRun.start(agent_env(tmp_path, MVP_ENGINE_PORT="eighty"))
    try:
        fatal = await run.weights()
        assert fatal["type"] == "WorkerFatal"
        assert "MVP_ENGINE_PORT" in fatal["reason"] and "eighty" in fatal["reason"]
        assert await run.wait_exit() == 2
        assert run.phases() == [("config", "failed"), ("agent_exit", "failed")]
    finally:
        await run.kill()


async def test_the_engine_saying_it_is_ready_is_probed_at_once(
    tmp_path: Path, tiny_model: Path, path_with: str
) -> None:
    """With the timed poll set to an hour, only the engine's own "model loaded" line can
    bring the probe that finds it ready: the agent sees it within one probe, not one poll."""
    env = agent_env(
        tmp_path,
        PATH=path_with,
        MVP_GGUF_LOCAL_PATH=str(tiny_model),
        FAKE_READY_HINT_AFTER_S="0.5",
        MVP_ENGINE_POLL_S="3600",
    )
    run = await AgentRun.start(env)
    try:
        loaded = await run.weights(within=60)
        assert loaded["type"] == "WeightsLoaded", loaded
        health = [
            p["state"]
            for p in run.channel("mvp.node.1.agent")
            if p["type"] == "NodeAgentProgress" and p["phase"] == "engine_health"
        ]
        assert health[0] in ("refused", "loading") and health[-1] == "ready"
        assert "main: model loaded" in run.channel("mvp.node.1.engine")
        await run.send("shutdown\n")
        assert await run.wait_exit() == 0
    finally:
        await run.kill()


async def _behind_a_taken_port(tmp_path: Path, tiny_model: Path, path_with: str,
                               **extra: str) -> tuple[int, dict[str, object], AgentRun]:
    import socket

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    taken = holder.getsockname()[1]
    env = agent_env(tmp_path, PATH=path_with, MVP_GGUF_LOCAL_PATH=str(tiny_model),
                    FAKE_LOADING_PROBES="0", MVP_API_KEY="mvp-run-key-for-the-gate",
                    MVP_ENGINE_PORT=str(taken), **extra)
    run = await AgentRun.start(env)
    try:
        loaded = await run.weights()
    finally:
        holder.close()
    return taken, loaded, run


async def test_a_preferred_port_taken_after_the_check_serves_on_another(
    tmp_path: Path, tiny_model: Path, path_with: str
) -> None:
    """A local run's [prompt] openai_port is checked free by the engine, but a second run can
    take it before this node binds: with the fallback the gate serves on a free port."""
    taken, loaded, run = await _behind_a_taken_port(tmp_path, tiny_model, path_with,
                                                    MVP_ENGINE_PORT_FALLBACK="1")
    try:
        assert loaded["type"] == "WeightsLoaded", loaded
        assert loaded["port"] != taken and int(str(loaded["port"])) > 0
        await run.send("shutdown\n")
        assert await run.wait_exit() == 0
    finally:
        await run.kill()


async def test_a_required_port_taken_fails_naming_it(
    tmp_path: Path, tiny_model: Path, path_with: str
) -> None:
    taken, fatal, run = await _behind_a_taken_port(tmp_path, tiny_model, path_with)
    try:
        assert fatal["type"] == "WorkerFatal", fatal
        assert f"cannot open the engine's port 127.0.0.1:{taken}" in str(fatal["reason"])
        assert "MVP_ENGINE_PORT" in str(fatal["fix"])
    finally:
        await run.kill()
