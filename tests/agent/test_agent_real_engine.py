"""The node agent with the real engine (llama_cpp.server) and the tiny model."""

from __future__ import annotations

import json
import os
import signal
import urllib.request
from pathlib import Path

import pytest

from tests.agent.agent_run import AgentRun, agent_env
from tests.agent.procs import alive, wait_gone

pytestmark = pytest.mark.usefixtures("real_engine")

HF_TOKEN = "hf_test_token_never_printed_5f1c"
API_KEY = "vast-api-key-never-printed-93ab"
EXPECTED_PHASES = [
    ("config", "started"),
    ("config", "ready"),
    ("probe", "started"),
    ("probe", "ready"),
    ("model", "started"),
    ("model", "ready"),
    ("engine_start", "started"),
    ("engine_start", "ready"),
    ("engine_health", "started"),
    ("engine_health", "ready"),
    ("watch", "started"),
]


def _get_json(url: str) -> dict[str, object]:
    with urllib.request.urlopen(url, timeout=5) as response:
        assert response.status == 200
        data: dict[str, object] = json.load(response)
        return data


async def test_serves_the_model_and_stops_on_stdin_shutdown(
    tmp_path: Path, tiny_model: Path
) -> None:
    env = agent_env(
        tmp_path, MVP_GGUF_LOCAL_PATH=str(tiny_model), HF_TOKEN=HF_TOKEN, MY_API_KEY=API_KEY
    )
    run = await AgentRun.start(env)
    try:
        loaded = await run.weights()
        assert loaded["type"] == "WeightsLoaded", loaded
        assert loaded["model_id"] == "tiny"
        assert (loaded["run_id"], loaded["node_id"]) == ("r-0000abcd", 1)
        assert loaded["engine"] == "llama-cpp-python"
        assert loaded["base_url"] == f"http://127.0.0.1:{loaded['port']}"
        models = _get_json(f"{loaded['base_url']}/v1/models")
        assert [m["id"] for m in models["data"]] == ["tiny"]  # type: ignore[attr-defined]
        engine_pid = loaded["engine_pid"]
        await run.wait_phase("watch", "started")
        assert run.phases() == EXPECTED_PHASES
        probe = run.phase_detail("probe", "ready")
        assert probe["cpus"] == os.cpu_count() and probe["ram_mib"] > 0

        await run.send("shutdown\n")
        assert await run.wait_exit() == 0
        assert not alive(engine_pid)
        assert run.phases()[-4:] == [
            ("watch", "ready"),
            ("shutdown", "started"),
            ("shutdown", "ready"),
            ("agent_exit", "ready"),
        ]
        assert run.phase_detail("shutdown", "started")["source"] == "stdin"
        # Every stdout line is a frame; the engine's log is its own channel, cleaned.
        assert run.non_frames == []
        engine_log = run.channel("mvp.node.1.engine")
        assert engine_log and all(isinstance(line, str) for line in engine_log)
        assert not any("\x1b" in line or "\n" in line for line in engine_log)
        # Secrets never appear in anything the agent printed.
        output = bytes(run.stdout + run.stderr)
        assert HF_TOKEN.encode() not in output and API_KEY.encode() not in output
        assert run.phase_detail("config", "ready")["hf_token"] is True
    finally:
        await run.kill()


async def test_sigterm_stops_the_engine_and_exits_zero(tmp_path: Path, tiny_model: Path) -> None:
    run = await AgentRun.start(agent_env(tmp_path, MVP_GGUF_LOCAL_PATH=str(tiny_model)))
    try:
        loaded = await run.weights()
        assert loaded["type"] == "WeightsLoaded"
        os.kill(run.proc.pid, signal.SIGTERM)
        assert await run.wait_exit() == 0
        assert not alive(loaded["engine_pid"])
        assert run.phase_detail("shutdown", "started")["source"] == "SIGTERM"
        assert run.phases()[-1] == ("agent_exit", "ready")
    finally:
        await run.kill()


async def test_engine_killed_is_a_worker_fatal_and_a_failed_exit(
    tmp_path: Path, tiny_model: Path
) -> None:
    run = await AgentRun.start(agent_env(tmp_path, MVP_GGUF_LOCAL_PATH=str(tiny_model)))
    try:
        loaded = await run.weights()
        await run.wait_phase("watch", "started")
        os.kill(loaded["engine_pid"], signal.SIGKILL)
        fatal = await run.wait_for(
            lambda c, p: c == "mvp.worker.weights" and p["type"] == "WorkerFatal"
        )
        assert fatal["exit_code"] == -signal.SIGKILL
        assert "engine exited unexpectedly" in fatal["reason"]
        assert fatal["last_log_lines"], "the fatal record carries the engine's last lines"
        assert await run.wait_exit() == 1
        assert ("watch", "failed") in run.phases()
        assert run.phases()[-1] == ("agent_exit", "failed")
    finally:
        await run.kill()


async def test_control_fifo_shutdown_without_stdin(tmp_path: Path, tiny_model: Path) -> None:
    fifo = tmp_path / "control"
    env = agent_env(tmp_path, MVP_GGUF_LOCAL_PATH=str(tiny_model), MVP_CONTROL_FIFO=str(fifo))
    run = await AgentRun.start(env)
    try:
        loaded = await run.weights()
        assert loaded["type"] == "WeightsLoaded"
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        try:
            os.write(fd, b"shutdown\n")
        finally:
            os.close(fd)
        assert await run.wait_exit() == 0
        assert run.phase_detail("shutdown", "started")["source"] == "fifo"
        assert not fifo.exists(), "the agent removes the fifo it created"
        await wait_gone(loaded["engine_pid"], 5)
        assert not alive(loaded["engine_pid"])
    finally:
        await run.kill()
