"""Esc in the prompt box: it cancels a streaming answer; with nothing streaming it leaves
the box, so the dashboard's own keys (q quits, ? helps) are reachable without knowing Tab."""

from __future__ import annotations

from collections.abc import Callable

from textual.pilot import Pilot

from mvp_tui.engine.events import NodeReady
from mvp_tui.prompt.events import PromptQueued, PromptSource, PromptStarted
from mvp_tui.widgets.offers import OffersPane
from mvp_tui.widgets.prompt import PromptPane
from tests.tui.apps import make_app

T0 = 1_780_000_000.0


async def until(pilot: Pilot[int], holds: Callable[[], bool]) -> None:
    for _ in range(500):
        if holds():
            return
        await pilot.pause()
    raise AssertionError("the app never got there")


def ready() -> NodeReady:
    return NodeReady(at=T0, run_id="r", model_id="tiny", engine="llama.cpp",
                     local_url="http://127.0.0.1:18081")


async def test_esc_with_nothing_streaming_leaves_the_box_for_the_offers_pane() -> None:
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(PromptPane)
        app.dashboard.route(ready())
        await until(pilot, lambda: pane.input.display)
        pane.input.focus()
        await pilot.press(*"draft")
        await pilot.press("escape")
        await pilot.pause()
        offers = app.query_one(OffersPane)
        assert app.focused is not pane.input, "Esc left the focus in the prompt box"
        assert app.focused is not None and (
            app.focused is offers or offers in app.focused.ancestors
        ), f"focus went to {app.focused!r}, not the Offers pane"
        assert pane.input.value == "draft", "leaving the box keeps what was typed"


async def test_esc_while_an_answer_streams_cancels_it_and_keeps_the_focus() -> None:
    app = make_app()
    cancelled: list[object] = []
    def hook(message: object) -> None:
        if isinstance(message, PromptPane.PromptCancelRequested):
            cancelled.append(message)

    async with app.run_test(size=(160, 48), message_hook=hook) as pilot:
        pane = app.query_one(PromptPane)
        app.dashboard.route(ready())
        await until(pilot, lambda: pane.input.display)
        app.dashboard.route(PromptQueued(at=T0, prompt_id=3, text_chars=2, max_tokens=64,
                                         position=0, source=PromptSource.PANE))
        app.dashboard.route(PromptStarted(at=T0, prompt_id=3))
        await until(pilot, lambda: pane.live is not None)
        pane.input.focus()
        await pilot.press("escape")
        await pilot.pause()
        assert cancelled, "Esc did not ask for the stream to be cancelled"
        assert app.focused is pane.input
