"""Issue 40 §1: a three-turn conversation in the Prompt pane, as SVG snapshots at the three
sizes and both themes: two turns frozen above (question, answer, figures), the last one live
under them, the marker where the third request left the first turn out."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from textual.pilot import Pilot

from mvp_tui.engine.events import NodeReady, RunState, RunStateChanged
from mvp_tui.events import EngineEvent
from mvp_tui.prompt.events import PromptDone, PromptQueued, PromptStarted, TextDelta
from mvp_tui.tui.app import MvpApp
from mvp_tui.widgets.prompt import PromptPane
from tests.tui.apps import make_app
from tests.widgets.data import T0, wait_until

TURNS = [
    ("what is a GPU?", ["A **GPU** ", "runs many small ", "cores in parallel."]),
    ("and a TPU?", ["A TPU is ", "Google's matrix ", "accelerator:\n\n", "- systolic arrays\n",
                    "- bfloat16\n"]),
    ("which one is cheaper per token?", ["For small models, ", "a rented GPU ", "usually."]),
]


def turn_events(n: int, question: str, words: list[str]) -> Iterator[EngineEvent]:
    at = T0 + 100 + 10 * n
    yield PromptQueued(at=at, prompt_id=n, text_chars=len(question), max_tokens=64, position=0)
    # The third request left the first turn out: the context was full.
    yield PromptStarted(at=at, prompt_id=n, turns_sent=min(n - 1, 1),
                        turns_dropped=1 if n == 3 else 0)
    for i, word in enumerate(words):
        yield TextDelta(at=at + 0.2 + 0.01 * i, prompt_id=n, text=word)
    yield PromptDone(at=at + 1, prompt_id=n, final_text="".join(words),
                     tokens_generated=len(words) * 3, elapsed_ms=250 + 10 * n, ttft_ms=180,
                     tokens_per_s=60.0 + n, finish_reason="stop")


async def three_turns(pilot: Pilot[None]) -> None:
    app = pilot.app
    assert isinstance(app, MvpApp)
    pane = app.query_one(PromptPane)
    app.dashboard.route(NodeReady(at=T0 + 90, run_id="r-7f3a", model_id="tiny-llama-q4",
                        engine="llama.cpp", local_url="http://127.0.0.1:18080"))
    # Serving, as the run's controller says it (a small terminal then shows the prompt).
    app.dashboard.route(RunStateChanged(at=T0 + 90, run_id="r-7f3a", state=RunState.SERVING.value))
    await wait_until(pilot, lambda: pane.input.display)
    pane.input.cursor_blink = False  # a snapshot must not catch a blink
    pane.focus()
    for n, (question, words) in enumerate(TURNS, 1):
        pane.asked(n, question)  # as the app does with the id the run's queue gave it
        for event in turn_events(n, question, words):
            app.dashboard.route(event)
        answer = "".join(words)
        await wait_until(pilot, lambda answer=answer:  # type: ignore[misc]
                         pane.live is None and pane.view.turns[-1].answer == answer)
        await pilot.pause()
    # The last answer drawn as markdown, as every answer once its last token is on screen.
    await wait_until(pilot, lambda: all(turn.formatted for turn in pane.view.turns))
    await pilot.pause()


@pytest.mark.parametrize("theme", ["mvp-dark", "mvp-light"])
@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 48)],
                         ids=["80x24", "100x30", "160x48"])
def test_three_turn_transcript(snap_compare, theme: str, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(make_app(theme=theme), terminal_size=size, run_before=three_turns)
