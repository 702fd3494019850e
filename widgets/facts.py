"""The typed messages the engine port (`tui/engine_port.py`) posts to the pane that owns
them, one kind per fact (`engine/ui_port.py` says which events each carries).

Facts for a pane alone do not bubble; a sold offer and the node serving bubble on to the
app once the pane has them (the board's re-read, the focus move to the opened prompt box
are the app's). Lease money is no message's: it is the ledger's (`engine/ledger.py`), and
the app is told only that it moved. The
token notice coalesces (as Toolong's `PendingLines` does): one still waiting in the queue is
replaced by the next, and the pane takes every delta pending at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:  # the unions are the port's; typing them costs no import at start-up
    from mvp_tui.engine.events import NodeReady
    from mvp_tui.engine.ui_port import BootstrapEvent, LeaseEvent, PromptEvent, RunEvent
    from mvp_tui.prompt.events import TextDelta


class BootstrapStep(Message, bubble=False):
    """A step of bringing the node up (for the Bootstrap pane)."""

    def __init__(self, event: BootstrapEvent) -> None:
        super().__init__()
        self.event = event


class LeaseChanged(Message, bubble=False):
    """A step of the walk or of a lease's life (for the Leases pane)."""

    def __init__(self, event: LeaseEvent) -> None:
        super().__init__()
        self.event = event


class LedgerMoved(Message, bubble=False):
    """The lease ledger changed (for the app: the status bar reads it). One still queued
    says all a later one would."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, LedgerMoved)


class OfferGone(Message):
    """The provider said this offer is sold (the Offers pane marks it, the app re-reads)."""

    def __init__(self, offer_id: str) -> None:
        super().__init__()
        self.offer_id = offer_id


class PromptStep(Message, bubble=False):
    """A prompt's life, or where prompts are served (for the Prompt pane)."""

    def __init__(self, event: PromptEvent) -> None:
        super().__init__()
        self.event = event


class NodeServing(Message):
    """The node serves: the prompt box opens (then the app may move focus to it)."""

    def __init__(self, event: NodeReady) -> None:
        super().__init__()
        self.event = event


class TokensPending(Message, bubble=False):
    """Deltas of one prompt wait in the port; a later notice for it replaces this one."""

    def __init__(self, prompt_id: int, take: Callable[[int], list[TextDelta]]) -> None:
        super().__init__()
        self.prompt_id = prompt_id
        self.take = take  # the port's: every delta of this prompt waiting now

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, TokensPending) and message.prompt_id == self.prompt_id


class RunChanged(Message):
    """The run's own facts: its state, the endpoint, the idle stop (for the app)."""

    def __init__(self, event: RunEvent) -> None:
        super().__init__()
        self.event = event
