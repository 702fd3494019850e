"""The Prompt pane: a conversation's transcript, the answer streamed as it comes, live figures.

The engine port posts this pane its facts (`widgets/facts.py`): `NodeServing` opens the box
(only then: the prompt queue exists from there on), `PromptStep`s tell each prompt's life,
and `TokensPending` notices coalesce, each taking every delta waiting: one batch goes into
the transcript as one append, and the figures line is written once a batch. The app hands
back the id the queue gave a submitted text (`asked`): answers are keyed by that id, so a
text the engine refused leaves nothing behind. Answer text is untrusted: cleaned by
`clean_lines` (no line cut: the view wraps it), drawn as plain text while it streams and as
markdown (link opening off) once its last token is drawn, never as Rich markup. No full
collection of Python's cycle collector runs while an answer streams (`widgets/collector.py`).

The transcript (`widgets/transcript_view.py`) draws its turns as lines: a growing answer
repaints the view's own region and never lays the dashboard out again. Only the last
`TURNS_SHOWN` earlier turns stay in it; every turn stays in the `TranscriptLog` that ctrl+s
saves. A marker sits where the engine's request stopped carrying earlier turns (the context
was full); ctrl+n starts a new conversation; `y` (in the transcript: Esc from the box)
copies the last answer.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, assert_never

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Input

from mvp_tui.engine.endpoint_words import slots_words
from mvp_tui.engine.events import EndpointReady, NodeReady
from mvp_tui.prompt.display import summary
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
from mvp_tui.untrusted import clean_line, clean_lines, one_line_ascii
from mvp_tui.widgets.collector import hold_full_collections, resume_full_collections
from mvp_tui.widgets.facts import NodeServing, PromptStep, TokensPending
from mvp_tui.widgets.pane import Pane
from mvp_tui.widgets.released import release_removed_widgets
from mvp_tui.widgets.sparkline import sparkline
from mvp_tui.widgets.transcript_view import Note, ShownTurn, TranscriptView

if TYPE_CHECKING:
    from mvp_tui.engine.ui_port import PromptEvent

QUESTION_CHARS = 400
RATES_KEPT = 12  # prompts in the tok/s sparkline
AFTER_DRAWN_S = 0.05  # the last frame's bytes written before the after-answer work
TURNS_SHOWN = 8  # earlier turns kept in the transcript view (all stay in the saved one)
NEW_CONVERSATION = "── a new conversation ──"


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
    turn: ShownTurn
    asked: str  # the question as submitted (the transcript shows one line of it)
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
        self.rates: deque[float] = deque(maxlen=RATES_KEPT)  # tok/s of the last prompts
        self.token_batches = 0  # coalesced token notices taken (each one batch of deltas)
        self.transcript = TranscriptLog()
        self.conversation = 0  # bumped by ctrl+n
        self._dropped_marker: Note | None = None
        self._pane_ids: set[int] = set()  # queued from this pane: turns of its conversation
        self._rule_pending = False  # ctrl+n while a turn streamed: the rule goes after it
        self._figures = ""  # the last turn's figures once it ended (a queue note goes after)
        self._summary = ""  # and as it stays once a later turn is under it (no trend)

    def compose_content(self) -> ComposeResult:
        yield TranscriptView(id="prompt-answer")
        yield PromptInput(self.history, id="prompt-input")

    def on_mount(self) -> None:
        self.view.display = False
        self.input.display = False

    def on_unmount(self) -> None:
        resume_full_collections()  # gone mid-answer: the collector is not left held

    @property
    def input(self) -> PromptInput:
        return self.query_one(PromptInput)

    @property
    def view(self) -> TranscriptView:
        """The transcript: every turn on screen, the last one live while it streams."""
        return self.query_one(TranscriptView)

    def focus_target(self) -> Widget | None:
        return self.input

    # -- the API the app uses ------------------------------------------------------------
    def set_ready(self, model_name: str | None = None) -> None:
        """Open the prompt box (the engine answers); optionally name the model."""
        if model_name:
            self.model_name = clean_line(model_name, 60)
        if not self.ready:  # markdown-it (~30 ms) loaded now, not within the first answer
            self.call_after_refresh(_load_markdown)
        self.ready = True
        self.set_empty(False)
        self.view.display = True
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
        self._append(message.prompt_id, message.take(message.prompt_id))

    def handle_event(self, event: PromptEvent | TextDelta | NodeReady) -> None:
        if isinstance(event, TextDelta):
            self._append(event.prompt_id, [event])
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
        hold_full_collections()  # until this answer is drawn (_after_answer)
        question = self._questions.get(event.prompt_id, f"prompt {event.prompt_id}")
        view = self.view
        last = view.last_turn
        if last is not None:  # the trend and queue note belong to the line at the bottom
            view.set_figures(self._summary, fault=last.fault)
        if self._rule_pending:  # ctrl+n while the last turn streamed: the rule after it
            self._rule_pending = False
            view.add(Note(NEW_CONVERSATION, "rule"))
        # Only the pane's own prompts are turns of its conversation (the RPC's stand alone).
        pane_turn = event.prompt_id in self._pane_ids
        self._pane_ids.discard(event.prompt_id)
        if event.turns_dropped:
            self._mark_dropped(event.turns_sent, event.turns_dropped)
        turn = ShownTurn(one_line_ascii(question, QUESTION_CHARS),
                    conversation=self.conversation if pane_turn else -1,
                    dropped_before=event.turns_dropped)
        self.live = _Live(event.prompt_id, event.at, turn, question)
        view.add(turn)
        self._trim_earlier()
        self._show_stats()

    def _append(self, prompt_id: int, deltas: list[TextDelta]) -> None:
        """Deltas of one prompt as one: counted, cleaned and appended once, with the figures
        line in the same redraw (dropped unless they are the live answer's)."""
        live = self.live
        if not deltas or live is None or live.prompt_id != prompt_id:
            return  # not the answer on screen (one that ended or was cancelled)
        live.deltas += len(deltas)
        if live.first_at is None:
            live.first_at = deltas[0].at
        live.last_at = deltas[-1].at
        text = "".join(delta.text for delta in deltas)
        self.view.append_answer(clean_lines(text, len(text)), self._live_figures())

    def _ended(self, event: PromptDone | PromptFault | PromptCancelled) -> None:
        release_removed_widgets(self.app)  # footer keys rebuilt since the last answer
        self.waiting.discard(event.prompt_id)
        self._questions.pop(event.prompt_id, None)
        self._pane_ids.discard(event.prompt_id)
        live = self.live
        if live is None or live.prompt_id != event.prompt_id:
            self._show_stats()
            return
        self.live = None
        turn = live.turn
        if isinstance(event, PromptDone):
            self.rates.append(event.tokens_per_s)
            trend = f" · tok/s {sparkline(list(self.rates))}" if len(self.rates) > 1 else ""
            figures = summary(event)
            shown = figures + trend
        elif isinstance(event, PromptFault):
            figures = shown = _fault_text(event)
        else:
            figures = shown = "cancelled"
        turn.done, turn.ended = isinstance(event, PromptDone), True
        self._figures, self._summary = shown, figures
        self.view.set_figures(shown + self._queue_note(), fault=isinstance(event, PromptFault))
        self.transcript.add(SavedTurn(live.asked, turn.answer, figures, turn.dropped_before))
        self.view.show_now()  # the last tokens and the figures, not at the next frame
        # After the frame that draws the last token, and a moment more: the driver's writer
        # thread puts that frame on the terminal, which the collector's walk (it holds the
        # interpreter) and the answer's markdown render would hold up.
        self.call_after_refresh(self.set_timer, AFTER_DRAWN_S, self._after_answer)

    def _queue_note(self) -> str:
        return f" · {len(self.waiting)} waiting" if self.waiting else ""

    def _show_stats(self) -> None:
        figures = self._live_figures()
        if figures is not None:
            self.view.set_figures(figures)
        elif self.view.last_turn is not None and self._figures:
            # The last turn's figures, and how many wait after it.
            self.view.set_figures(self._figures + self._queue_note(),
                                  fault=self.view.last_turn.fault)

    def _live_figures(self) -> str | None:
        """The streaming answer's figures line (None: none streams)."""
        live = self.live
        if live is None:
            return None
        parts = [f"{live.deltas} tok"]
        if live.first_at is not None and live.last_at is not None and live.deltas > 1:
            span = live.last_at - live.first_at
            if span > 0:
                parts.append(f"{(live.deltas - 1) / span:,.0f} tok/s")
        if live.first_at is not None:
            parts.append(f"TTFT {(live.first_at - live.started_at) * 1000:.0f} ms")
        else:
            parts.append("waiting for the first token")
        return " · ".join(parts) + self._queue_note()

    # -- the transcript ------------------------------------------------------------------
    def _after_answer(self) -> None:
        """Once an answer's last token is drawn and none streams: the collector back, and
        the answers as markdown (rendering one while tokens stream would hold them up)."""
        if self.live is not None:
            return  # the next end does it
        resume_full_collections()
        self.view.format_answers()

    def _trim_earlier(self) -> None:
        """At most `TURNS_SHOWN` turns above the last, and no rule or marker left above
        them but the marker (what it marks is off screen: it stays on top)."""
        view = self.view
        turns = view.turns
        if len(turns) <= TURNS_SHOWN + 1:
            return
        first_kept = turns[len(turns) - TURNS_SHOWN - 1]
        for item in list(view.items):
            if item is first_kept:
                break
            if item is not self._dropped_marker:
                view.drop(item)

    def _mark_dropped(self, sent: int, dropped: int) -> None:
        """The marker, just above the oldest turn the request still carried."""
        view = self.view
        if self._dropped_marker is not None and self._dropped_marker in view.items:
            view.drop(self._dropped_marker)
        # The turns the engine's conversation holds: this conversation's, answered in full.
        ours = [turn for turn in view.turns
                if turn.done and turn.conversation == self.conversation]
        marker = Note(f"✂ {dropped} earlier turn{'s' if dropped != 1 else ''} not sent: "
                      "the conversation is past [model] max_context", "marker")
        self._dropped_marker = marker
        if sent and len(ours) >= sent:
            view.insert(view.items.index(ours[len(ours) - sent]), marker)
        elif sent:  # the oldest sent is off screen already: so is what was dropped
            view.insert(0, marker)
        else:
            view.add(marker)

    def _update_subtitle(self) -> None:
        parts = [self.model_name] if self.model_name else []
        if self.openai_endpoint:
            parts.append(f"also on {self.openai_endpoint} ({self.endpoint_note})")
        if self.rpc_endpoint:
            parts.append(f"rpc {self.rpc_endpoint}")
        self.border_subtitle = Text(" · ".join(parts))

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
        view = self.view
        if self.input.has_focus and view.display and view.last_turn is not None:
            view.focus()
            return
        self.post_message(self.LeaveRequested())

    def action_new_conversation(self) -> None:
        self.conversation += 1
        self.transcript.new_conversation()
        self._dropped_marker = None  # the next conversation's marker is its own
        self.post_message(self.NewConversationRequested())
        if self.live is not None:
            self._rule_pending = True
        elif self.view.last_turn is not None:  # the rule under the last turn, now
            self.view.add(Note(NEW_CONVERSATION, "rule"))
            self._trim_earlier()

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


def _load_markdown() -> None:
    import rich.markdown  # noqa: F401  (the transcript's formatter, loaded after the paint)


def _fault_text(event: PromptFault) -> str:
    what = one_line_ascii(event.code, 60) if event.code else event.fault_kind.value
    status = f" ({event.http_status})" if event.http_status is not None else ""
    text = f"✗ {what}{status}: {one_line_ascii(event.error, 200)}"
    if event.fix:
        text += f" — fix: {one_line_ascii(event.fix, 120)}"
    return text
