"""The Prompt pane: an input with history, the answer streamed as markdown, live figures.

The engine port posts this pane its facts (`widgets/facts.py`): `NodeServing` opens the box
(only then: the prompt queue exists from there on), `PromptStep`s tell each prompt's life,
and `TokensPending` notices coalesce, each taking every delta waiting. The app hands back
the id the queue gave a submitted text (`asked`): answers are keyed by that id, so a text
the engine refused leaves nothing behind. Deltas are gathered and handed to
Textual's `MarkdownStream` by one pump task, which appends (never re-renders the whole
answer) and coalesces when tokens come faster than the screen; the answer's scroll is
anchored to the bottom. Answer text is untrusted: cleaned by `safe_answer`, rendered as
markdown with link opening off, never as Rich markup.
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
from textual.containers import VerticalScroll
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
from mvp_tui.ssh.events import PortForwarded
from mvp_tui.untrusted import clean_line, one_line_ascii
from mvp_tui.widgets.facts import NodeServing, PromptStep, TokensPending
from mvp_tui.widgets.pane import Pane
from mvp_tui.widgets.sparkline import sparkline

if TYPE_CHECKING:  # markdown-it and pygments load after the first paint (see on_mount)
    from textual.widgets import Markdown
    from textual.widgets.markdown import MarkdownStream

    from mvp_tui.engine.ui_port import PromptEvent

QUESTION_CHARS = 400
RATES_KEPT = 12  # prompts in the tok/s sparkline


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
        self._wake = asyncio.Event()
        self._stream: MarkdownStream | None = None
        self._markdown_mounted = False
        self.rates: deque[float] = deque(maxlen=RATES_KEPT)  # tok/s of the last prompts
        self.token_batches = 0  # coalesced token notices taken (each one batch of deltas)

    def compose_content(self) -> ComposeResult:
        yield Static(id="prompt-question")
        yield VerticalScroll(id="prompt-answer")  # its Markdown: see _ensure_markdown
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
        mounted = self.query_one("#prompt-answer", VerticalScroll).mount(markdown)
        self.run_worker(self._pump(markdown, mounted), group="prompt-stream", name="markdown pump")

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
        for delta in message.take(message.prompt_id):
            self._delta(delta)

    def handle_event(self, event: PromptEvent | TextDelta | NodeReady) -> None:
        if isinstance(event, TextDelta):
            self._delta(event)
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
        self.waiting.add(event.prompt_id)
        self._show_stats()

    def _started(self, event: PromptStarted) -> None:
        self.waiting.discard(event.prompt_id)
        self.live = _Live(event.prompt_id, event.at)
        question = self._questions.get(event.prompt_id, f"prompt {event.prompt_id}")
        self._show_question(question)
        self._reset, self._pending = True, []
        self._ensure_markdown()
        self._wake.set()
        self.query_one("#prompt-answer").display = True
        self.query_one("#prompt-stats", Static).set_class(False, "-fault")
        self._show_stats()

    def _delta(self, event: TextDelta) -> None:
        live = self.live
        if live is None or event.prompt_id != live.prompt_id:
            return
        live.deltas += 1
        live.first_at = live.first_at if live.first_at is not None else event.at
        live.last_at = event.at
        self._pending.append(safe_answer(event.text))
        self._wake.set()
        if live.deltas % 8 == 1:
            self._show_stats()

    def _ended(self, event: PromptDone | PromptFault | PromptCancelled) -> None:
        self.waiting.discard(event.prompt_id)
        self._questions.pop(event.prompt_id, None)
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
            stats.update(Text(summary(event) + trend + self._queue_note()))
        elif isinstance(event, PromptFault):
            stats.set_class(True, "-fault")
            stats.update(Text(_fault_text(event) + self._queue_note()))
        else:
            stats.set_class(False, "-fault")
            stats.update(Text("cancelled" + self._queue_note()))
        stats.display = True

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
        stats.update(Text(" · ".join(parts) + self._queue_note()))
        stats.display = True

    def _update_subtitle(self) -> None:
        parts = [self.model_name] if self.model_name else []
        if self.openai_endpoint:
            parts.append(f"also on {self.openai_endpoint} ({self.endpoint_note})")
        if self.rpc_endpoint:
            parts.append(f"rpc {self.rpc_endpoint}")
        self.border_subtitle = Text(" · ".join(parts))

    async def _pump(self, markdown: Markdown, mounted: Awaitable[None]) -> None:
        """Hand gathered deltas to the markdown stream; restart it for each new prompt."""
        await mounted
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._reset:
                self._reset = False
                if self._stream is not None:
                    await self._stream.stop()
                await markdown.update("")
                self._stream = type(markdown).get_stream(markdown)
            if self._pending and self._stream is not None:
                text, self._pending = "".join(self._pending), []
                await self._stream.write(text)

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
        self.post_message(self.LeaveRequested())


def _fault_text(event: PromptFault) -> str:
    what = one_line_ascii(event.code, 60) if event.code else event.fault_kind.value
    status = f" ({event.http_status})" if event.http_status is not None else ""
    text = f"✗ {what}{status}: {one_line_ascii(event.error, 200)}"
    if event.fix:
        text += f" — fix: {one_line_ascii(event.fix, 120)}"
    return text
