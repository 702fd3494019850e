"""The dashboard driving a real run, by keys (Pilot): the local node with the real engine,
and Vast.ai against the fake server. Waits are on engine events, never on sleeps."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import Button

from mvp_tui.config import ConfigPaths, load_config
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.engine.events import NodeReady, OffersListed
from mvp_tui.engine.run import RunEngine
from mvp_tui.engine.ui_port import UiPort
from mvp_tui.events import EngineEvent
from mvp_tui.lease import events as lease
from mvp_tui.prompt.events import PromptDone
from mvp_tui.tui.app import MvpApp
from mvp_tui.widgets.lease_confirm import LeaseConfirmScreen
from mvp_tui.widgets.offers import OffersPane
from mvp_tui.widgets.prompt import PromptPane
from tests.agent.procs import alive
from tests.fakes.tiny_gguf import write_tiny_gguf
from tests.fakes.vastai_server import FakeVast
from tests.prompt.engine import require_engine
from tests.prompt.waiting import WaitingSink
from tests.tui.apps import FIXED_NOW

KEY = "fake-vast-key-0123456789"
# What the default [vastai] disk_gb = 50 adds to a fake offer's $/h (priced at Vast's default
# 8 GB): the search's allocated_storage, at the fake's 0.15 $/GB/month over 730 h.
DISK_50_GB = 0.15 * (50 - 8) / 730


def is_(cls: type[EngineEvent]):  # type: ignore[no-untyped-def]
    return lambda e: isinstance(e, cls)


def dashboard(
    env: dict[str, str], tmp_path: Path, *, other_providers: bool = False
) -> tuple[MvpApp, WaitingSink]:
    """The dashboard on a real engine; `other_providers`: as `mvp-tui` starts it, with
    engines for the board's other providers (on the same sink) for picks that mix them."""
    # A free port for the run's OpenAI endpoint: tests run side by side (not the default).
    config = load_config(env={"MVP_STATE_DIR": str(tmp_path / "state"),
                              "MVP_PROMPT_OPENAI_PORT": "0", **env},
                         paths=ConfigPaths(default=tmp_path / "none.toml"))
    sink, seen = UiPort(), WaitingSink()

    def tee(event: EngineEvent) -> None:
        sink(event)
        seen(event)

    # The node agent's pass-through (the container env file of a fake instance) only.
    environ = {k: v for k, v in env.items() if k == "MVP_NODE_PROVIDER_ENV_FILE"}
    engine = RunEngine(config, tee, environ=environ)

    def engine_for(kind: str, hub: ChannelHub) -> RunEngine:
        return RunEngine(config.for_provider(kind), tee, environ=environ, hub=hub,
                         ledger=engine.ledger)

    app = MvpApp(config, engine=engine, sink=sink, clock=lambda: FIXED_NOW,
                 engine_for=engine_for if other_providers else None)
    return app, seen


@pytest.fixture
def fake() -> Iterator[FakeVast]:
    with FakeVast(api_key=KEY) as server:
        server.add_offer(dph_total=0.45, gpu_name="RTX 4090")
        server.add_offer(dph_total=0.30, gpu_name="RTX 3090")
        yield server


def vast_env(fake: FakeVast, tmp_path: Path) -> dict[str, str]:
    import asyncssh

    key = asyncssh.generate_private_key("ssh-ed25519")
    key.write_private_key(str(tmp_path / "id"))
    (tmp_path / "id").chmod(0o600)
    return {"MVP_NODE_PROVIDER": "vastai", "VASTAI_API_KEY": KEY, "MVP_VASTAI_API_URL": fake.url,
            "MVP_VASTAI_SSH_IDENTITY": str(tmp_path / "id"), "MVP_VASTAI_POLL_INTERVAL_SECS": "1",
            "MVP_SSH_READY_TIMEOUT_SECS": "2", "MVP_SSH_RETRY_INITIAL_SECS": "0.1"}


async def test_local_run_from_enter_to_tokens_and_quit_destroys(tmp_path: Path) -> None:
    require_engine()
    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    app, seen = dashboard({"MVP_GGUF_LOCAL_PATH": str(model), "MVP_PROMPT_RPC_BIND": "127.0.0.1:0"},
                          tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await seen.first(is_(OffersListed))
        await pilot.pause()
        await pilot.press("enter")  # local: $0, no confirm
        ready = await seen.first(is_(NodeReady), within=60)
        assert isinstance(ready, NodeReady)
        await pilot.pause()
        assert app.status.ledger.live == 1
        # Focus was not moved since Enter: the prompt box has it, typing goes there.
        await pilot.pause()
        assert app.focused is app.query_one("#prompt-input")
        await pilot.press(*"hello", "enter")
        done = await seen.first(is_(PromptDone), within=60)
        assert isinstance(done, PromptDone) and done.tokens_generated >= 1
        await pilot.pause()
        # The answer sits under its own text: the queue's id came back to the pane.
        assert app.query_one(PromptPane).view.text().startswith("> hello\n")
        running = await seen.first(is_(lease.LeaseRunning))
        agent_pid = int(running.provider_id.removeprefix("local-"))  # type: ignore[attr-defined]
        app.query_one(OffersPane).focus()
        await pilot.press("q")
        await pilot.pause()
        await pilot.press("enter")  # focus starts on "Destroy and quit"
        await seen.first(is_(lease.LeaseDeleted), within=60)
        await pilot.pause()
    assert app.return_code == 0
    assert not alive(agent_pid)


async def test_vast_enter_asks_first_and_cancel_rents_nothing(
    fake: FakeVast, tmp_path: Path
) -> None:
    app, seen = dashboard(vast_env(fake, tmp_path), tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await seen.first(is_(OffersListed))
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, LeaseConfirmScreen)
        focused = app.screen.focused
        assert isinstance(focused, Button) and "cancel" in (focused.id or "").lower()
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, LeaseConfirmScreen)
    assert fake.instances() == []
    assert not [e for e in seen.events if isinstance(e, lease.AttemptStarted)]


async def test_vast_lease_whose_node_cannot_be_reached_is_torn_down(
    fake: FakeVast, tmp_path: Path
) -> None:
    fake.ssh_endpoint = ("127.0.0.1", 9, True)  # nothing listens there
    # One host: one that never answers is a host failure, and the walk would rent the next
    # offer (tests/tui/test_dashboard_gauntlet.py walks on); here the teardown is shown.
    env = {**vast_env(fake, tmp_path), "MVP_LEASE_SAME_FAILURE_LIMIT": "1"}
    app, seen = dashboard(env, tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await seen.first(is_(OffersListed))
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        app.screen.query_one("#lease-go", Button).press()
        running = await seen.first(is_(lease.LeaseRunning), within=30)
        assert running.price_per_hour == pytest.approx(  # type: ignore[attr-defined]
            0.30 + DISK_50_GB, abs=1e-6)  # with the 50 GB disk it rents priced in
        await seen.first(is_(lease.LeaseDeleted), within=30)
        for _ in range(200):  # the pane's fact is a message behind the recorded event
            if app.status.ledger.live == 0:
                break
            await pilot.pause()
        assert app.status.ledger.live == 0
    assert fake.billing() == []
    assert len([e for e in seen.events if isinstance(e, lease.AttemptStarted)]) == 1
