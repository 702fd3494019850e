"""LocalProvider: one offer (this machine), a lease is the node agent as a child process,
its output flows to on_line, and no agent or engine outlives destroy, close or the app."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from mvp_tui.providers.base import (
    CreateRequest,
    DestroyOutcome,
    LeaseState,
    Outcome,
    Provider,
    SelectionPolicy,
)
from mvp_tui.providers.local.client import LocalProvider
from mvp_tui.providers.local.node import group_members
from tests.agent.procs import alive, wait_gone

HERE = Path(__file__).parent


class Lines:
    """An on_line sink that parses frames and lets a test wait for one."""

    def __init__(self) -> None:
        self.raw: list[tuple[str, bytes]] = []
        self.frames: list[tuple[str, Any]] = []
        self._arrived = asyncio.Event()

    def __call__(self, kind: str, raw: bytes) -> None:
        self.raw.append((kind, raw))
        if kind == "stdout":
            record = json.loads(raw)
            self.frames.append((record["channel"], record["payload"]))
            self._arrived.set()

    def weights(self) -> Any | None:
        found = [p for ch, p in self.frames if ch == "mvp.worker.weights"]
        return found[0] if found else None

    async def wait_first_payload(self, within: float = 30.0) -> Any:
        async with asyncio.timeout(within):
            while not self.frames:
                self._arrived.clear()
                await self._arrived.wait()
        return self.frames[0][1]

    async def wait_weights(self, within: float = 30.0) -> Any:
        async with asyncio.timeout(within):
            while self.weights() is None:
                self._arrived.clear()
                await self._arrived.wait()
        return self.weights()


def _request(env: dict[str, str], label: str = "mvp-test-1-1") -> CreateRequest:
    return CreateRequest(label=label, image="", env=env, disk_gb=0)


def _model_env(model: Path) -> dict[str, str]:
    return {"MVP_GGUF_LOCAL_PATH": str(model), "MVP_MODEL_ID": "tiny", "MVP_MAX_CONTEXT": "256"}


async def test_one_offer_this_machine_at_no_cost() -> None:
    provider = LocalProvider()
    assert isinstance(provider, Provider)
    offers = await provider.search_offers(SelectionPolicy(min_gpu_ram_mb=80_000))
    assert len(offers) == 1
    offer = offers[0]
    assert (offer.provider, offer.offer_id, offer.price_per_hour) == ("local", "local", 0.0)
    assert offer.ram_mib > 0 and f"({os.cpu_count()} cores)" in offer.cpu
    assert provider.info.billing is False and provider.info.ssh is False


async def test_bad_model_path_is_rejected_before_any_process(tmp_path: Path) -> None:
    marker = tmp_path / "agent-started"
    stand_in = tmp_path / "agent.py"
    stand_in.write_text(f"open({str(marker)!r}, 'w')\n")
    provider = LocalProvider(agent_path=stand_in)
    offer = (await provider.search_offers(SelectionPolicy()))[0]
    missing = tmp_path / "nope.gguf"
    result = await provider.create(offer, _request({"MVP_GGUF_LOCAL_PATH": str(missing)}))
    assert result.outcome is Outcome.REJECTED
    assert "[model] gguf_local_path" in result.detail and str(missing) in result.detail
    nothing = await provider.create(offer, _request({}))
    assert nothing.outcome is Outcome.REJECTED and "gguf_local_path" in nothing.detail
    assert await provider.list_by_label("mvp-") == []
    assert not marker.exists()


@pytest.mark.usefixtures("real_engine")
async def test_lease_streams_frames_then_destroy_leaves_no_process(tiny_model: Path) -> None:
    lines = Lines()
    provider = LocalProvider(on_line=lines)
    offer = (await provider.search_offers(SelectionPolicy()))[0]
    created = await provider.create(offer, _request(_model_env(tiny_model)))
    try:
        assert created.outcome is Outcome.CREATED and created.provider_id
        lease_id = created.provider_id
        loaded = await lines.wait_weights()
        assert loaded["type"] == "WeightsLoaded"
        status = await provider.get(lease_id)
        assert status.state is LeaseState.RUNNING and status.ssh is None
        assert status.label == "mvp-test-1-1" and status.price_per_hour == 0.0
        assert [s.provider_id for s in await provider.list_by_label("mvp-test-")] == [lease_id]
        assert await provider.list_by_label("mvp-other-") == []
        agent_pid = int(lease_id.removeprefix("local-"))
        engine_pid = loaded["engine_pid"]
        assert alive(agent_pid) and alive(engine_pid)

        destroyed = await provider.destroy(lease_id)
        assert destroyed.outcome is DestroyOutcome.ACCEPTED, destroyed
        assert "agent shutdown, exit code 0" in destroyed.detail
        assert not alive(agent_pid) and not alive(engine_pid)
        assert group_members(agent_pid) == []
        assert (await provider.get(lease_id)).state is LeaseState.GONE
        assert await provider.list_by_label("mvp-test-") == []
        assert (await provider.destroy(lease_id)).outcome is DestroyOutcome.GONE
        # Everything the agent wrote was delivered before destroy returned.
        last = lines.frames[-1][1]
        assert (last["phase"], last["status"]) == ("agent_exit", "ready")
        assert any(ch == "mvp.node.0.engine" for ch, _ in lines.frames)
    finally:
        await provider.aclose()


@pytest.mark.usefixtures("real_engine")
async def test_close_without_destroy_leaves_no_process(tiny_model: Path) -> None:
    lines = Lines()
    provider = LocalProvider(on_line=lines)
    offer = (await provider.search_offers(SelectionPolicy()))[0]
    created = await provider.create(offer, _request(_model_env(tiny_model)))
    assert created.provider_id
    loaded = await lines.wait_weights()
    agent_pid, engine_pid = int(created.provider_id.removeprefix("local-")), loaded["engine_pid"]
    await provider.aclose()
    assert not alive(agent_pid) and not alive(engine_pid)
    assert (await provider.get(created.provider_id)).state is LeaseState.GONE


async def test_agent_that_fails_is_dead_until_destroyed(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    env = {
        "MVP_GGUF_REPO": "org/m",
        "MVP_GGUF_FILE": "m.gguf",
        "MVP_HF_ENDPOINT": dead,
        "MVP_DOWNLOAD_RETRIES": "0",
        "MVP_MODEL_CACHE_DIR": str(tmp_path),
    }
    lines = Lines()
    provider = LocalProvider(on_line=lines)
    offer = (await provider.search_offers(SelectionPolicy()))[0]
    created = await provider.create(offer, _request(env))
    assert created.outcome is Outcome.CREATED and created.provider_id
    code = await asyncio.wait_for(provider.wait_exited(created.provider_id), 30)
    assert code == 1
    status = await provider.get(created.provider_id)
    assert status.state is LeaseState.DEAD and status.raw_state == "exited 1"
    destroyed = await provider.destroy(created.provider_id)
    assert destroyed.outcome is DestroyOutcome.ACCEPTED
    assert "already_exited" in destroyed.detail
    fatal = lines.weights()
    assert fatal is not None and fatal["type"] == "WorkerFatal"
    assert "[model] gguf_local_path" in fatal["reason"]


@pytest.mark.usefixtures("real_engine")
@pytest.mark.parametrize("ending", ["exit", "hang"])
async def test_no_child_outlives_the_app(tiny_model: Path, ending: str) -> None:
    """`exit`: the app returns without any clean-up (the atexit sweep); `hang`: the app is
    SIGKILLed (the agent sees its stdin close and shuts down)."""
    app = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HERE / "provider_app.py"),
        str(tiny_model),
        ending,
        stdout=asyncio.subprocess.PIPE,
        cwd=str(HERE.parent.parent),
    )
    try:
        assert app.stdout is not None
        pids = json.loads(await asyncio.wait_for(app.stdout.readline(), 60))
        assert alive(pids["agent_pid"]) and alive(pids["engine_pid"])
        if ending == "hang":
            app.send_signal(signal.SIGKILL)
        await asyncio.wait_for(app.wait(), 30)
        for pid in (pids["agent_pid"], pids["engine_pid"]):
            await wait_gone(pid, 20)
            assert not alive(pid)
    finally:
        if app.returncode is None:
            app.kill()
            await app.wait()


STAND_IN_AGENT = """
import json, os, signal, subprocess, sys
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(json.dumps({"mvp_frame": 1, "channel": "mvp.node.1.agent", "payload": child.pid}), flush=True)
for line in sys.stdin:
    if line.strip() == "shutdown" and os.environ["STAND_IN"] == "leaves-child":
        sys.exit(0)
signal.pause()
"""


@pytest.mark.parametrize(
    ("behaviour", "how"),
    [("stubborn", "killed"), ("leaves-child", "shutdown")],
)
async def test_destroy_escalates_and_sweeps_the_group(
    tmp_path: Path, tiny_model: Path, behaviour: str, how: str
) -> None:
    """An agent that ignores shutdown and SIGTERM is killed with its group; one that exits
    but leaves a process in its group has that process killed too."""
    stand_in = tmp_path / "agent.py"
    stand_in.write_text(STAND_IN_AGENT)
    lines = Lines()
    # The stubborn one must run out of patience fast; the other gets time to obey.
    patience = 0.3 if behaviour == "stubborn" else 20.0
    provider = LocalProvider(
        agent_path=stand_in, on_line=lines, shutdown_timeout=patience, kill_timeout=patience
    )
    offer = (await provider.search_offers(SelectionPolicy()))[0]
    env = {"MVP_GGUF_LOCAL_PATH": str(tiny_model), "STAND_IN": behaviour}
    created = await provider.create(offer, _request(env))
    assert created.provider_id
    child_pid = await lines.wait_first_payload()
    agent_pid = int(created.provider_id.removeprefix("local-"))
    assert alive(child_pid)
    destroyed = await provider.destroy(created.provider_id)
    assert destroyed.outcome is DestroyOutcome.ACCEPTED
    assert f"agent {how}" in destroyed.detail
    if behaviour == "leaves-child":
        assert "1 leftover process(es) killed" in destroyed.detail
    assert not alive(agent_pid) and not alive(child_pid)
    assert group_members(agent_pid) == []


@pytest.mark.usefixtures("real_engine")
async def test_agent_killed_takes_its_engine_with_it(tiny_model: Path) -> None:
    lines = Lines()
    provider = LocalProvider(on_line=lines)
    offer = (await provider.search_offers(SelectionPolicy()))[0]
    created = await provider.create(offer, _request(_model_env(tiny_model)))
    assert created.provider_id
    try:
        engine_pid = (await lines.wait_weights())["engine_pid"]
        os.kill(int(created.provider_id.removeprefix("local-")), signal.SIGKILL)
        code = await asyncio.wait_for(provider.wait_exited(created.provider_id), 30)
        assert code == -signal.SIGKILL
        await wait_gone(engine_pid, 10)
        assert not alive(engine_pid)
        assert (await provider.get(created.provider_id)).state is LeaseState.DEAD
    finally:
        await provider.aclose()
