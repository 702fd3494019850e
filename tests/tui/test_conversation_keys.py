"""Issue 40 §1/§4: the transcript's keys (Esc to the transcript, `y` copies the last answer,
ctrl+s saves it as Markdown, ctrl+n starts a new conversation) and its bounds: after many
prompts the pane keeps at most `TURNS_SHOWN` earlier turns in its transcript view (and their
drawn lines) and nothing per prompt in its own maps, while the saved transcript keeps every
turn up to its bound."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from mvp_tui.engine.events import NodeReady
from mvp_tui.prompt.events import (
    PromptDone,
    PromptQueued,
    PromptSource,
    PromptStarted,
    TextDelta,
)
from mvp_tui.tui.app import MvpApp
from mvp_tui.widgets.prompt import TURNS_SHOWN, PromptPane
from tests.tui.apps import make_app
from tests.widgets.data import T0, wait_until


def ready() -> NodeReady:
    return NodeReady(at=T0, run_id="r", model_id="tiny", engine="llama.cpp",
                     local_url="http://127.0.0.1:18081")


async def answer(pilot: Pilot[int], app: MvpApp, n: int, text: str, *,
                 source: PromptSource = PromptSource.PANE, dropped: int = 0) -> None:
    pane = app.query_one(PromptPane)
    kept = len(pane.transcript)
    if source is PromptSource.PANE:
        pane.asked(n, f"question {n}")
    app.dashboard.route(PromptQueued(at=T0, prompt_id=n, text_chars=10, max_tokens=64,
                                     position=0, source=source))
    app.dashboard.route(PromptStarted(at=T0, prompt_id=n, turns_dropped=dropped))
    app.dashboard.route(TextDelta(at=T0 + 0.1, prompt_id=n, text=text))
    app.dashboard.route(PromptDone(at=T0 + 0.2, prompt_id=n, final_text=text, tokens_generated=1,
                         elapsed_ms=200, ttft_ms=100, tokens_per_s=10.0))
    await wait_until(pilot, lambda: pane.live is None and len(pane.transcript) > kept)


async def test_y_copies_the_last_answer_and_ctrl_s_saves_the_transcript(tmp_path: Path) -> None:
    app = make_app(env={"MVP_STATE_DIR": str(tmp_path / "state")})
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(PromptPane)
        app.dashboard.route(ready())
        await wait_until(pilot, lambda: pane.input.display)
        await answer(pilot, app, 1, "the first answer")
        await answer(pilot, app, 2, "the **second** answer")
        pane.input.focus()
        await pilot.press("escape")  # from the box to the transcript
        await pilot.pause()
        assert app.focused is pane.query_one("#prompt-answer")
        await pilot.press("y")
        assert app.clipboard == "the **second** answer"
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: any((tmp_path / "state" / "transcripts").glob("*.md")))
        await pilot.press("escape")  # and out of the pane
        await pilot.pause()
        assert app.focused is not None and pane not in app.focused.ancestors_with_self
    saved = next((tmp_path / "state" / "transcripts").glob("transcript-*.md")).read_text()
    assert "> question 1\n\nthe first answer" in saved
    assert "> question 2\n\nthe **second** answer" in saved


async def test_ctrl_n_starts_a_new_conversation() -> None:
    app = make_app()
    asked: list[object] = []

    def hook(message: object) -> None:
        if isinstance(message, PromptPane.NewConversationRequested):
            asked.append(message)

    async with app.run_test(size=(160, 48), message_hook=hook) as pilot:
        pane = app.query_one(PromptPane)
        app.dashboard.route(ready())
        await wait_until(pilot, lambda: pane.input.display)
        await answer(pilot, app, 1, "one")
        pane.input.focus()
        await pilot.press("ctrl+n")
        await wait_until(pilot, lambda: "── a new conversation ──" in pane.view.text())
        assert asked, "ctrl+n did not reach the app (the engine's conversation was kept)"
        # The rule under the answered turn: the next question starts below it.
        assert pane.view.text().rstrip().endswith("── a new conversation ──")
        assert "new conversation" in pane.transcript.markdown("t")
        await pilot.press("ctrl+n")  # a second one with no turn since: no second rule
        await pilot.pause()
        assert pane.view.text().count("a new conversation") == 1


async def test_the_pane_keeps_a_bounded_transcript_after_many_prompts() -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(PromptPane)
        app.dashboard.route(ready())
        await wait_until(pilot, lambda: pane.input.display)
        prompts = 3 * TURNS_SHOWN
        gone: list[weakref.ref[object]] = []  # the turns trimmed away
        for n in range(1, prompts + 1):
            source = PromptSource.RPC if n % 2 else PromptSource.PANE
            await answer(pilot, app, n, f"answer {n}", source=source, dropped=n // 4)
            if n == 2:
                await pilot.pause()  # drawn: its lines are cached in the view
                gone.append(weakref.ref(pane.view.turns[0]))
        await pilot.pause()
        view = pane.view
        assert len(view.turns) == TURNS_SHOWN + 1  # the earlier ones and the last
        notes = [item for item in view.items if item not in view.turns]
        assert len(notes) <= 1  # the marker at most: no rule or marker left above them
        assert len(view._drawn) <= len(view.items)  # no lines kept for an item gone
        text = view.text()
        assert "answer 1\n" not in text and f"answer {prompts}" in text
        assert len(pane.transcript) == prompts  # all of them kept for ctrl+s, up to its bound
        assert not pane._questions and not pane._pane_ids and not pane.waiting
        assert app.port.take_tokens(prompts) == []
        gc.collect()
        assert gone and not [ref for ref in gone if ref() is not None]


async def rebuild_keys(pilot: Pilot[int], app: MvpApp, footer: Footer) -> None:
    """The bindings changed (as the focus moving does): the footer's keys made anew."""
    old = list(footer.query(FooterKey))  # held here until the new ones are up
    app.screen.refresh_bindings()
    await wait_until(pilot, lambda: all(key not in old for key in footer.query(FooterKey)))


async def test_widgets_that_left_the_tree_are_let_go_after_many_prompts() -> None:
    """The footer rebuilds its keys as the bindings change (every prompt's start and end,
    every move of the focus); each old key was kept alive by the watcher it set on the
    footer (Textualize/textual#6666): ~30 KB a prompt in bench/bench_soak.py. The pane lets
    them go at each answer's end (widgets/released.py)."""
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(PromptPane)
        app.dashboard.route(ready())
        await wait_until(pilot, lambda: pane.input.display)
        footer = app.query_one(Footer)
        await wait_until(pilot, lambda: bool(footer.query(FooterKey)))
        prompts = 20
        for n in range(1, prompts + 1):
            await rebuild_keys(pilot, app, footer)
            await answer(pilot, app, n, f"answer {n}", source=PromptSource.RPC)
        await pilot.pause()
        shown = len(footer.query(FooterKey))
        gc.collect()
        kept = [w for w in gc.get_objects() if isinstance(w, Widget) and not w.is_attached]
        # At most the keys of the rebuild since the last answer's end: not one per prompt.
        assert len(kept) <= shown, f"{len(kept)} widgets out of the tree still alive: " + \
            ", ".join(sorted({type(w).__name__ for w in kept}))
