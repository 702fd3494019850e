"""One board across providers, in the real dashboard: the fake Vast.ai server and this
machine (local) searched at once; a failing provider keeps the others on the board and says
why; picks that mix providers are walked across them in the picked order."""

from __future__ import annotations

from pathlib import Path

from mvp_tui.engine.events import NodeReady, OffersListed
from mvp_tui.lease import events as lease
from mvp_tui.tui.app import MvpApp
from mvp_tui.widgets.bootstrap import BootstrapPane
from mvp_tui.widgets.channels import ChannelsPane
from mvp_tui.widgets.offers import OffersPane
from tests.agent.procs import alive
from tests.fakes.tiny_gguf import write_tiny_gguf
from tests.fakes.vastai_server import FakeVast, Fault
from tests.prompt.engine import require_engine
from tests.prompt.waiting import WaitingSink
from tests.tui.apps import engine_of
from tests.tui.test_dashboard_run import KEY, dashboard, is_, vast_env
from tests.widgets.data import wait_until
from tests.widgets.harness import screen_text


def mixed_dashboard(env: dict[str, str], tmp_path: Path) -> tuple[MvpApp, WaitingSink]:
    return dashboard(env, tmp_path, other_providers=True)


async def test_a_failing_vast_keeps_local_on_the_board_and_says_why(tmp_path: Path) -> None:
    with FakeVast(api_key=KEY) as fake:
        fake.add_offer(dph_total=0.30, gpu_name="RTX 3090")
        fake.script("search", Fault(status=401))  # the key is refused this time
        app, seen = mixed_dashboard(vast_env(fake, tmp_path), tmp_path)
        async with app.run_test(size=(160, 48)) as pilot:
            pane = app.query_one(OffersPane)
            await wait_until(pilot, lambda: bool(pane.notes) and pane.model.total > 0, 30)
            assert [k.split(":")[0] for k in pane.table.keys] == ["local"]
            assert "vastai" in pane.notes and "API key" in pane.notes["vastai"]
            assert pane.notes["runpod"].startswith("not configured: set RUNPOD_API_KEY")
            # The notes are the pane's at once; the screen shows them at its next paint.
            await wait_until(
                pilot, lambda: "vastai: Vast.ai refused the API key" in screen_text(app), 20
            )
            assert "runpod: not configured: set RUNPOD_API_KEY" in screen_text(app)
            # The next search answers: Vast's offers join the board, local's stay.
            await pilot.press("r")
            await wait_until(pilot, lambda: "vastai" not in pane.notes, 30)
            assert {k.split(":")[0] for k in pane.table.keys} == {"local", "vastai"}
            assert not [e for e in seen.events if isinstance(e, lease.AttemptStarted)]


async def test_picks_across_providers_walk_to_the_next_provider(tmp_path: Path) -> None:
    """Vast's offer is picked first, local's second; the Vast offer is sold by the time of
    the create: the walk goes on to this machine, which serves, then quits destroying it."""
    require_engine()
    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    with FakeVast(api_key=KEY) as fake:
        sold = fake.add_offer(dph_total=0.30, gpu_name="RTX 3090")
        env = {**vast_env(fake, tmp_path), "MVP_GGUF_LOCAL_PATH": str(model),
               "MVP_PROMPT_RPC_BIND": "127.0.0.1:0",
               "MVP_SSH_READY_TIMEOUT_SECS": "60"}  # the local engine's load
        app, seen = mixed_dashboard(env, tmp_path)
        async with app.run_test(size=(160, 48)) as pilot:
            pane = app.query_one(OffersPane)
            await seen.first(is_(OffersListed))
            await wait_until(pilot, lambda: pane.model.total == 2, 30)
            pane.focus()
            assert pane.table.move_cursor_to_key(f"vastai:{sold}")
            await pilot.press("space")
            assert pane.table.move_cursor_to_key("local:local")
            await pilot.press("space", "enter")
            await pilot.pause()
            fake.remove_offer(sold)
            confirm = app.screen
            assert [o.provider for o in confirm.offers] == ["vastai", "local"]  # type: ignore[attr-defined]
            await pilot.press("right", "enter")  # Lease
            ready = await seen.first(is_(NodeReady), within=90)
            assert isinstance(ready, NodeReady)
            answered = [e for e in seen.events if isinstance(e, lease.AttemptAnswered)]
            assert [e.outcome for e in answered] == ["unavailable", "created"]
            assert engine_of(app).config.provider == "local"
            # One hub for the session: the panes attached at mount show the local node's
            # channels, with nothing re-attached by hand at the provider switch.
            session = app.session
            assert session is not None and session.retired
            assert session.retired[0].hub is engine_of(app).hub is session.hub
            assert app.query_one(ChannelsPane).hub is session.hub
            assert app.query_one(BootstrapPane).hub is session.hub
            running = await seen.first(is_(lease.LeaseRunning))
            pid = int(running.provider_id.removeprefix("local-"))  # type: ignore[attr-defined]
            await pilot.pause()
            pane.focus()  # the prompt box has focus now: q there would be typed
            await pilot.press("q")
            await pilot.pause()
            await pilot.press("enter")  # "Destroy and quit"
            await seen.first(is_(lease.LeaseDeleted), within=60)
            await pilot.pause()
        assert fake.billing() == []
    assert not alive(pid)
