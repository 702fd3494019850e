"""The panes that matter as SVG snapshots: fixed size, data, clocks (UTC) and theme."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widget import Widget

from mvp_tui.datastream import ChannelHub
from mvp_tui.engine.events import NodeReady, RunState, RunStateChanged
from mvp_tui.prompt.events import PromptQueued, PromptRpcListening, PromptStarted, TextDelta
from mvp_tui.ssh.events import PortForwarded
from mvp_tui.tui.app import MvpApp
from mvp_tui.widgets.bootstrap import BootstrapPane
from mvp_tui.widgets.channels import ChannelsPane
from mvp_tui.widgets.leases import LeasesPane
from mvp_tui.widgets.offers import OffersPane
from mvp_tui.widgets.prompt import PromptPane
from tests.widgets.data import (
    T0,
    fixed_clock,
    many_offers,
    replay_into,
    small_offers,
    ssh_events,
    wait_until,
    walk_events,
    write_archive,
)
from tests.widgets.harness import Harness

BIG = (160, 48)
SMALL = (100, 30)
RunBefore = Callable[[Pilot[None]], Awaitable[None]]
ANSWER = [
    "The walk ",
    "looks the instance up ",
    "**by its label** ",
    "before trying anything ",
    "else,\n\n",
    "- so a lost answer ",
    "never becomes ",
    "a second bill\n",
    "- and a ",
]


def panes() -> list[Widget]:
    return [
        OffersPane(provider="vastai", clock=fixed_clock(T0 + 95)),
        BootstrapPane(clock=fixed_clock(T0 + 95)),
        LeasesPane(clock=fixed_clock(T0 + 95), tz=UTC),
        ChannelsPane(clock=fixed_clock(0.0)),
        PromptPane(),
    ]


def offers_with_picks_sort_filter() -> RunBefore:
    async def run_before(pilot: Pilot[None]) -> None:
        pane = pilot.app.query_one(OffersPane)
        pane.set_offers([*small_offers(), *many_offers(60)])
        pane.focus()
        await pilot.press("s")  # $/GB·h
        await pilot.press("slash", *"4090", "enter")
        await pilot.press("down", "space", "down", "down", "space", "up")
        await pilot.pause()

    return run_before


def dashboard(archive: Path) -> RunBefore:
    """Every pane mid-run: offers picked, the walk done, bootstrap, channels, a streaming
    answer: recorded engine events through the app's real port (each to the pane that owns
    it), node frames from a replayed archive."""

    async def run_before(pilot: Pilot[None]) -> None:
        app = pilot.app
        assert isinstance(app, MvpApp)
        hub = ChannelHub(clock=lambda: 0.0)
        await replay_into(archive, hub)
        offers = app.query_one(OffersPane)
        offers.set_offers(small_offers())
        offers.focus()
        await pilot.press("down", "space", "down", "space")
        for event in [*walk_events(), *ssh_events()]:
            app.dashboard.route(event)
        await pilot.pause()  # the lease's facts are in its panes before the node's frames
        app.query_one(BootstrapPane).attach_hub(hub)
        app.query_one(ChannelsPane).attach_hub(hub)
        prompt = app.query_one(PromptPane)
        # Serving, as the engine and the run's controller announce it (a small terminal
        # shows the prompt).
        app.dashboard.route(NodeReady(at=T0 + 90, run_id="r-7f3a", model_id="tiny-llama-q4",
                            engine="llama.cpp", local_url="http://127.0.0.1:18080"))
        app.dashboard.route(RunStateChanged(at=T0 + 90, run_id="r-7f3a",
                                            state=RunState.SERVING.value))
        await wait_until(pilot, lambda: prompt.input.display)
        prompt.focus()
        # Typed in at once (key by key, the harness waits for idle after each: 3.5 s of a
        # snapshot's 6); typing itself is the prompt tests' subject.
        question = "what does the walk do when an answer is lost?"
        prompt.input.value = question
        prompt.input.cursor_position = len(question)
        await pilot.press("enter")
        prompt.asked(1, question)  # as the app does with the id the run's queue gave it
        for event in (
            PortForwarded(at=T0 + 90, lease_key="7003", local_port=18080, remote_port=18081),
            PromptRpcListening(at=T0 + 90, host="127.0.0.1", port=19777),
            PromptQueued(at=T0 + 91, prompt_id=1, text_chars=50, max_tokens=128, position=0),
            PromptStarted(at=T0 + 91, prompt_id=1),
            *(TextDelta(at=T0 + 91.18 + i * 0.009, prompt_id=1, text=word)
              for i, word in enumerate(ANSWER)),
        ):
            app.dashboard.route(event)
        await wait_until(pilot, lambda: prompt.view.last_turn is not None
                         and prompt.view.last_turn.answer.endswith("- and a "))
        await pilot.pause()

    return run_before


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    return write_archive(tmp_path / "run.jsonl")


def test_offers_table_with_picks_sort_and_filter(snap_compare) -> None:  # type: ignore[no-untyped-def]
    app = Harness(lambda: [OffersPane(provider="vastai", clock=fixed_clock(T0 + 95))])
    assert snap_compare(app, terminal_size=BIG, run_before=offers_with_picks_sort_filter())


def test_leases_pane_mid_walk(snap_compare) -> None:  # type: ignore[no-untyped-def]
    app = Harness(lambda: [LeasesPane(clock=fixed_clock(T0 + 95), tz=UTC)])

    async def run_before(pilot: Pilot[None]) -> None:
        pane = pilot.app.query_one(LeasesPane)
        for event in walk_events()[:-2]:  # 7003 created, still pending
            pane.handle_event(event)
        pane.focus()
        await pilot.pause()

    assert snap_compare(app, terminal_size=BIG, run_before=run_before)

# The composed dashboard (every pane, the confirm, a failure's view) is snapshotted as the
# real app in tests/tui/test_app_snapshots.py.
