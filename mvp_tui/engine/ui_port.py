"""The one port between the engine and a UI: engine events become a few typed facts, each
handed to the part of the UI that owns it (in the style of Harlequin's `HarlequinDriver`:
one method per fact on the target; no Textual here).

Each event goes only where it is read: the Leases pane's walk and lease facts, the
Bootstrap pane's engine steps, the Prompt pane's prompt steps, the Offers pane's sold
offers, and the run's own facts (state, endpoint, idle stop) to the app. An event nobody
reads goes nowhere. Tokens are the high-rate fact: each `TextDelta` is kept in a buffer
per prompt and the target told only when the first of a batch arrives (the buffer for that
prompt was empty); the UI takes the whole batch when it gets to the notice, and a notice
still queued for the same prompt is replaced by a later one (Textual's `can_replace`).

A replay's events (rebuilt from the archive's frames by `tui/replay_events.py`) come in
through the same port: one route per fact, live or replayed. The port folds each event into
the UI's `RunStatus` before routing it, so the status a replay shows is the live run's.
"""

from __future__ import annotations

from typing import Protocol, TypeAlias, TypeGuard, get_args

from mvp_tui.engine.events import (
    AttemptAbandoned,
    EndpointReady,
    IdleStopNotice,
    LimitReached,
    NodeFailed,
    NodeReady,
    NodeReplacing,
    NodeWatchdog,
    ReadySummary,
    RunStarted,
    RunStateChanged,
    SessionChanged,
    StageBudget,
    WalkOrderSaid,
)
from mvp_tui.engine.run_status import RunStatus
from mvp_tui.events import EngineEvent
from mvp_tui.lease import events as lease
from mvp_tui.prompt import events as prompt
from mvp_tui.providers.base import Outcome
from mvp_tui.ssh import events as ssh

# What each owner reads, as types: a message carries one of its owner's union, so mypy holds
# every handler to the facts it can get. The panes' models keep their own handler tables; a
# test checks that every type they handle is in their owner's union here.
BootstrapEvent: TypeAlias = (
    lease.AttemptStarted | lease.LeasePending | lease.LeaseRunning | lease.PrefetchStarted
    | lease.LeaseDeleted | lease.WalkFailed | ssh.SshAttempt | ssh.HostKeyPinned
    | ssh.AgentStarted | ssh.AgentExited | StageBudget | NodeReady | NodeFailed | ReadySummary
)
LeaseEvent: TypeAlias = (
    lease.AttemptStarted | lease.AttemptAnswered | lease.ReconcileStarted | lease.Reconciled
    | lease.LeasePending | lease.LeaseRunning | lease.LeaseNotReady | lease.LeaseDeleting
    | lease.LeaseDeleted | lease.LeaseDeleteUnconfirmed | lease.OfferSkipped
    | lease.SecretLeftOver | lease.WalkFailed | lease.Sweep | lease.WalkReordered
    | lease.VolumeMounted | NodeWatchdog | NodeReady | AttemptAbandoned | NodeReplacing
    | WalkOrderSaid
)
PromptEvent: TypeAlias = (
    prompt.PromptQueued | prompt.PromptStarted | prompt.PromptDone | prompt.PromptFault
    | prompt.PromptCancelled | prompt.PromptRpcListening | ssh.PortForwarded | EndpointReady
)
# The run's own facts, for the dashboard: its status (`engine/run_status.py`, folded by the
# port before each route), the small-terminal layout following the run's state, endpoint and
# idle-stop toasts. (Lease money reaches the dashboard through the ledger.)
RunEvent: TypeAlias = (
    RunStateChanged | EndpointReady | IdleStopNotice | RunStarted | SessionChanged | LimitReached
)

BOOTSTRAP_EVENTS: frozenset[type[EngineEvent]] = frozenset(get_args(BootstrapEvent))
LEASE_EVENTS: frozenset[type[EngineEvent]] = frozenset(get_args(LeaseEvent))
PROMPT_EVENTS: frozenset[type[EngineEvent]] = frozenset(get_args(PromptEvent))
RUN_EVENTS: frozenset[type[EngineEvent]] = frozenset(get_args(RunEvent))
# Every type some owner reads: what an archive keeps of the engine's events for a replay
# (`engine/event_records.py`).
UI_EVENTS: frozenset[type[EngineEvent]] = (
    LEASE_EVENTS | BOOTSTRAP_EVENTS | PROMPT_EVENTS | RUN_EVENTS | {prompt.TextDelta, NodeReady}
)


def is_bootstrap_event(event: EngineEvent) -> TypeGuard[BootstrapEvent]:
    return type(event) in BOOTSTRAP_EVENTS


def is_lease_event(event: EngineEvent) -> TypeGuard[LeaseEvent]:
    return type(event) in LEASE_EVENTS


def is_prompt_event(event: EngineEvent) -> TypeGuard[PromptEvent]:
    return type(event) in PROMPT_EVENTS


def is_run_event(event: EngineEvent) -> TypeGuard[RunEvent]:
    return type(event) in RUN_EVENTS


class UiFacts(Protocol):
    """What a UI is told; each method is one kind of fact, for the part that owns it."""

    def offer_gone(self, offer_id: str) -> None:
        """The provider said this offer is sold (the board marks it, then re-reads)."""

    def bootstrap_step(self, event: BootstrapEvent) -> None:
        """A step of bringing the node up, from the engine."""

    def lease_changed(self, event: LeaseEvent) -> None:
        """A step of the lease walk or a lease's life."""

    def node_ready(self, event: NodeReady) -> None:
        """The node serves: the prompt box opens (the queue takes prompts from here)."""

    def prompt_step(self, event: PromptEvent) -> None:
        """A prompt's life or where prompts are served."""

    def tokens_pending(self, prompt_id: int) -> None:
        """Deltas of this prompt wait in the port (`take_tokens`)."""

    def run_changed(self, event: RunEvent) -> None:
        """The run's own facts."""


class TokenBuffer:
    """Deltas not yet taken, per prompt (a prompt's are taken whole, in order)."""

    def __init__(self) -> None:
        self._by_prompt: dict[int, list[prompt.TextDelta]] = {}

    def add(self, delta: prompt.TextDelta) -> bool:
        """Keep one; True when it is the first waiting for its prompt."""
        waiting = self._by_prompt.setdefault(delta.prompt_id, [])
        waiting.append(delta)
        return len(waiting) == 1

    def take(self, prompt_id: int) -> list[prompt.TextDelta]:
        return self._by_prompt.pop(prompt_id, [])


class UiPort:
    """The engine's sink on the UI side: events become facts for a target set later (the UI,
    once it exists, with the status it folds); facts met before that are kept and handed
    over first."""

    def __init__(self) -> None:
        self._target: UiFacts | None = None
        self._status: RunStatus | None = None
        self._early: list[EngineEvent] = []
        self.tokens = TokenBuffer()
        self.routed: dict[str, int] = {}  # facts handed out, by owner (the port's figures)

    def connect(self, target: UiFacts, status: RunStatus | None = None) -> None:
        """Facts go to `target` from now on, each event folded into `status` first."""
        self._target, self._status = target, status
        early, self._early = self._early, []
        for event in early:
            self._route(target, event)

    def __call__(self, event: EngineEvent) -> None:
        target = self._target
        if target is None:
            self._early.append(event)
        else:
            self._route(target, event)

    def take_tokens(self, prompt_id: int) -> list[prompt.TextDelta]:
        """The deltas of this prompt that are waiting, oldest first."""
        return self.tokens.take(prompt_id)

    def _count(self, owner: str) -> None:
        self.routed[owner] = self.routed.get(owner, 0) + 1

    def _route(self, target: UiFacts, event: EngineEvent) -> None:
        if isinstance(event, prompt.TextDelta):  # the hot path: first, and one dict lookup
            self._count("prompt")
            if self.tokens.add(event):  # told once per batch: the first delta waiting
                self._count("token batches")
                target.tokens_pending(event.prompt_id)
            return
        if self._status is not None:
            self._status.apply(event)
        if is_lease_event(event):
            self._count("leases")
            target.lease_changed(event)
        if is_bootstrap_event(event):
            self._count("bootstrap")
            target.bootstrap_step(event)
        if is_prompt_event(event):
            self._count("prompt")
            target.prompt_step(event)
        if is_run_event(event):
            self._count("app")
            target.run_changed(event)
        if isinstance(event, NodeReady):
            self._count("prompt")
            target.node_ready(event)
        if (
            isinstance(event, lease.AttemptAnswered)
            and event.outcome == Outcome.UNAVAILABLE.value
        ):
            self._count("offers")
            target.offer_gone(event.offer_id)


