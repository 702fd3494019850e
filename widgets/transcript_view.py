"""The Prompt pane's transcript drawn as lines (Textual's line API), never laid out again
while an answer grows.

Each turn (question, answer, figures) and each note (the dropped-turns marker, a new
conversation's rule) is rendered once into strips at the view's width and kept; the answer
that streams keeps its finished lines and renders again only its last, open line. A token
therefore costs a repaint of this view's own region: its virtual height changes without a
layout pass (a layout reflows the whole dashboard, 3–8 ms at 160x48), except when the
content first overflows the view or stops overflowing it (the scrollbar comes or goes).

While an answer streams, each block it closes (a blank line outside a code fence) is drawn
as markdown once, and the open block as plain text; the whole answer is drawn as markdown
once its last token is on screen (`format_answers`: rendering it per batch would hold up the
tokens). Tokens faster than frames are drawn together (at most `FRAME_S` apart), and an
answer's end is drawn at once (`show_now`). Every text here is untrusted and cleaned by the
pane before it arrives; it is rendered as `Text` or as markdown, never as Rich markup.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from rich.console import RenderableType
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.timer import Timer

from mvp_tui.widgets.answer_text import settled_end, wrap_spans

NoteKind = Literal["marker", "rule"]
UNSIZED_WIDTH = 80
FRAME_S = 1 / 30  # an answer that streams repaints the view at most this often


@dataclass(eq=False)
class ShownTurn:
    """One question and its answer, as the transcript shows it."""

    question: str
    conversation: int = -1  # the pane's conversation number; -1: not a turn of one (the RPC's)
    answer: str = ""  # cleaned
    figures: str = ""
    fault: bool = False
    done: bool = False  # answered in full: the engine's conversation holds it
    ended: bool = False  # done, faulted or cancelled: nothing more streams into it
    formatted: bool = False  # the answer drawn as markdown (plain while it streams)
    dropped_before: int = 0


@dataclass(eq=False, slots=True)
class Note:
    """A line between turns: the dropped-turns marker or a new conversation's rule."""

    text: str
    kind: NoteKind


@dataclass(slots=True)
class _Drawn:
    """A turn's strips at the view's width; the streaming answer's finished lines apart
    from its open one, so that a batch renders only the open line again."""

    question: list[Strip] = field(default_factory=list)
    settled: list[Strip] = field(default_factory=list)  # the blocks closed so far, formatted
    settled_upto: int = 0  # answer chars drawn into `settled`
    answer: list[Strip] = field(default_factory=list)  # finished lines (or the whole answer)
    open_line: list[Strip] = field(default_factory=list)  # the open line's last wrapped line
    finished_upto: int = 0  # answer chars drawn into `answer` (up to a newline, or wrapped)
    seen: int = -1  # answer chars drawn in all (-1: none yet)
    figures: list[Strip] | None = None
    lines: list[Strip] | None = None  # all of the above, joined


class TranscriptView(ScrollView, can_focus=True):
    """The conversation's turns, the last one live, as cached lines."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "transcript--question",
        "transcript--figures",
        "transcript--fault",
        "transcript--marker",
        "transcript--rule",
    }
    DEFAULT_CSS = "TranscriptView { height: 1fr; overflow-x: hidden; overflow-y: auto; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.items: list[ShownTurn | Note] = []
        self._drawn: dict[int, _Drawn | list[Strip]] = {}  # by id() of the item
        self._width = 0
        self._lines: list[Strip] = []  # every item's lines but the last turn's
        self._lines_before: int = -1  # items drawn into _lines (-1: draw again)
        self._following = True  # at the end: it follows what is added
        self._base: Style | None = None  # the view's own style, under every line
        self._synced_at = 0.0  # when the lines and the height were last brought up to date
        self._sync_timer: Timer | None = None  # a paced sync, waiting

    # -- what the pane asks ----------------------------------------------------------------
    @property
    def turns(self) -> list[ShownTurn]:
        return [item for item in self.items if isinstance(item, ShownTurn)]

    @property
    def last_turn(self) -> ShownTurn | None:
        return self.items[-1] if self.items and isinstance(self.items[-1], ShownTurn) else None

    def add(self, item: ShownTurn | Note) -> None:
        """A turn or note after the rest (the last turn so far becomes an earlier one)."""
        self.items.append(item)
        self._changed(all_lines=True)

    def insert(self, index: int, item: ShownTurn | Note) -> None:
        self.items.insert(index, item)
        self._changed(all_lines=True)

    def drop(self, item: ShownTurn | Note) -> None:
        self.items.remove(item)
        self._drawn.pop(id(item), None)
        self._changed(all_lines=True)

    def append_answer(self, text: str, figures: str | None = None) -> None:
        """More of the last turn's answer (one call per batch of deltas), and its figures
        line as they stand after it: one redraw for both."""
        turn = self.last_turn
        if turn is None:
            return
        turn.answer += text
        if figures is not None and figures != turn.figures:
            self._new_figures(turn, figures, turn.fault)
        self._changed()

    def set_figures(self, text: str, *, fault: bool = False) -> None:
        """The last turn's figures line (live counts while it streams, the summary after)."""
        turn = self.last_turn
        if turn is None or (turn.figures == text and turn.fault == fault):
            return
        self._new_figures(turn, text, fault)
        self._changed()

    def _new_figures(self, turn: ShownTurn, text: str, fault: bool) -> None:
        turn.figures, turn.fault = text, fault
        drawn = self._drawn.get(id(turn))
        if isinstance(drawn, _Drawn):
            drawn.figures = drawn.lines = None

    def format_answers(self) -> None:
        """Every answered turn's answer drawn as markdown (after its last token is on
        screen)."""
        unformatted = [turn for turn in self.turns if turn.ended and not turn.formatted]
        for turn in unformatted:
            turn.formatted = True
            self._drawn.pop(id(turn), None)
        if unformatted:
            self._changed(all_lines=True)

    @property
    def up_to_date(self) -> bool:
        """Nothing waits for a paced repaint: the height and the lines shown are current."""
        return self._sync_timer is None

    def text(self) -> str:
        """What the view shows, line by line, as plain text (its whole height)."""
        self._draw()
        return "\n".join(strip.text.rstrip() for strip in self._all_lines())

    # -- drawing ---------------------------------------------------------------------------
    def show_now(self) -> None:
        """Draw what changed on the terminal now, not at the next paced or screen frame (an
        answer's end: its last tokens and figures are not held back up to 50 ms)."""
        if self._sync_timer is not None:
            self._sync()
        screen = self.screen
        # Textual draws only from its 60 Hz update timer, once a widget's refresh has
        # reached the screen as a message, and a tick that ran late skips the next (up to
        # 33 ms). Its private dirty set and tick handler are the one way to draw now;
        # without them (a Textual that renamed them), the next tick draws it.
        dirty = getattr(screen, "_dirty_widgets", None)
        tick = getattr(screen, "_on_timer_update", None)
        if isinstance(dirty, set) and callable(tick) and screen.is_current:
            dirty.add(self)
            tick()

    def _changed(self, *, all_lines: bool = False) -> None:
        if all_lines:
            self._lines_before = -1
        if not self.is_mounted or not self.size.width:
            return  # drawn at the first render, once the width is known
        wait = self._synced_at + FRAME_S - time.monotonic()
        if all_lines or wait <= 0:
            self._sync()
        elif self._sync_timer is None:  # tokens faster than frames: one repaint for them all
            self._sync_timer = self.set_timer(wait, self._sync, name="transcript frame")

    def _sync(self) -> None:
        if self._sync_timer is not None:
            self._sync_timer.stop()
            self._sync_timer = None
        self._synced_at = time.monotonic()
        self._draw()
        self._resize()

    def notify_style_update(self) -> None:
        """A theme or CSS change: every line is drawn again in the new styles."""
        super().notify_style_update()
        self._drawn.clear()
        self._lines_before = -1
        self._base = None

    def on_resize(self) -> None:
        self._draw()
        self._resize()
        self._follow()

    def _draw(self) -> None:
        # Not laid out yet (asked for its text before its first frame): the last width
        # known, or a terminal's usual one; drawn again at its own once it has one.
        width = self.scrollable_content_region.width or self._width or UNSIZED_WIDTH
        if width != self._width:
            self._width = width
            self._drawn.clear()
            self._lines_before = -1
        if self._lines_before == -1:
            last = len(self.items) - 1 if self.last_turn is not None else len(self.items)
            lines: list[Strip] = []
            for item in self.items[:last]:
                lines.extend(self._item_lines(item))
                lines.append(Strip.blank(width))  # a turn's or note's margin below it
            self._lines, self._lines_before = lines, last

    def _all_lines(self) -> list[Strip]:
        turn = self.last_turn
        if turn is None:
            return self._lines
        return self._lines + self._item_lines(turn)

    def _item_lines(self, item: ShownTurn | Note) -> list[Strip]:
        drawn = self._drawn.get(id(item))
        if isinstance(item, Note):
            if not isinstance(drawn, list):
                style = "transcript--marker" if item.kind == "marker" else "transcript--rule"
                drawn = self._lines_of(Text(item.text, style=self._style(style)))
                self._drawn[id(item)] = drawn
            return drawn
        if not isinstance(drawn, _Drawn):
            drawn = _Drawn(question=self._lines_of(
                Text("> " + item.question, style=self._style("transcript--question"))))
            self._drawn[id(item)] = drawn
        if drawn.seen != len(item.answer):
            self._draw_answer(item, drawn)
            drawn.lines = None
        if drawn.figures is None:
            style = "transcript--fault" if item.fault else "transcript--figures"
            drawn.figures = (self._lines_of(Text(item.figures, style=self._style(style)))
                             if item.figures else [])
            drawn.lines = None
        if drawn.lines is None:
            gap = [Strip.blank(0)] if drawn.settled and (drawn.answer or drawn.open_line) else []
            drawn.lines = (drawn.question + drawn.settled + gap + drawn.answer + drawn.open_line
                           + drawn.figures)
        return drawn.lines

    def _draw_answer(self, turn: ShownTurn, drawn: _Drawn) -> None:
        drawn.seen = len(turn.answer)
        if turn.formatted:
            from rich.markdown import Markdown  # markdown-it: loaded after the first paint

            drawn.answer = self._lines_of(Markdown(turn.answer, hyperlinks=False))
            drawn.open_line, drawn.finished_upto = [], len(turn.answer)
            return
        # While it streams, the blocks it closed (a blank line outside a code fence) are drawn
        # as markdown once each, and the open block as plain text.
        settled = settled_end(turn.answer, drawn.settled_upto)
        if settled > drawn.settled_upto:
            from rich.markdown import Markdown

            if drawn.settled:
                drawn.settled.append(Strip.blank(0))
            block = turn.answer[drawn.settled_upto:settled].strip("\n")
            drawn.settled += self._lines_of(Markdown(block, hyperlinks=False))
            drawn.settled_upto = drawn.finished_upto = settled
            drawn.answer, drawn.open_line = [], []
        # The open block, plain. A greedy wrap never moves a line break once the text after
        # it overflowed the width, so every wrapped line but the last is drawn once: a batch
        # wraps again only the last line and what came after it (a whole answer on one
        # physical line wrapped again per batch took 120 ms of 4,000 tokens).
        while True:
            newline = turn.answer.find("\n", drawn.finished_upto)
            end = len(turn.answer) if newline == -1 else newline
            lines = self._wrap(turn.answer, drawn.finished_upto, end)
            if newline != -1:  # a finished line: drawn whole, once
                drawn.answer += [strip for _, strip in lines] or [Strip.blank(0)]
                drawn.finished_upto = newline + 1
                continue
            last_start = lines[-1][0] if lines else None
            if last_start is not None and len(lines) > 1:
                drawn.answer += [strip for _, strip in lines[:-1]]
                drawn.finished_upto = last_start
                lines = lines[-1:]
            drawn.open_line = [strip for _, strip in lines]
            return

    def _wrap(self, text: str, start: int, end: int) -> list[tuple[int | None, Strip]]:
        """`text[start:end]` (no newline in it) wrapped at the view's width: each line with
        where it starts in `text` (None: not known, for text that is not plain ASCII)."""
        width = max(self._width, 1)
        chunk = text[start:end]
        if chunk.isascii() and chunk.isprintable():  # one cell a character: wrapped here
            return [(start + a, Strip([Segment(chunk[a:b].rstrip())], len(chunk[a:b].rstrip())))
                    for a, b in wrap_spans(chunk, width)]
        lines = list(Text(chunk).wrap(self.app.console, width))
        starts: list[int | None] = [None] * len(lines)
        if lines and chunk.endswith(lines[-1].plain):
            starts[-1] = end - len(lines[-1].plain)
        return [(at, self._strip(line)) for at, line in zip(starts, lines, strict=True)]

    def _strip(self, line: Text) -> Strip:
        console = self.app.console
        strip = Strip(list(line.render(console)), line.cell_len)
        # `Text.render` leaves the text's own style to its console path: applied here.
        return strip.apply_style(console.get_style(line.style)) if line.style else strip

    def _style(self, component: str) -> Style:
        return self.get_component_rich_style(component)  # alpha colours blended

    def _lines_of(self, renderable: RenderableType) -> list[Strip]:
        if isinstance(renderable, Text):  # Rich's wrap straight, not the console's whole path
            return [self._strip(line) for line in renderable.wrap(
                self.app.console, max(self._width, 1))] or [Strip.blank(0)]
        width = max(self._width, 1)
        console = self.app.console
        options = console.options.update_width(width).update(highlight=False)
        lines = console.render_lines(renderable, options, pad=False)
        return [Strip(line, Segment.get_line_length(line)) for line in lines] or [
            Strip.blank(0)
        ]

    def _resize(self) -> None:
        """The new height set without a layout pass unless the scrollbar comes or goes; the
        view follows the end when it was at the end."""
        height = len(self._lines) + (
            len(self._item_lines(self.last_turn)) if self.last_turn is not None else 0
        )
        new = Size(self._width, height)
        old = self.virtual_size
        if new == old:
            self.refresh()
            return
        viewport = self.scrollable_content_region.height
        if (old.height > viewport) != (new.height > viewport) or old.width != new.width:
            self.virtual_size = new  # the scrollbar comes or goes: a layout, once
        else:
            self.set_reactive(ScrollView.virtual_size, new)
            if self.show_vertical_scrollbar:
                self.vertical_scrollbar.window_virtual_size = new.height
        self._follow()
        self.refresh()

    def _follow(self) -> None:
        """At the end while the reader is (forced: the scrollbar that allows a scroll may
        not be up yet when the content first overflows)."""
        if self._following and self.scroll_y != self.max_scroll_y:
            self.scroll_to(y=self.max_scroll_y, animate=False, force=True)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self._following = new_value >= self.max_scroll_y  # scrolled up: left where it is

    def render_line(self, y: int) -> Strip:
        self._draw()
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        if index < len(self._lines):
            line = self._lines[index]
        else:
            live = self._item_lines(self.last_turn) if self.last_turn is not None else []
            index -= len(self._lines)
            line = live[index] if index < len(live) else Strip.blank(width)
        if self._base is None:  # Textual works it out from every ancestor on each ask
            self._base = self.rich_style
        return line.crop_extend(scroll_x, scroll_x + width, None).apply_style(self._base)
