"""The window between the node's `WeightsLoaded` frame and the prompt queue (issue 23 §1).

Over SSH the port forward comes between the frame on the hub and `NodeReady`, and the queue
starts after that. A prompt sent in that window is refused ("not serving yet"); it must
leave nothing behind, or the next answer shows under the wrong question.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from textual.pilot import Pilot

from mvp_tui.datastream import MVP_WORKER_WEIGHTS, ChannelHub, node_stream
from mvp_tui.engine.events import NodeReady
from mvp_tui.prompt.events import PromptQueued, PromptSource, PromptStarted
from mvp_tui.widgets.bootstrap import BootstrapPane
from mvp_tui.widgets.bootstrap_model import StageId, Status
from mvp_tui.widgets.prompt import PromptPane
from tests.tui.apps import make_app

T0 = 1_780_000_000.0


async def until(pilot: Pilot[int], holds: Callable[[], bool]) -> None:
    """Let the app run until `holds()` (a bounded number of turns of its loop)."""
    for _ in range(500):
        if holds():
            return
        await pilot.pause()
    raise AssertionError("the app never got there")


def weights_frame(hub: ChannelHub) -> None:
    record = {"type": "WeightsLoaded", "model_id": "tiny", "port": 18081, "load_ms": 5}
    hub.append(MVP_WORKER_WEIGHTS, json.dumps(record).encode(), node_stream(1, 1))


async def test_a_prompt_refused_before_the_queue_leaves_no_text_behind() -> None:
    app = make_app()  # no prompt queue: every submit is refused, as in the window
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(PromptPane)
        app.dashboard.route(NodeReady(at=T0, run_id="r", model_id="tiny", engine="llama.cpp",
                            local_url="http://127.0.0.1:18081"))
        await until(pilot, lambda: pane.input.display)
        pane.input.focus()
        await pilot.press(*"first", "enter")  # refused: "not serving yet"
        await pilot.pause()
        # The engine serves later; the next prompt from the pane is queued as prompt 7.
        app.dashboard.route(PromptQueued(at=T0, prompt_id=7, text_chars=6, max_tokens=64,
                                         position=0, source=PromptSource.PANE))
        app.dashboard.route(PromptStarted(at=T0, prompt_id=7))
        await pilot.pause()
        question = app.query_one(PromptPane).view.text().splitlines()[0]
        assert "first" not in question, f"prompt 7 shown under the refused text: {question!r}"
        assert question == "> (a 6-char prompt)"


async def test_the_box_opens_on_node_ready_not_on_the_weights_frame() -> None:
    hub = ChannelHub()
    app = make_app(hub=hub)
    async with app.run_test(size=(160, 48)) as pilot:
        pane, bootstrap = app.query_one(PromptPane), app.query_one(BootstrapPane)
        weights_frame(hub)
        # The frame is on screen (the Bootstrap pane read it).
        await until(pilot, lambda: bootstrap.model.stages[StageId.ENGINE].status is Status.DONE)
        assert not pane.input.display  # the queue may not exist yet: nothing to type into
        app.dashboard.route(NodeReady(at=T0, run_id="r", model_id="tiny", engine="llama.cpp",
                            local_url="http://127.0.0.1:18081"))
        await until(pilot, lambda: pane.input.display)
        assert pane.ready and pane.model_name == "tiny"
