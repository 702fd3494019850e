"""The model prefetch in Vast's `onstart` (issue 20 item 1), run as the container would run
it: the create the provider sent is recorded by the fake, its `onstart` runs under /bin/sh
with the container's env, and fetches from a loopback hub into the agent's cache; the agent
then adopts the file. A private model's token never goes into the create: its download waits
for the agent, as before."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mvp_tui.engine.settings import create_env
from mvp_tui.node.prefetch import read_prefetch
from mvp_tui.providers.base import CreateRequest, SelectionPolicy
from mvp_tui.providers.vastai.client import VastAiProvider
from tests.agent.agent_run import AgentRun, agent_env
from tests.agent.hub_server import HubServer
from tests.fakes.container import Container, wait_until
from tests.fakes.tiny_gguf import write_tiny_gguf
from tests.fakes.vastai_server import FakeVast

REPO, FILE = "mvp-test/tiny-model", "tiny.gguf"
TOKEN = "hf_private_repo_token_never_in_a_create_55"


def _node_env(hub: HubServer, cache: Path, **extra: str) -> dict[str, str]:
    """The agent's env as the engine builds it for a hub model (engine/settings.node_env)."""
    return {
        "MVP_RUN_ID": "r-0000abcd", "MVP_LOGICAL_NODE_ID": "1", "MVP_MODEL_ID": "tiny",
        "MVP_GGUF_REPO": REPO, "MVP_GGUF_FILE": FILE, "MVP_HF_ENDPOINT": hub.url,
        "MVP_MODEL_CACHE_DIR": str(cache), **extra,
    }


async def _rent(fake: FakeVast, provider: VastAiProvider, node: dict[str, str]) -> int:
    fake.add_offer()
    (offer,) = await provider.search_offers(SelectionPolicy(require_verified=False))
    request = CreateRequest(label="mvp-r1-1-1", image="img", env=create_env(node), disk_gb=10)
    result = await provider.create(offer, request)
    assert result.provider_id is not None
    return int(result.provider_id)


def _cached(cache: Path) -> Path:
    return cache / "mvp-test--tiny-model" / "main" / FILE


def _engine_marker(tmp_path: Path) -> str:
    return f"{sys.executable} -c \"open('{tmp_path / 'engine-started'}', 'w')\""


async def test_the_onstart_the_create_sent_fetches_the_model_and_the_agent_adopts_it(
    fake: FakeVast, provider: VastAiProvider, tmp_path: Path
) -> None:
    data = write_tiny_gguf(tmp_path / "tiny.gguf", seed=1).read_bytes()
    cache = tmp_path / "cache"
    with HubServer() as hub:
        hub.add_file(REPO, "main", FILE, data)
        node = _node_env(hub, cache)
        instance = await _rent(fake, provider, node)
        script = fake.onstart_of(instance)
        assert script is not None and script.index("mvp_boot_guard") < script.index("mvp_prefetch")
        assert fake.container_env(instance)["MVP_PREFETCH"] == "1"
        env = {**fake.container_env(instance), "HOME": str(tmp_path)}
        part = _cached(cache).with_name(FILE + ".part")
        with Container(env, tmp_path / "guard", script=script):
            wait_until(lambda: part.exists() and part.stat().st_size == len(data), 20, "prefetch")
            state = read_prefetch(_cached(cache))
            assert state is not None and state.tool == "curl"
            (get,) = hub.state.requests
            assert "Authorization" not in get.headers
            # The agent arrives (over SSH on a real node) and adopts the file.
            agent_env_ = agent_env(tmp_path, **node, MVP_ENGINE_CMD=_engine_marker(tmp_path))
            run = await AgentRun.start(agent_env_)
            try:
                await run.wait_phase("model", "ready")
                detail = run.phase_detail("model", "ready")
                assert detail["verified"] is True and detail["adopted_bytes"] == len(data)
                assert len(hub.state.requests) == 1  # downloaded once, at boot
                assert _cached(cache).read_bytes() == data
                await run.wait_exit()
            finally:
                await run.kill()


async def test_a_private_model_keeps_its_token_out_of_the_create_and_downloads_with_the_agent(
    fake: FakeVast, provider: VastAiProvider, tmp_path: Path
) -> None:
    data = write_tiny_gguf(tmp_path / "tiny.gguf", seed=2).read_bytes()
    cache = tmp_path / "cache"
    with HubServer() as hub:
        hub.add_file(REPO, "main", FILE, data)
        hub.state.require_token = TOKEN
        node = _node_env(hub, cache, HF_TOKEN=TOKEN)
        instance = await _rent(fake, provider, node)
        (create,) = [r for r in fake.requests if r.method == "PUT" and "/asks/" in r.path]
        assert TOKEN not in json.dumps(create.body)  # not in env, onstart or anywhere
        assert "MVP_PREFETCH" not in fake.container_env(instance)
        script = fake.onstart_of(instance)
        assert script is not None
        env = {**fake.container_env(instance), "HOME": str(tmp_path)}
        with Container(env, tmp_path / "guard", script=script) as boot:
            assert boot.proc is not None and boot.proc.wait(10) == 0  # the start command ran
            assert read_prefetch(_cached(cache)) is None and hub.state.requests == []
            run = await AgentRun.start(
                agent_env(tmp_path, **node, MVP_ENGINE_CMD=_engine_marker(tmp_path))
            )
            try:
                await run.wait_phase("model", "ready")
                (get,) = hub.state.requests  # the download began with the agent, with its token
                assert get.headers["Authorization"] == f"Bearer {TOKEN}"
                assert "prefetch" not in run.phase_detail("model", "ready")
                await run.wait_exit()
            finally:
                await run.kill()
