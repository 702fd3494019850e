"""What a UI knows of the run, folded from the engine events it is shown: the run's
provider, id, state and served endpoint, its limits, and whether anything may bill.

It sits beside the ledger and knows no UI toolkit. The UI port (`engine/ui_port.py`) hands
it every event before routing it, so a live run and a replay of its archive (which routes
the same events through the same port) give the same status. What money is held is the
ledger's: `holds_lease` asks it (`may_bill`) rather than keeping a second count.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mvp_tui.engine.events import (
    BUSY_STATES,
    EndpointReady,
    IdleStopNotice,
    LimitReached,
    NodeReady,
    RunStarted,
    RunState,
    RunStateChanged,
    SessionChanged,
)
from mvp_tui.engine.ledger import LeaseLedger
from mvp_tui.engine.limits import Limits
from mvp_tui.events import EngineEvent

# The values `RunStateChanged` carries.
BUSY = frozenset(state.value for state in BUSY_STATES)
SERVING, TEARING_DOWN, IDLE = (RunState.SERVING.value, RunState.TEARING_DOWN.value,
                              RunState.IDLE.value)


@dataclass
class RunStatus:
    """Seeded with what is known before the run says anything (the configuration's
    provider and limits), then changed only by `apply`."""

    provider_name: str
    limits: Limits
    ledger: LeaseLedger = field(default_factory=LeaseLedger)
    run_id: str | None = None
    provider_bills: bool = True  # unknown until the session says: assume it bills (ask first)
    provider_ssh: bool = True
    run_dir: str = ""  # the run's directory (its records, endpoint and transcripts)
    state: str = IDLE
    closed: bool = False  # the session's final stop began: no new lease
    served: EndpointReady | None = None  # the node's endpoint, said while bringing it up
    node: NodeReady | None = None
    idle_stop: IdleStopNotice | None = None
    limit_reached: LimitReached | None = None

    def apply(self, event: EngineEvent) -> bool:
        """One engine event; whether the status changed (it reads only the run's own)."""
        handler = _HANDLERS.get(type(event))
        if handler is None:
            return False
        handler(self, event)
        return True

    def restart(self, ledger: LeaseLedger) -> None:
        """Back to what is known before the run said anything (a replay seeking back: its
        events come again), with a fresh fold of money."""
        seeded = RunStatus(self.provider_name, self.limits, ledger)
        for name, value in vars(seeded).items():
            setattr(self, name, value)

    # -- what a UI asks ---------------------------------------------------------------------
    @property
    def busy(self) -> bool:
        """A lease is being made, brought up or torn down."""
        return self.state in BUSY

    @property
    def tearing_down(self) -> bool:
        return self.state == TEARING_DOWN

    @property
    def leasing_open(self) -> bool:
        """A lease may be asked for (the session is not closing)."""
        return not self.closed

    @property
    def holds_lease(self) -> bool:
        """Something may bill now: a lease the ledger has not seen confirmed gone, or one
        being made, brought up or torn down."""
        return bool(self.ledger.may_bill) or self.busy

    @property
    def endpoint(self) -> EndpointReady | None:
        """The run's OpenAI endpoint while its node serves, else None (its key is not in
        any event: it is read from the run's endpoint file when needed)."""
        return self.served if self.state == SERVING else None

    # -- fed ----------------------------------------------------------------------------------
    def _started(self, e: RunStarted) -> None:
        # The provider is the session's word (`SessionChanged`): its client's name, which a
        # rehearsal's differs from the configuration's that `RunStarted` carries.
        self.run_id, self.run_dir = e.run_id, e.state_dir

    def _session(self, e: SessionChanged) -> None:
        self.run_id, self.provider_name = e.run_id, e.provider
        self.provider_bills, self.provider_ssh = e.billing, e.ssh
        self.limits, self.closed = Limits(**e.limits), e.closed

    def _state(self, e: RunStateChanged) -> None:
        self.state = e.state
        if e.state != SERVING:
            # Its node is said ready (and its endpoint) while it is brought up, after the
            # state moved there: a node replaced or re-attached says both again.
            self.served = self.node = None

    def _endpoint(self, e: EndpointReady) -> None:
        self.served = e

    def _node(self, e: NodeReady) -> None:
        self.node = e

    def _idle(self, e: IdleStopNotice) -> None:
        self.idle_stop = e

    def _limit(self, e: LimitReached) -> None:
        self.limit_reached = e


_HANDLERS: dict[type[EngineEvent], Callable[[RunStatus, Any], None]] = {
    RunStarted: RunStatus._started,
    SessionChanged: RunStatus._session,
    RunStateChanged: RunStatus._state,
    EndpointReady: RunStatus._endpoint,
    NodeReady: RunStatus._node,
    IdleStopNotice: RunStatus._idle,
    LimitReached: RunStatus._limit,
}
