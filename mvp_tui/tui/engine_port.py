"""The dashboard's side of the engine port (`engine/ui_port.py`): each fact becomes a typed
message (`widgets/facts.py`) posted to the pane that owns it, not to every pane.

The engine runs on the app's loop (a worker), so the port posts straight into the panes'
queues; tokens reach the Prompt pane as coalescing notices and are taken from the port's
buffer in batches.
"""

from __future__ import annotations

from typing import Any

from textual.screen import Screen

from mvp_tui.engine.events import NodeReady
from mvp_tui.engine.ui_port import BootstrapEvent, LeaseEvent, PromptEvent, RunEvent, UiPort
from mvp_tui.widgets.bootstrap import BootstrapPane
from mvp_tui.widgets.facts import (
    BootstrapStep,
    LeaseChanged,
    LedgerMoved,
    NodeServing,
    OfferGone,
    PromptStep,
    RunChanged,
    TokensPending,
)
from mvp_tui.widgets.leases import LeasesPane
from mvp_tui.widgets.offers import OffersPane
from mvp_tui.widgets.prompt import PromptPane

__all__ = ["PaneRoutes", "UiPort"]


class PaneRoutes:
    """`UiFacts` for the composed dashboard: each fact to its pane (found once), the run's
    own to the dashboard's screen."""

    def __init__(self, screen: Screen[Any], port: UiPort) -> None:
        self._screen = screen
        self._port = port
        self._offers = screen.query_one(OffersPane)
        self._bootstrap = screen.query_one(BootstrapPane)
        self._leases = screen.query_one(LeasesPane)
        self._prompt = screen.query_one(PromptPane)

    def offer_gone(self, offer_id: str) -> None:
        self._offers.post_message(OfferGone(offer_id))

    def bootstrap_step(self, event: BootstrapEvent) -> None:
        self._bootstrap.post_message(BootstrapStep(event))

    def lease_changed(self, event: LeaseEvent) -> None:
        self._leases.post_message(LeaseChanged(event))
        self._screen.post_message(LedgerMoved())  # the status bar reads the ledger

    def node_ready(self, event: NodeReady) -> None:
        self._prompt.post_message(NodeServing(event))

    def prompt_step(self, event: PromptEvent) -> None:
        self._prompt.post_message(PromptStep(event))

    def tokens_pending(self, prompt_id: int) -> None:
        self._prompt.post_message(TokensPending(prompt_id, self._port.take_tokens))

    def run_changed(self, event: RunEvent) -> None:
        self._screen.post_message(RunChanged(event))
