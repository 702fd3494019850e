"""Issue 40 §5: the Prompt pane's own cost. A streaming answer repaints the transcript's own
lines: the dashboard is never laid out again for a token (a layout reflows every pane, 3–8 ms
at 160x48); tokens faster than frames are drawn together; the answer's end is on the terminal
at once, not at the next tick of Textual's frame timer; and the lines drawn piece by piece are
the lines of the whole answer."""

from __future__ import annotations

import random
import re

import pytest
from textual.app import App, ComposeResult
from textual.strip import Strip

from mvp_tui.prompt.events import PromptDone, PromptQueued, PromptSource, PromptStarted, TextDelta
from mvp_tui.widgets.answer_text import settled_end, wrap_spans
from mvp_tui.widgets.prompt import PromptPane
from mvp_tui.widgets.transcript_view import ShownTurn, TranscriptView
from tests.tui.apps import make_app
from tests.tui.test_conversation_keys import answer, ready
from tests.widgets.data import T0, wait_until

WORDS = 400


async def test_a_streaming_answer_never_lays_the_dashboard_out() -> None:
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(PromptPane)
        app.dashboard.route(ready())
        await wait_until(pilot, lambda: pane.input.display)
        # An earlier answer long enough that the transcript scrolls (its scrollbar is up).
        await answer(pilot, app, 1, " ".join(f"earlier{n}" for n in range(300)))
        pane.asked(2, "count")
        app.dashboard.route(PromptQueued(at=T0, prompt_id=2, text_chars=5, max_tokens=WORDS,
                                         position=0, source=PromptSource.PANE))
        app.dashboard.route(PromptStarted(at=T0, prompt_id=2))
        await wait_until(pilot, lambda: pane.live is not None)
        for _ in range(3):
            await pilot.pause()  # the start's footer keys and first frame settled
        compositor = app.screen._compositor
        reflow = compositor.reflow
        layouts: list[int] = []

        def counted(*args: object, **kwargs: object) -> object:
            layouts.append(1)
            return reflow(*args, **kwargs)  # type: ignore[arg-type]

        compositor.reflow = counted  # type: ignore[method-assign]
        view = pane.view
        for n in range(WORDS):
            app.dashboard.route(TextDelta(at=T0 + 0.1 + n / 1000, prompt_id=2,
                                          text=f" w{n}" + ("\n\n" if n % 50 == 49 else "")))
            if n % 20 == 19:
                await pilot.pause()  # frames drawn between the batches
        await wait_until(pilot, lambda: pane.live is not None and pane.live.deltas == WORDS
                         and view.up_to_date)
        await pilot.pause()
        assert not layouts, f"{len(layouts)} layouts of the whole screen for one answer"
        assert view.scroll_y == view.max_scroll_y > 0  # it followed the answer's end
        assert "w398 w399" in view.text()


async def test_the_end_of_an_answer_is_drawn_at_once() -> None:
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(PromptPane)
        app.dashboard.route(ready())
        await wait_until(pilot, lambda: pane.input.display)
        view = pane.view
        rows: list[str] = []  # the view's rows as the compositor drew them
        render_line = view.render_line

        def drawn(y: int) -> Strip:
            strip = render_line(y)
            rows.append(strip.text.strip())
            return strip

        view.render_line = drawn  # type: ignore[method-assign]
        drawn_in_the_end: list[list[str]] = []
        ended = pane._ended

        def ending(event: PromptDone) -> None:
            before = len(rows)
            ended(event)
            drawn_in_the_end.append(rows[before:])

        pane._ended = ending  # type: ignore[method-assign, assignment]
        app.dashboard.route(PromptStarted(at=T0, prompt_id=1))
        app.dashboard.route(TextDelta(at=T0 + 0.1, prompt_id=1, text="the last token"))
        await wait_until(pilot, lambda: "the last token" in rows)
        for _ in range(3):
            await pilot.pause()  # drawn: nothing of the view waits for a frame
        app.dashboard.route(PromptDone(at=T0 + 0.2, prompt_id=1, final_text="the last token",
                                       tokens_generated=3, elapsed_ms=200, ttft_ms=100,
                                       tokens_per_s=10.0))
        await wait_until(pilot, lambda: bool(drawn_in_the_end))
        # The view's rows drawn within the end event's own handling, figures and all.
        assert "the last token" in drawn_in_the_end[0], "the end waited for the frame timer"
        assert any(row.startswith("3 tok · 10 tok/s") for row in drawn_in_the_end[0])


class OneView(App[None]):
    def compose(self) -> ComposeResult:
        yield TranscriptView(id="view")


def chunks(text: str, rng: random.Random) -> list[str]:
    """`text` cut at random places, as deltas come (a word split across two of them too)."""
    cuts = sorted(rng.sample(range(1, len(text)), k=min(len(text) - 1, len(text) // 3)))
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]


ANSWERS = [
    " ".join(f"word{n}" for n in range(120)),
    "short line\n\nA paragraph of words that wraps more than once at a narrow width, "
    "then\nanother line   with  spaces, and averyveryveryverylongwordthatmustbefolded.\n",
    "- item one\n- item two\n\n```\ncode  kept  as  typed\n\nstill code\n```\n" + "tail " * 40,
    "A **bold** start.\n\nA second paragraph, *closed*.\n\n# A heading\n\nthe open one " * 3,
]


@pytest.mark.parametrize("width", [24, 37, 80])
async def test_lines_drawn_piece_by_piece_are_the_lines_of_the_whole_answer(width: int) -> None:
    rng = random.Random(width)
    app = OneView()
    async with app.run_test(size=(width, 20)) as pilot:
        view = app.query_one(TranscriptView)
        for text in ANSWERS:
            whole = ShownTurn("q", answer=text)
            view.add(whole)
            expected = view.text()
            view.drop(whole)
            view.add(ShownTurn("q"))
            for piece in chunks(text, rng):
                view.append_answer(piece)
                view.text()  # drawn after each piece, as a frame between batches would
            assert view.text() == expected
            view.drop(view.items[-1])
        await pilot.pause()


async def test_tokens_faster_than_frames_are_drawn_together() -> None:
    app = OneView()
    async with app.run_test(size=(80, 20)) as pilot:
        view = app.query_one(TranscriptView)
        view.add(ShownTurn("q"))
        await pilot.pause()
        syncs: list[int] = []
        sync = view._sync

        def counted() -> None:
            syncs.append(1)
            sync()

        view._sync = counted  # type: ignore[method-assign]
        for n in range(50):  # within one frame's time
            view.append_answer(f" w{n}", figures=f"{n + 1} tok")
        assert len(syncs) <= 2 and not view.up_to_date  # at most the first one drawn at once
        await wait_until(pilot, lambda: view.up_to_date)
        assert len(syncs) <= 3
        assert view.text().endswith("w49\n50 tok")


def test_blocks_close_at_a_blank_line_outside_a_code_fence() -> None:
    text = "one\n\n```\na\n\nb\n```\n\nopen"
    assert settled_end(text, 0) == text.index("open")
    assert settled_end("one\n\n```\na\n\nb", 0) == len("one\n\n")  # the fence is still open
    assert settled_end("no blank line yet\n", 0) == 0
    assert settled_end(text, text.index("open")) == text.index("open")  # none closed since


@pytest.mark.parametrize("width", [1, 5, 12, 40])
def test_the_plain_wrap_is_greedy_folds_long_words_and_keeps_every_character(width: int) -> None:
    rng = random.Random(width)
    words = ["a", "bb", "word", "averyveryverylongwordindeed", "x" * width, " ", "   "]
    text = " " + "".join(rng.choice(words) + " " * rng.randint(0, 3) for _ in range(200))
    spans = wrap_spans(text, width)
    assert "".join(text[a:b] for a, b in spans) == text  # contiguous, nothing lost
    assert all(b > a for a, b in spans[:-1])
    for a, b in spans[:-1]:
        assert len(text[a:b].rstrip()) <= width
        # Broken only where the next word would not fit (or inside a word too long for it).
        next_word = re.compile(r"\S+").search(text, b)
        assert next_word is not None
        assert b - a == width or next_word.end() - a > width


async def test_a_batch_of_tokens_is_cleaned_and_never_read_as_markup() -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(PromptPane)
        app.dashboard.route(ready())
        await wait_until(pilot, lambda: pane.input.display)
        app.dashboard.route(PromptStarted(at=T0, prompt_id=1))
        for n, text in enumerate(["\x1b[2J\x1b[31mred", "\x1b[0m and ", "[bold]not bold[/bold]",
                                  "\x07 ", "x" * 5000]):  # one line longer than any cap
            app.dashboard.route(TextDelta(at=T0 + n / 10, prompt_id=1, text=text))
        await wait_until(pilot, lambda: pane.live is not None and pane.live.deltas == 5)
        shown = pane.view.text()
        assert "\nred and [bold]not bold[/bold]\nxxx" in shown and "\x1b" not in shown
        assert pane.view.last_turn is not None
        assert pane.view.last_turn.answer.endswith("x" * 5000)  # nothing cut from the answer


async def test_a_theme_change_draws_the_transcript_again_in_its_colours() -> None:
    app = make_app(theme="mvp-dark")
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(PromptPane)
        app.dashboard.route(ready())
        await wait_until(pilot, lambda: pane.input.display)
        await answer(pilot, app, 1, "an answer")
        await wait_until(pilot, lambda: all(turn.formatted for turn in pane.view.turns))

        def question_colour() -> object:
            strip = pane.view.render_line(0)  # the question, as the compositor gets it
            return next(seg.style.color for seg in strip if seg.text.startswith(">"))

        dark = question_colour()
        app.theme = "mvp-light"
        await pilot.pause()
        await wait_until(pilot, lambda: question_colour() != dark)
        assert pane.view.render_line(0).text.startswith("> question 1")
