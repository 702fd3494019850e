"""The agent adopts what the start command's prefetch left (issue 20 item 1): a partial file
is resumed where it ends, a finished one is checked and used with no transfer, one whose
digest is not the hub's is refused, and a prefetch still running is stopped and taken over,
never downloading a byte twice. The hub is the loopback fake with the real hub's HEAD."""

from __future__ import annotations

import hashlib
import os
import sys
import time
from pathlib import Path

from mvp_tui.node.prefetch import read_prefetch
from mvp_tui.providers.prefetch import prefetch_script
from tests.agent.agent_run import AgentRun
from tests.agent.hub_server import HubServer
from tests.agent.test_agent_model_download import FILE, REPO, REVISION, _cached, _hub_env
from tests.fakes.container import Container, wait_until

DEAD_PID = "999999"  # beyond pid_max on Linux: no process (a prefetch that ended)


def _engine_marker(tmp_path: Path) -> str:
    return f"{sys.executable} -c \"open('{tmp_path / 'engine-started'}', 'w')\""


def _left_by_prefetch(tmp_path: Path, content: bytes, pid: str = DEAD_PID) -> Path:
    part = _cached(tmp_path).with_name(FILE + ".part")
    part.parent.mkdir(parents=True, exist_ok=True)
    part.write_bytes(content)
    part.with_name(FILE + ".prefetch").write_text(f"{pid} 1764000000 curl\n")
    return part


async def _model_phase(tmp_path: Path, hub: HubServer) -> tuple[AgentRun, dict[str, object]]:
    run = await AgentRun.start(_hub_env(tmp_path, hub, MVP_ENGINE_CMD=_engine_marker(tmp_path)))
    await run.wait_phase("model", "ready")
    return run, run.phase_detail("model", "ready")


def _model_states(run: AgentRun) -> list[str]:
    return [
        p["state"]
        for p in run.channel("mvp.node.1.agent")
        if p["type"] == "NodeAgentProgress" and p["phase"] == "model"
    ]


async def test_a_partial_prefetch_is_resumed_where_it_ends_and_checked(
    tmp_path: Path, tiny_bytes: bytes, hub: HubServer
) -> None:
    hub.add_file(REPO, REVISION, FILE, tiny_bytes)
    _left_by_prefetch(tmp_path, tiny_bytes[:1500])
    run, detail = await _model_phase(tmp_path, hub)
    try:
        assert [r.headers.get("Range") for r in hub.state.requests] == ["bytes=1500-"]
        assert len(hub.state.heads) == 1  # the hub's size and digest, asked once
        assert _cached(tmp_path).read_bytes() == tiny_bytes
        assert detail["verified"] is True and detail["adopted_bytes"] == 1500
        assert detail["sha256"] == hashlib.sha256(tiny_bytes).hexdigest()
        assert detail["commit"] == hub.state.commit
        assert detail["prefetch"] == {
            "tool": "curl", "started_at": 1764000000.0, "bytes": 1500, "was_running": False,
        }
        assert _model_states(run)[0] == "adopting"
        await run.wait_exit()
    finally:
        await run.kill()


async def test_a_finished_prefetch_is_adopted_without_a_transfer(
    tmp_path: Path, tiny_bytes: bytes, hub: HubServer
) -> None:
    hub.add_file(REPO, REVISION, FILE, tiny_bytes)
    _left_by_prefetch(tmp_path, tiny_bytes)
    run, detail = await _model_phase(tmp_path, hub)
    try:
        assert hub.state.requests == []  # not one byte fetched again
        assert detail["verified"] is True and detail["adopted_bytes"] == len(tiny_bytes)
        assert detail["attempts"] == 0
        assert "verifying" in _model_states(run)
        assert _cached(tmp_path).read_bytes() == tiny_bytes
        await run.wait_exit()
    finally:
        await run.kill()


async def test_a_prefetched_file_whose_digest_is_not_the_hubs_is_refused(
    tmp_path: Path, tiny_bytes: bytes, hub: HubServer
) -> None:
    hub.add_file(REPO, REVISION, FILE, tiny_bytes)
    corrupt = tiny_bytes[:-8] + b"\0" * 8  # the right length, the wrong bytes
    _left_by_prefetch(tmp_path, corrupt)
    run, detail = await _model_phase(tmp_path, hub)
    try:
        assert "refused" in _model_states(run)
        refusal = next(
            p for p in run.channel("mvp.node.1.agent")
            if p["type"] == "NodeAgentProgress" and p.get("state") == "refused"
        )
        assert "sha256" in refusal["reason"]
        # Fetched afresh from byte 0, and what is served now is the hub's file.
        assert [r.headers.get("Range") for r in hub.state.requests] == [None]
        assert _cached(tmp_path).read_bytes() == tiny_bytes
        assert detail["refused_bytes"] == len(corrupt) and "adopted_bytes" not in detail
        await run.wait_exit()
    finally:
        await run.kill()


async def test_a_download_whose_digest_is_not_the_hubs_fails_the_model(
    tmp_path: Path, tiny_bytes: bytes, hub: HubServer
) -> None:
    hub.add_file(REPO, REVISION, FILE, tiny_bytes)
    resolve = f"/{REPO}/resolve/{REVISION}/{FILE}"
    hub.state.head_sha256[resolve] = "ab" * 32  # the hub's word; the bytes say otherwise
    run = await AgentRun.start(_hub_env(tmp_path, hub, MVP_ENGINE_CMD=_engine_marker(tmp_path)))
    try:
        failed = await run.wait_phase("model", "failed")
        assert "sha256" in str(failed)
        assert not _cached(tmp_path).exists()
        assert not _cached(tmp_path).with_name(FILE + ".part").exists()
        assert not (tmp_path / "engine-started").exists()
    finally:
        await run.kill()


async def test_a_running_prefetch_is_stopped_and_taken_over_without_a_byte_twice(
    tmp_path: Path, hub: HubServer
) -> None:
    data = b"GGUF" + os.urandom(300_000)
    hub.add_file(REPO, REVISION, FILE, data)
    hub.state.rate_bps = 100_000  # three seconds of transfer: the agent arrives mid-way
    env = _hub_env(tmp_path, hub, MVP_PREFETCH="1", HOME=str(tmp_path))
    # The start command's own script, as the container runs it; it returns at once and the
    # fetch goes on in the background.
    with Container(env, tmp_path / "guard", script=prefetch_script()) as node:
        await _taken_over(tmp_path, hub, data)
        assert node.proc is not None and node.proc.wait(10) == 0


async def _taken_over(tmp_path: Path, hub: HubServer, data: bytes) -> None:
    part = _cached(tmp_path).with_name(FILE + ".part")
    wait_until(lambda: read_prefetch(_cached(tmp_path)) is not None, 10, "the state line")
    state = read_prefetch(_cached(tmp_path))
    assert state is not None and state.tool == "curl"
    assert abs(state.started_at - time.time()) < 5
    wait_until(lambda: part.exists() and part.stat().st_size >= 50_000, 10, "prefetch bytes")
    hub.state.rate_bps = None  # the agent's own resume runs at full speed
    run, detail = await _model_phase(tmp_path, hub)
    try:
        prefetch = detail["prefetch"]
        assert isinstance(prefetch, dict) and prefetch["was_running"] is True
        adopted = prefetch["bytes"]
        assert isinstance(adopted, int) and 50_000 <= adopted < len(data)
        first, resume = hub.state.requests
        assert first.headers.get("Range") is None  # curl -C - on an empty file
        assert resume.headers.get("Range") == f"bytes={adopted}-"
        assert _cached(tmp_path).read_bytes() == data and detail["verified"] is True
        await run.wait_exit()
    finally:
        await run.kill()
