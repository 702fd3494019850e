"""The engine port (issue 23 §1): each fact to the pane that owns it, tokens coalesced.

The panes' models keep their own handler tables; the port's tables must route every type
they handle to them, or a fact would silently stop reaching its pane.
"""

from __future__ import annotations

from mvp_tui.engine.events import NodeReady, RunStateChanged
from mvp_tui.engine.ui_port import BOOTSTRAP_EVENTS, LEASE_EVENTS, UiPort
from mvp_tui.events import EngineEvent
from mvp_tui.lease import events as lease
from mvp_tui.prompt.events import PromptQueued, PromptStarted, TextDelta
from mvp_tui.widgets import bootstrap_model, leases_model
from mvp_tui.widgets.prompt import PromptPane
from tests.tui.apps import make_app
from tests.widgets.data import T0, wait_until, walk_events


def test_every_type_a_pane_model_reads_is_routed_to_it() -> None:
    assert set(leases_model._HANDLERS) <= LEASE_EVENTS
    assert set(bootstrap_model._EVENT_HANDLERS) <= BOOTSTRAP_EVENTS


class Facts:
    """A `UiFacts` that keeps what it was told, by method."""

    def __init__(self) -> None:
        self.told: list[tuple[str, object]] = []

    def offer_gone(self, offer_id: str) -> None:
        self.told.append(("offer_gone", offer_id))

    def bootstrap_step(self, event: EngineEvent) -> None:
        self.told.append(("bootstrap_step", type(event)))

    def lease_changed(self, event: EngineEvent) -> None:
        self.told.append(("lease_changed", type(event)))

    def node_ready(self, event: NodeReady) -> None:
        self.told.append(("node_ready", type(event)))

    def prompt_step(self, event: EngineEvent) -> None:
        self.told.append(("prompt_step", type(event)))

    def tokens_pending(self, prompt_id: int) -> None:
        self.told.append(("tokens_pending", prompt_id))

    def run_changed(self, event: EngineEvent) -> None:
        self.told.append(("run_changed", type(event)))


def test_facts_go_only_to_their_owners_and_early_ones_wait() -> None:
    port, facts = UiPort(), Facts()
    # Read by no pane: it goes nowhere.
    port(lease.OfferPicked(at=T0, run_id="r", offer_id="1", gpu_name="g", price_per_hour=0.1,
                           position=1, of=2))
    port(RunStateChanged(at=T0, run_id="r", state="serving"))
    port.connect(facts)  # what came before the UI existed is handed over first
    port(TextDelta(at=T0, prompt_id=3, text="a"))
    port(TextDelta(at=T0, prompt_id=3, text="b"))
    # One notice for the batch: the second delta joins the first, waiting in the port.
    assert facts.told == [("run_changed", RunStateChanged), ("tokens_pending", 3)]
    assert [d.text for d in port.take_tokens(3)] == ["a", "b"]
    assert port.take_tokens(3) == []
    port(TextDelta(at=T0, prompt_id=3, text="c"))  # taken: the next delta is a new batch
    assert facts.told[-1] == ("tokens_pending", 3)
    assert len(facts.told) == 3


async def test_tokens_reach_the_prompt_pane_in_coalesced_batches() -> None:
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(PromptPane)
        for event in walk_events():
            app.dashboard.route(event)
        app.dashboard.route(NodeReady(at=T0, run_id="r", model_id="tiny", engine="llama.cpp",
                            local_url="http://127.0.0.1:18081"))
        app.dashboard.route(PromptQueued(at=T0, prompt_id=1, text_chars=3, max_tokens=500,
                                         position=0))
        app.dashboard.route(PromptStarted(at=T0, prompt_id=1))
        for i in range(400):  # a burst, faster than the screen: one notice per batch
            app.dashboard.route(TextDelta(at=T0 + i / 1000, prompt_id=1, text=f"t{i} "))
        await wait_until(pilot, lambda: pane.live is not None and pane.live.deltas == 400)
        assert 1 <= pane.token_batches < 400
        await wait_until(pilot, lambda: pane.view.turns[-1].answer.endswith("t399 "))
        assert app.port.routed["leases"] >= len(walk_events())
        app._exit_cleared = True
