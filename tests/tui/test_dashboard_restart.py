"""Restart safety: the dashboard opens on leases that earlier runs left, and offers to tear
them down, re-attach, or keep them; nothing is forgotten, nothing is silent."""

from __future__ import annotations

import sys
from pathlib import Path

from textual.widgets import Button

from mvp_tui.engine.events import NodeReady, OffersListed
from mvp_tui.lease import events as lease
from mvp_tui.prompt.events import PromptDone
from mvp_tui.widgets.confirm import ConfirmScreen
from mvp_tui.widgets.prompt import PromptPane
from tests.agent.procs import alive
from tests.e2e.node import Node, container_env
from tests.e2e.test_vast_headless import cli
from tests.fakes.tiny_gguf import write_tiny_gguf
from tests.fakes.vastai_server import FakeVast
from tests.prompt.engine import require_engine
from tests.tui.test_dashboard_run import KEY, dashboard, is_
from tests.widgets.data import wait_until


def _env(fake: FakeVast, client: Path, tmp_path: Path) -> dict[str, str]:
    return {
        "MVP_NODE_PROVIDER": "vastai", "VASTAI_API_KEY": KEY, "MVP_VASTAI_API_URL": fake.url,
        "MVP_VASTAI_SSH_IDENTITY": str(client), "MVP_VASTAI_POLL_INTERVAL_SECS": "1",
        "MVP_NODE_PYTHON": sys.executable, "MVP_STATE_DIR": str(tmp_path / "state"),
        "MVP_NODE_DIR": str(tmp_path / "node"),
        "MVP_SSH_RETRY_INITIAL_SECS": "0.2", "MVP_PROMPT_RPC_BIND": "127.0.0.1:0",
        **container_env(fake, tmp_path),
    }


async def test_an_earlier_lease_is_offered_for_teardown_on_start(
    node: Node, tmp_path: Path
) -> None:
    sshd, client = node.sshd, node.client_key
    with FakeVast(api_key=KEY) as fake:
        fake.add_offer(dph_total=0.40)
        fake.ssh_endpoint = ("127.0.0.1", sshd.port, True)
        env = _env(fake, client, tmp_path)
        assert cli("up", "--headless", "--yes", "--until", "leased", env=env).returncode == 0
        assert len(fake.billing()) == 1
        app, seen = dashboard(env, tmp_path)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            while not isinstance(app.screen, ConfirmScreen):
                await pilot.pause()
            # The dialog sets its focus once mounted: wait for it (a loaded machine showed
            # the first button, or none, for a turn), then it must be on Tear down.
            await wait_until(pilot, lambda: getattr(app.screen.focused, "id", None)
                             == "choice-teardown")
            assert isinstance(app.screen.focused, Button)
            assert app.screen.query_one("#choice-reattach", Button)
            await pilot.press("enter")
            await seen.first(is_(lease.LeaseDeleted), within=30)
            await seen.first(is_(OffersListed), within=30)
        assert fake.billing() == []
        assert cli("ls", "--json", env=env).stdout.strip() == ""


async def test_reattach_follows_the_running_agent_and_serves_prompts(
    node: Node, tmp_path: Path
) -> None:
    require_engine()
    sshd, client = node.sshd, node.client_key
    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    with FakeVast(api_key=KEY) as fake:
        fake.add_offer(dph_total=0.40)
        fake.ssh_endpoint = ("127.0.0.1", sshd.port, True)
        env = {**_env(fake, client, tmp_path), "MVP_GGUF_LOCAL_PATH": str(model)}
        up = cli("up", "--headless", "--yes", "--until", "ready", env=env)
        assert up.returncode == 0, up.stderr
        app, seen = dashboard(env, tmp_path)
        async with app.run_test(size=(160, 48)) as pilot:
            while not isinstance(app.screen, ConfirmScreen):
                await pilot.pause()
            app.screen.query_one("#choice-reattach", Button).press()
            try:
                ready = await seen.first(is_(NodeReady), within=60)
            except TimeoutError:
                raise AssertionError([e.to_json()[:300] for e in seen.events]) from None
            assert isinstance(ready, NodeReady)
            assert not [e for e in seen.events if isinstance(e, lease.AttemptStarted)]
            await pilot.pause()
            app.query_one(PromptPane).focus()
            await pilot.press(*"again", "enter")
            done = await seen.first(is_(PromptDone), within=60)
            assert isinstance(done, PromptDone) and done.tokens_generated >= 1
            await pilot.press("tab")
            await pilot.press("q")
            await pilot.pause()
            await pilot.press("enter")  # Destroy and quit
            await seen.first(is_(lease.LeaseDeleted), within=60)
        assert fake.billing() == []
    weights = [e for e in seen.events if isinstance(e, NodeReady)]
    assert len(weights) == 1
    engine_pids = [
        int(line.split('"engine_pid":')[1].split(",")[0])
        for line in up.stdout.splitlines()
        if '"WeightsLoaded"' in line
    ]
    assert engine_pids and not any(alive(pid) for pid in engine_pids)
