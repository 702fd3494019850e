"""Issue 40 §5: no full collection of Python's cycle collector while an answer streams (one
walks every object the dashboard holds and stalls the tokens: widgets/collector.py), and the
pane's after-answer work (the collector back, the answer drawn as markdown) waits until the
answer's last frame is drawn, not merely until the end event has arrived."""

from __future__ import annotations

import gc

from mvp_tui.prompt.events import PromptDone, PromptQueued, PromptSource, PromptStarted, TextDelta
from mvp_tui.widgets.collector import HELD_THRESHOLD, full_collections_held
from mvp_tui.widgets.prompt import PromptPane
from tests.tui.apps import make_app
from tests.tui.test_conversation_keys import ready
from tests.widgets.data import T0, wait_until

WORDS = 400


async def test_full_collections_wait_until_the_answer_is_drawn() -> None:
    app = make_app()
    oldest = gc.get_threshold()[2]
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(PromptPane)
        app.dashboard.route(ready())
        await wait_until(pilot, lambda: pane.input.display)
        view = pane.view
        drawn: list[int] = []  # the screen's frames
        frame = view.screen._compositor_refresh

        def counted() -> None:
            drawn.append(1)
            frame()

        view.screen._compositor_refresh = counted  # type: ignore[method-assign]
        seen: list[tuple[bool, int, bool, bool]] = []  # at the after-answer work
        after = pane._after_answer

        def spy() -> None:
            turn = view.last_turn
            assert turn is not None
            seen.append((full_collections_held(), len(drawn), view.up_to_date, turn.formatted))
            after()

        pane._after_answer = spy  # type: ignore[method-assign]
        at_end: list[int] = []  # frames drawn when the end event reached the pane
        ended = pane._ended

        def ending(event: PromptDone) -> None:
            at_end.append(len(drawn))
            ended(event)

        pane._ended = ending  # type: ignore[method-assign, assignment]
        pane.asked(1, "count")
        app.dashboard.route(PromptQueued(at=T0, prompt_id=1, text_chars=5, max_tokens=WORDS,
                                         position=0, source=PromptSource.PANE))
        app.dashboard.route(PromptStarted(at=T0, prompt_id=1))
        await wait_until(pilot, lambda: pane.live is not None)
        assert gc.get_threshold()[2] == HELD_THRESHOLD  # held from the answer's start
        words = [f" w{n}" for n in range(WORDS)]
        for n, word in enumerate(words):  # a burst, as a fast engine sends it
            app.dashboard.route(TextDelta(at=T0 + 0.1 + n / 1000, prompt_id=1, text=word))
        app.dashboard.route(PromptDone(at=T0 + 1, prompt_id=1, final_text="".join(words),
                             tokens_generated=WORDS, elapsed_ms=1000, ttft_ms=100,
                             tokens_per_s=400.0))
        await wait_until(pilot, lambda: bool(seen) and not full_collections_held())
        held, frames, up_to_date, formatted = seen[0]
        assert held, "the collector was given back before the answer was drawn"
        assert frames > at_end[0] and up_to_date, "after-answer work before the last frame"
        assert not formatted  # the markdown render waits for it too
        assert view.last_turn is not None and view.last_turn.formatted
        assert view.text().rstrip().splitlines()[-2].endswith("w399")
        assert gc.get_threshold()[2] == oldest


async def test_an_app_closed_mid_answer_gives_the_collector_back() -> None:
    app = make_app()
    oldest = gc.get_threshold()[2]
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(PromptPane)
        app.dashboard.route(ready())
        await wait_until(pilot, lambda: pane.input.display)
        app.dashboard.route(PromptStarted(at=T0, prompt_id=1))
        app.dashboard.route(TextDelta(at=T0 + 0.1, prompt_id=1, text="half an answer"))
        await wait_until(pilot, lambda: pane.live is not None)
        assert full_collections_held()
    assert not full_collections_held() and gc.get_threshold()[2] == oldest
