"""Model resolution: local path checks and the Hugging Face download (against a loopback
fake hub with Range support)."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from tests.agent.agent_run import AgentRun, agent_env
from tests.agent.hub_server import HubServer

REPO, REVISION, FILE = "mvp-test/tiny-model", "main", "tiny.gguf"
TOKEN = "hf_download_token_never_printed_77"


def _hub_env(tmp_path: Path, hub: HubServer, **extra: str) -> dict[str, str]:
    return agent_env(
        tmp_path,
        MVP_HF_ENDPOINT=hub.url,
        MVP_GGUF_REPO=REPO,
        MVP_GGUF_FILE=FILE,
        MVP_GGUF_REVISION=REVISION,
        MVP_DOWNLOAD_RETRY_DELAY_S="0",
        **extra,
    )


def _cached(tmp_path: Path) -> Path:
    return tmp_path / "cache" / "mvp-test--tiny-model" / REVISION / FILE


def _marker_engine(marker: Path) -> str:
    """An MVP_ENGINE_CMD that leaves a file behind if it is ever started."""
    return f"{sys.executable} -c \"open('{marker}', 'w')\""


@pytest.mark.usefixtures("real_engine")
async def test_download_resumes_after_a_drop_sends_the_token_and_never_prints_it(
    tmp_path: Path, tiny_bytes: bytes, hub: HubServer
) -> None:
    data = tiny_bytes
    hub.add_file(REPO, REVISION, FILE, data)
    hub.state.cut_first_at = len(data) // 3
    hub.state.require_token = TOKEN
    run = await AgentRun.start(_hub_env(tmp_path, hub, HF_TOKEN=TOKEN))
    try:
        loaded = await run.weights()
        assert loaded["type"] == "WeightsLoaded", loaded
        requests = hub.state.requests
        assert len(requests) == 2
        assert "Range" not in requests[0].headers
        assert requests[1].headers["Range"] == f"bytes={len(data) // 3}-"
        assert all(r.headers["Authorization"] == f"Bearer {TOKEN}" for r in requests)
        assert _cached(tmp_path).read_bytes() == data
        assert not _cached(tmp_path).with_name(FILE + ".part").exists()
        model = run.phase_detail("model", "ready")
        assert model["source"] == "hub" and model["resumed_at"] == [len(data) // 3]
        progress = [p for p in run.channel("mvp.node.1.agent") if p["type"] == "NodeAgentProgress"]
        states = [p["state"] for p in progress if p["phase"] == "model"]
        assert states[0] == "downloading" and "retrying" in states
        assert states[-2:] == ["downloaded", "verifying"]  # then the file on disk is hashed
        await run.send("shutdown\n")
        assert await run.wait_exit() == 0
        assert TOKEN.encode() not in bytes(run.stdout + run.stderr)
    finally:
        await run.kill()


async def test_partial_file_is_resumed_with_a_range_request(
    tmp_path: Path, tiny_bytes: bytes, hub: HubServer
) -> None:
    data = tiny_bytes
    hub.add_file(REPO, REVISION, FILE, data)
    part = _cached(tmp_path).with_name(FILE + ".part")
    part.parent.mkdir(parents=True)
    part.write_bytes(data[:1000])
    marker = tmp_path / "engine-started"
    # The engine here exits at once: this test is about the model phase only.
    run = await AgentRun.start(_hub_env(tmp_path, hub, MVP_ENGINE_CMD=_marker_engine(marker)))
    try:
        await run.wait_phase("model", "ready")
        assert [r.headers.get("Range") for r in hub.state.requests] == ["bytes=1000-"]
        assert _cached(tmp_path).read_bytes() == data
        await run.wait_exit()
    finally:
        await run.kill()


async def test_redirect_to_another_host_does_not_carry_the_token(
    tmp_path: Path, tiny_bytes: bytes, hub: HubServer
) -> None:
    resolve = f"/{REPO}/resolve/{REVISION}/{FILE}"
    hub.state.files["/cdn/blob"] = tiny_bytes
    hub.state.files_without_auth.add("/cdn/blob")
    hub.state.redirects[resolve] = f"http://localhost:{hub.port}/cdn/blob"
    hub.state.require_token = TOKEN
    marker = tmp_path / "engine-started"
    env = _hub_env(tmp_path, hub, HF_TOKEN=TOKEN, MVP_ENGINE_CMD=_marker_engine(marker))
    run = await AgentRun.start(env)
    try:
        await run.wait_phase("model", "ready")
        first, second = hub.state.requests
        assert first.path == resolve and first.headers["Authorization"] == f"Bearer {TOKEN}"
        assert second.path == "/cdn/blob" and "Authorization" not in second.headers
        assert _cached(tmp_path).read_bytes() == tiny_bytes
        await run.wait_exit()
    finally:
        await run.kill()


async def test_no_network_is_a_worker_fatal_naming_the_local_path_key(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"  # closed when the block ends
    marker = tmp_path / "engine-started"
    env = agent_env(
        tmp_path,
        MVP_HF_ENDPOINT=dead,
        MVP_GGUF_REPO=REPO,
        MVP_GGUF_FILE=FILE,
        MVP_DOWNLOAD_RETRIES="1",
        MVP_DOWNLOAD_RETRY_DELAY_S="0",
        MVP_ENGINE_CMD=_marker_engine(marker),
    )
    run = await AgentRun.start(env)
    try:
        fatal = await run.weights()
        assert fatal["type"] == "WorkerFatal"
        assert "[model] gguf_local_path" in fatal["reason"]
        assert "cannot reach" in fatal["reason"]
        assert await run.wait_exit() == 1
        assert ("model", "failed") in run.phases()
        assert ("engine_start", "started") not in run.phases()
        assert not marker.exists()
    finally:
        await run.kill()


async def test_access_denied_is_not_retried(tmp_path: Path, hub: HubServer) -> None:
    hub.add_file(REPO, REVISION, FILE, b"GGUF....")
    hub.state.require_token = "the-right-token-123456"
    env = _hub_env(tmp_path, hub, HF_TOKEN=TOKEN, MVP_DOWNLOAD_RETRIES="5")
    run = await AgentRun.start(env)
    try:
        fatal = await run.weights()
        assert fatal["type"] == "WorkerFatal"
        assert "HTTP 401" in fatal["reason"] and "HF_TOKEN" in fatal["reason"]
        assert len(hub.state.requests) == 1
        assert await run.wait_exit() == 1
        assert TOKEN.encode() not in bytes(run.stdout + run.stderr)
    finally:
        await run.kill()


@pytest.mark.parametrize("content", [None, b"not a gguf file at all"])
async def test_bad_local_model_path_fails_before_any_engine(
    tmp_path: Path, content: bytes | None
) -> None:
    model = tmp_path / "model.gguf"
    if content is not None:
        model.write_bytes(content)
    marker = tmp_path / "engine-started"
    env = agent_env(tmp_path, MVP_GGUF_LOCAL_PATH=str(model), MVP_ENGINE_CMD=_marker_engine(marker))
    run = await AgentRun.start(env)
    try:
        fatal = await run.weights()
        assert fatal["type"] == "WorkerFatal"
        assert "[model] gguf_local_path" in fatal["reason"] and str(model) in fatal["reason"]
        assert fatal["fix"]
        assert await run.wait_exit() == 2
        assert run.phases()[-3:] == [
            ("model", "started"),
            ("model", "failed"),
            ("agent_exit", "failed"),
        ]
        assert run.channel("mvp.node.1.engine") == []
        assert not marker.exists()
    finally:
        await run.kill()
