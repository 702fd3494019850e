"""The Prompt pane: a conversation's transcript, the answer streamed as markdown, live figures.

The engine port posts this pane its facts (`widgets/facts.py`): `NodeServing` opens the box
(only then: the prompt queue exists from there on), `PromptStep`s tell each prompt's life,
and `TokensPending` notices coalesce, each taking every delta waiting. The app hands back
the id the queue gave a submitted text (`asked`): answers are keyed by that id, so a text
the engine refused leaves nothing behind. Deltas are gathered and appended to the
answer's Markdown by one pump task, as Textual's `MarkdownStream` would (never re-rendering
the whole answer, coalescing when tokens come faster than the screen), which also knows
when an ended answer is all drawn; the answer's scroll is anchored to the bottom. Answer
text is untrusted: cleaned by `safe_answer`, rendered as markdown with link opening off,
never as Rich markup. No full collection of Python's cycle collector runs while an answer
streams (`widgets/collector.py`).

The transcript: the turn on screen (question, streamed answer, figures) is the live one;
when the next starts, it is frozen above as plain widgets (rendered once) and only the last
`TURNS_SHOWN` stay in the widget tree; every turn stays in the `TranscriptLog` that ctrl+s
saves. A marker sits where the engine's request stopped carrying earlier turns (the
context was full); ctrl+n starts a new conversation; `y` (in the transcript: Esc from the
box) copies the last answer.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, assert_never

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Input, Static

from mvp_tui.engine.endpoint_words import slots_words
from mvp_tui.engine.events import EndpointReady, NodeReady
from mvp_tui.prompt.display import safe_answer, summary
from mvp_tui.prompt.events import (
    PromptCancelled,
    PromptDone,
    PromptFault,
    PromptQueued,
    PromptRpcListening,
    PromptSource,
    PromptStarted,
    TextDelta,
)
from mvp_tui.prompt.history import PromptHistory
from mvp_tui.prompt.transcript import SavedTurn, TranscriptLog
from mvp_tui.ssh.events import PortForwarded
from mvp_tui.untrusted import clean_line, one_line_ascii
from mvp_tui.widgets.collector import hold_full_collections, resume_full_collections
from mvp_tui.widgets.facts import NodeServing, PromptStep, TokensPending
from mvp_tui.widgets.pane import Pane
from mvp_tui.widgets.released import release_removed_widgets
from mvp_tui.widgets.sparkline import sparkline

if TYPE_CHECKING:  # markdown-it and pygments load after the first paint (see on_mount)
    from textual.widgets import Markdown

    from mvp_tui.engine.ui_port import PromptEvent

QUESTION_CHARS = 400
RATES_KEPT = 12  # prompts in the tok/s sparkline
AFTER_DRAWN_S = 0.05  # the last frame's bytes written before the after-answer work
TURNS_SHOWN = 8  # earlier turns kept in the widget tree (all stay in the saved transcript)


class PromptInput(Input):
    """The prompt box; Up/Down walk the history like a shell."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "older", "older prompt", show=False, id="prompt-history-older"),
        Binding("down", "newer", "newer prompt", show=False, id="prompt-history-newer"),
    ]

    def __init__(self, history: PromptHistory, *, id: str | None = None) -> None:
        super().__init__(
            placeholder="ask the model…  (Enter sends, Up/Down history, Esc cancels)", id=id
        )
        self.history = history

    def action_older(self) -> None:
        text = self.history.older(self.value)
        if text is not None:
            self.value = text
            self.cursor_position = len(text)

    def action_newer(self) -> None:
        text = self.history.newer()
        if text is not None:
            self.value = text
            self.cursor_position = len(text)


@dataclass(slots=True)
class _Live:
    """The prompt on screen while it streams."""

    prompt_id: int
    started_at: float
    first_at: float | None = None
    last_at: float | None = None
    deltas: int = 0


@dataclass(slots=True)
class _Shown:
    """The last turn, as the live widgets show it (frozen above when the next starts)."""

    question: str
    conversation: int  # the pane's conversation number; -1: not a turn of one (the RPC's)
    parts: list[str]  # the answer so far, cleaned
    figures: str = ""
    fault: bool = False
    done: bool = False  # answered in full: the engine's conversation holds it
    dropped_before: int = 0
    frozen: Vertical | None = None  # its frozen copy, built (hidden) once it was answered


class PromptPane(Pane):
    """Ask the served model; `PromptSubmitted` / `PromptCancelRequested` go to the app."""

    TITLE = "Prompt"
    EMPTY_TEXT = (
        "Tokens stream here from the model served on the node, with tok/s and TTFT. Lease"
        " a node first (Enter on an offer); the prompt box opens when the engine is "
        "ready."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel_prompt", "cancel", id="prompt-cancel"),
        # Nothing to cancel: Esc leaves the box, so the dashboard's own keys (q, ?) work again.
        Binding("escape", "leave_box", "leave", show=False, id="prompt-leave"),
        Binding("ctrl+n", "new_conversation", "new chat", id="prompt-new"),
        Binding("ctrl+s", "save_transcript", "save chat", show=False, id="prompt-save"),
        Binding("y", "copy_answer", "copy answer", show=False, id="prompt-copy"),
    ]

    class PromptSubmitted(Message):
        """Send this prompt to the model (the app hands its id back through `asked`)."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    class PromptCancelRequested(Message):
        """Cancel the prompt that is streaming (the engine decides which one)."""

    class LeaveRequested(Message):
        """Esc with nothing streaming: the app moves the focus out of the prompt box."""

    class NewConversationRequested(Message):
        """ctrl+n: the engine's next pane prompt starts a conversation (sends no turn)."""

    class SaveRequested(Message):
        """ctrl+s: the app writes the transcript into the run's directory."""

        def __init__(self, transcript: TranscriptLog) -> None:
            super().__init__()
            self.transcript = transcript

    def __init__(self, *, id: str | None = "prompt-pane") -> None:
        super().__init__(id=id)
        self.history = PromptHistory()
        self.ready = False
        self.model_name = ""
        self.openai_endpoint = ""
        self.endpoint_note = "OpenAI"  # how the endpoint is reached: with the run's key, or not
        self.rpc_endpoint = ""
        self.live: _Live | None = None
        self.waiting: set[int] = set()
        self._questions: dict[int, str] = {}  # by the queue's prompt id
        self._pending: list[str] = []
        self._reset = False
        self._drain = False  # the live answer ended: the pump ends its stream once written
        self._wake = asyncio.Event()
        self._markdown_mounted = False
        self.rates: deque[float] = deque(maxlen=RATES_KEPT)  # tok/s of the last prompts
        self.token_batches = 0  # coalesced token notices taken (each one batch of deltas)
        self.transcript = TranscriptLog()
        self.conversation = 0  # bumped by ctrl+n
        self._shown: _Shown | None = None
        self._dropped_marker: Static | None = None
        self._pane_ids: set[int] = set()  # queued from this pane: turns of its conversation
        self._rule_pending = False  # ctrl+n while a turn streamed: the rule goes after it
        self._unformatted: list[tuple[Static, str]] = []  # frozen answers, still plain text

    def compose_content(self) -> ComposeResult:
        with VerticalScroll(id="prompt-answer"):  # the transcript; its Markdown: _ensure_markdown
            yield Vertical(id="prompt-earlier")
            yield Static(id="prompt-question")
            yield Static(id="prompt-stats")
        yield PromptInput(self.history, id="prompt-input")

    def on_mount(self) -> None:
        for selector in ("#prompt-question", "#prompt-answer", "#prompt-stats", "#prompt-input"):
            self.query_one(selector).display = False
        self.query_one("#prompt-answer", VerticalScroll).anchor()

    def _ensure_markdown(self) -> None:
        """Mount the answer's Markdown (and start its pump) once, when the prompt box opens:
        Textual's Markdown imports markdown-it and pygments (~70 ms), not needed to paint."""
        if self._markdown_mounted:
            return
        self._markdown_mounted = True
        from textual.widgets import Markdown

        markdown = Markdown(id="prompt-markdown", open_links=False)
        mounted = self.query_one("#prompt-answer", VerticalScroll).mount(
            markdown, after="#prompt-question"
        )
        self.run_worker(self._pump(markdown, mounted), group="prompt-stream", name="markdown pump")

    def on_unmount(self) -> None:
        resume_full_collections()  # gone mid-answer: the collector is not left held

    @property
    def input(self) -> PromptInput:
        return self.query_one(PromptInput)

    def focus_target(self) -> Widget | None:
        return self.input

    # -- the API the app uses ------------------------------------------------------------
    def set_ready(self, model_name: str | None = None) -> None:
        """Open the prompt box (the engine answers); optionally name the model."""
        if model_name:
            self.model_name = clean_line(model_name, 60)
        self.ready = True
        self._ensure_markdown()
        self.set_empty(False)
        self.input.display = True
        self._update_subtitle()

    def asked(self, prompt_id: int, text: str) -> None:
        """The queue took this text as `prompt_id` (the app says so as it submits)."""
        self._questions[prompt_id] = text

    # -- the engine port's facts ---------------------------------------------------------
    @on(NodeServing)
    def _serving(self, message: NodeServing) -> None:
        self.handle_event(message.event)
        self.set_ready(message.event.model_id)

    @on(PromptStep)
    def _step(self, message: PromptStep) -> None:
        self.handle_event(message.event)

    @on(TokensPending)
    def _tokens(self, message: TokensPending) -> None:
        self.token_batches += 1
        taken = False
        for delta in message.take(message.prompt_id):
            taken = self._delta(delta) or taken
        if taken:
            self._show_stats()  # once a batch, not once a token

    def handle_event(self, event: PromptEvent | TextDelta | NodeReady) -> None:
        if isinstance(event, TextDelta):
            if self._delta(event):
                self._show_stats()
        elif isinstance(event, PromptQueued):
            self._queued(event)
        elif isinstance(event, PromptStarted):
            self._started(event)
        elif isinstance(event, PromptDone | PromptFault | PromptCancelled):
            self._ended(event)
        elif isinstance(event, NodeReady):
            self.openai_endpoint = clean_line(event.local_url.removeprefix("http://"), 64)
            self._update_subtitle()
        elif isinstance(event, EndpointReady):
            self.openai_endpoint = clean_line(event.base_url.removeprefix("http://"), 64)
            self.endpoint_note = "OpenAI, key: y" if event.auth == "key" else "OpenAI, NO KEY"
            if slots_words(event.slots):
                self.endpoint_note += ", " + slots_words(event.slots)
            self._update_subtitle()
        elif isinstance(event, PortForwarded):
            self.openai_endpoint = f"127.0.0.1:{event.local_port}"
            self._update_subtitle()
        elif isinstance(event, PromptRpcListening):
            self.rpc_endpoint = f"{clean_line(event.host, 64)}:{event.port}"
            self._update_subtitle()
        else:  # the port's union for this pane, every kind handled (mypy holds it)
            assert_never(event)

    # -- prompt life ---------------------------------------------------------------------
    def _queued(self, event: PromptQueued) -> None:
        if event.prompt_id not in self._questions or event.source is not PromptSource.PANE:
            via = " via the prompt RPC" if event.source is PromptSource.RPC else ""
            self._questions[event.prompt_id] = f"(a {event.text_chars}-char prompt{via})"
        if event.source is PromptSource.PANE:
            self._pane_ids.add(event.prompt_id)
        self.waiting.add(event.prompt_id)
        self._show_stats()

    def _started(self, event: PromptStarted) -> None:
        self.waiting.discard(event.prompt_id)
        self.live = _Live(event.prompt_id, event.at)
        hold_full_collections()  # until this answer is drawn (_after_answer)
        question = self._questions.get(event.prompt_id, f"prompt {event.prompt_id}")
        self._freeze_shown()
        # Only the pane's own prompts are turns of its conversation (the RPC's stand alone).
        pane_turn = event.prompt_id in self._pane_ids
        self._pane_ids.discard(event.prompt_id)
        self._shown = _Shown(question, self.conversation if pane_turn else -1, [],
                             dropped_before=event.turns_dropped)
        if event.turns_dropped:
            self._mark_dropped(event.turns_sent, event.turns_dropped)
        self._show_question(question)
        self._reset, self._pending = True, []
        self._ensure_markdown()
        self._wake.set()
        self.query_one("#prompt-answer").display = True
        self.query_one("#prompt-stats", Static).set_class(False, "-fault")
        self._show_stats()

    def _delta(self, event: TextDelta) -> bool:
        """Take one delta of the live answer (False: not the live prompt's)."""
        live = self.live
        if live is None or event.prompt_id != live.prompt_id:
            return False
        live.deltas += 1
        live.first_at = live.first_at if live.first_at is not None else event.at
        live.last_at = event.at
        text = safe_answer(event.text)
        self._pending.append(text)
        if self._shown is not None:
            self._shown.parts.append(text)
        self._wake.set()
        return True

    def _ended(self, event: PromptDone | PromptFault | PromptCancelled) -> None:
        release_removed_widgets(self.app)  # the last answer's and turns' widgets left the tree
        self.waiting.discard(event.prompt_id)
        self._questions.pop(event.prompt_id, None)
        self._pane_ids.discard(event.prompt_id)
        stats = self.query_one("#prompt-stats", Static)
        current = self.live is not None and self.live.prompt_id == event.prompt_id
        if not current:
            self._show_stats()
            return
        self.live = None
        if isinstance(event, PromptDone):
            stats.set_class(False, "-fault")
            self.rates.append(event.tokens_per_s)
            trend = f" · tok/s {sparkline(list(self.rates))}" if len(self.rates) > 1 else ""
            figures = summary(event)
            stats.update(Text(figures + trend + self._queue_note()))
        elif isinstance(event, PromptFault):
            stats.set_class(True, "-fault")
            figures = _fault_text(event)
            stats.update(Text(figures + self._queue_note()))
        else:
            stats.set_class(False, "-fault")
            figures = "cancelled"
            stats.update(Text(figures + self._queue_note()))
        stats.display = True
        self._drain = True  # the pump calls _after_answer once its last token is drawn
        self._wake.set()
        shown = self._shown
        if shown is not None:
            shown.figures, shown.fault = figures, isinstance(event, PromptFault)
            shown.done = isinstance(event, PromptDone)
            self.transcript.add(SavedTurn(shown.question, "".join(shown.parts), figures,
                                          shown.dropped_before))

    def _queue_note(self) -> str:
        return f" · {len(self.waiting)} waiting" if self.waiting else ""

    def _show_question(self, question: str) -> None:
        widget = self.query_one("#prompt-question", Static)
        widget.update(Text("> " + one_line_ascii(question, QUESTION_CHARS)))
        widget.display = True

    def _show_stats(self) -> None:
        stats = self.query_one("#prompt-stats", Static)
        live = self.live
        if live is None:
            if self.waiting:
                stats.update(Text(f"{len(self.waiting)} waiting"))
                stats.display = True
            return
        parts = [f"{live.deltas} tok"]
        if live.first_at is not None and live.last_at is not None and live.deltas > 1:
            span = live.last_at - live.first_at
            if span > 0:
                parts.append(f"{(live.deltas - 1) / span:,.0f} tok/s")
        if live.first_at is not None:
            parts.append(f"TTFT {(live.first_at - live.started_at) * 1000:.0f} ms")
        else:
            parts.append("waiting for the first token")
        # Once a batch while the answer grows: one row, repainted without a layout pass.
        stats.update(Text(" · ".join(parts) + self._queue_note()), layout=not stats.display)
        stats.display = True

    # -- the transcript ------------------------------------------------------------------
    def _freeze_shown(self) -> None:
        """The last turn leaves the live widgets for plain ones above, rendered once; the
        oldest leave the widget tree (the saved transcript keeps them)."""
        shown, self._shown = self._shown, None
        if shown is None:
            return
        earlier = self.query_one("#prompt-earlier", Vertical)
        turn = shown.frozen
        if turn is not None and turn.is_attached:  # built while idle: shown, not mounted
            turn.set_classes("turn")
            turn.display = True
        else:
            if turn is not None:
                turn.remove()
            turn = self._turn_widget(shown, formatted=False)
            earlier.mount(turn)
        # The marker counts the turns the engine's conversation holds: those answered in full.
        turn.conversation = shown.conversation if shown.done else -1  # type: ignore[attr-defined]
        if self._rule_pending:
            self._rule_pending = False
            earlier.mount(Static(Text("── a new conversation ──"), classes="turn-rule"))
        self._trim_earlier()

    def _turn_widget(self, shown: _Shown, *, formatted: bool) -> Vertical:
        """A frozen turn; its answer as markdown (`formatted`) or, while an answer streams,
        as plain text until `_format_frozen` (rendering a long answer's markdown then would
        hold up the streaming answer's tokens)."""
        text = "".join(shown.parts)
        if formatted:
            from rich.markdown import Markdown as RichMarkdown  # loaded with the live Markdown

            answer = Static(RichMarkdown(text, hyperlinks=False), classes="turn-answer")
        else:
            answer = Static(Text(text), classes="turn-answer")
            self._unformatted.append((answer, text))
            del self._unformatted[:-TURNS_SHOWN]  # the older ones leave the tree
        return Vertical(
            Static(Text("> " + one_line_ascii(shown.question, QUESTION_CHARS)),
                   classes="turn-question"),
            answer,
            Static(Text(shown.figures), classes="turn-figures -fault" if shown.fault
                   else "turn-figures"),
            classes="turn",
        )

    def _after_answer(self) -> None:
        """Once an answer's last token is drawn and none streams: the frozen answers as
        markdown, and the last turn's frozen copy built, hidden, for the next start (mounting
        it then would hold up the next answer's first tokens)."""
        if self.live is not None:
            return  # the next end does it
        resume_full_collections()
        self._format_frozen()
        shown = self._shown
        if shown is None or shown.frozen is not None:
            return
        turn = self._turn_widget(shown, formatted=True)
        turn.set_classes("turn-next")
        turn.display = False
        shown.frozen = turn
        self.query_one("#prompt-earlier", Vertical).mount(turn)

    def _format_frozen(self) -> None:
        """The frozen answers as markdown, rendered once, while no answer streams."""
        if self.live is not None:
            return  # the next end does it
        from rich.markdown import Markdown as RichMarkdown  # loaded with the live Markdown

        for answer, text in self._unformatted:
            if answer.is_attached:  # not trimmed away meanwhile
                answer.update(RichMarkdown(text, hyperlinks=False))
        self._unformatted.clear()

    def _trim_earlier(self) -> None:
        """At most `TURNS_SHOWN` turns in the tree, and no rule or marker left above them."""
        earlier = self.query_one("#prompt-earlier", Vertical)
        turns = [child for child in earlier.children if child.has_class("turn")]
        if len(turns) <= TURNS_SHOWN:
            return
        first_kept = turns[len(turns) - TURNS_SHOWN]
        for child in list(earlier.children):
            if child is first_kept:
                break
            if child is self._dropped_marker:  # what it marks is off screen: it stays on top
                continue
            child.remove()

    def _mark_dropped(self, sent: int, dropped: int) -> None:
        """The marker, just above the oldest turn the request still carried."""
        earlier = self.query_one("#prompt-earlier", Vertical)
        ours = [child for child in earlier.children
                if child.has_class("turn") and getattr(child, "conversation", -1)
                == self.conversation]
        text = Text(f"✂ {dropped} earlier turn{'s' if dropped != 1 else ''} not sent: "
                    "the conversation is past [model] max_context")
        if self._dropped_marker is not None:
            self._dropped_marker.remove()
        marker = Static(text, classes="turn-dropped")
        self._dropped_marker = marker
        if sent and len(ours) >= sent:
            earlier.mount(marker, before=ours[len(ours) - sent])
        elif sent:  # the oldest sent is off screen already: so is what was dropped
            earlier.mount(marker, before=0) if earlier.children else earlier.mount(marker)
        else:
            earlier.mount(marker)

    def _update_subtitle(self) -> None:
        parts = [self.model_name] if self.model_name else []
        if self.openai_endpoint:
            parts.append(f"also on {self.openai_endpoint} ({self.endpoint_note})")
        if self.rpc_endpoint:
            parts.append(f"rpc {self.rpc_endpoint}")
        self.border_subtitle = Text(" · ".join(parts))

    async def _pump(self, markdown: Markdown, mounted: Awaitable[None]) -> None:
        """Append the gathered deltas to the answer's markdown, as `MarkdownStream` does:
        what arrives while one append runs goes in the next, joined. Once an ended answer is
        all in, `_after_answer` runs after the frame that draws its last token."""
        await mounted
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._reset:
                self._reset = False
                await markdown.update("")
            while self._pending and not self._reset:  # a new answer: reset first
                text, self._pending = "".join(self._pending), []
                await markdown.append(text)
            if self._drain and not self._reset:
                self._drain = False
                # After the frame that draws the last token, and a moment more: the driver's
                # writer thread puts that frame on the terminal, which the collector's walk
                # (it holds the interpreter) and the frozen copy's render would hold up.
                self.call_after_refresh(self.set_timer, AFTER_DRAWN_S, self._after_answer)

    # -- keys ----------------------------------------------------------------------------
    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "prompt-input":
            return
        event.stop()
        text = event.value.strip()
        if not text:
            return
        self.history.add(text)
        self.input.value = ""
        self.post_message(self.PromptSubmitted(text))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        busy = self.live is not None or bool(self.waiting)
        if action == "cancel_prompt":
            return True if busy else None
        if action == "leave_box":
            return not busy
        return True

    def action_cancel_prompt(self) -> None:
        self.post_message(self.PromptCancelRequested())

    def action_leave_box(self) -> None:
        """Esc, nothing streaming: from the box to the transcript (where `y` copies and the
        arrows scroll), when there is one; from there (or with none) out of the pane."""
        transcript = self.query_one("#prompt-answer", VerticalScroll)
        if self.input.has_focus and transcript.display and self._shown is not None:
            transcript.focus()
            return
        self.post_message(self.LeaveRequested())

    def action_new_conversation(self) -> None:
        self.conversation += 1
        self.transcript.new_conversation()
        self._dropped_marker = None  # the next conversation's marker is its own
        self.post_message(self.NewConversationRequested())
        if self.live is not None:
            self._rule_pending = True
            return
        if self._shown is None:
            return
        self._rule_pending = True
        self._freeze_shown()
        self.call_after_refresh(self._format_frozen)
        for selector in ("#prompt-question", "#prompt-stats"):
            self.query_one(selector).display = False
        self._reset, self._pending = True, []
        self._wake.set()

    def action_save_transcript(self) -> None:
        if not len(self.transcript):
            self.app.notify("nothing to save yet: no answer", severity="warning", markup=False)
            return
        self.post_message(self.SaveRequested(self.transcript))

    def action_copy_answer(self) -> None:
        answer = self.transcript.last_answer
        if answer is None:
            self.app.notify("no answer to copy yet", severity="warning", markup=False)
            return
        self.app.copy_to_clipboard(answer)
        self.app.notify(f"the last answer copied ({len(answer):,} chars)", markup=False)


def _fault_text(event: PromptFault) -> str:
    what = one_line_ascii(event.code, 60) if event.code else event.fault_kind.value
    status = f" ({event.http_status})" if event.http_status is not None else ""
    text = f"✗ {what}{status}: {one_line_ascii(event.error, 200)}"
    if event.fix:
        text += f" — fix: {one_line_ascii(event.fix, 120)}"
    return text
