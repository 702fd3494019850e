"""The price of waiting, as the Bootstrap pane's last line: while a node comes up, how long
this attempt has waited and what it and the run have cost so far; once it serves, the
engine's summary (`ReadySummary`: each stage's time and the money spent before the first
token). Which lease is being waited on comes from the events; its money, and the run's, is
read from the lease ledger (the one the status bar and the Leases pane read)."""

from __future__ import annotations

from mvp_tui.engine.events import NodeReady, ReadySummary
from mvp_tui.engine.ledger import LeaseLedger, money_text
from mvp_tui.engine.ready_estimate import clock_text
from mvp_tui.events import EngineEvent
from mvp_tui.lease import events as lease
from mvp_tui.untrusted import clean_line


class WaitSpend:
    """`ledger`: the app's, which the engine feeds; None: its own, fed here (a pane alone)."""

    def __init__(self, ledger: LeaseLedger | None = None) -> None:
        self.ledger = ledger if ledger is not None else LeaseLedger()
        self._feeds = ledger is None
        self._lease: str | None = None  # the lease this attempt waits on
        self._run: str | None = None
        self.summary = ""  # the engine's line at ready

    def handle(self, event: EngineEvent) -> bool:
        """Whether the line changed."""
        if self._feeds:
            self.ledger.apply(event)
        if isinstance(event, lease.LeaseRunning):
            if event.provider_id != self._lease:
                self.summary = ""
            self._lease, self._run = event.provider_id, event.run_id
            return True
        if isinstance(event, lease.LeaseDeleted):
            if event.provider_id == self._lease:
                self._lease = None
            return True
        if isinstance(event, NodeReady):  # serving: the wait is over (the summary follows)
            self._lease = None
            return True
        if isinstance(event, ReadySummary):
            self.summary = clean_line(event.text, 300)
            return True
        return False

    def line(self, now: float) -> str:
        """`waiting 1:23 · $0.0040 (run $0.0110)`: this attempt's wait and cost, and the
        run's (short: it fits a narrow pane); the summary at ready; or "" between leases."""
        if self.summary:
            return self.summary
        row = self.ledger.row(self._lease, now) if self._lease is not None else None
        if row is None:
            return ""
        run = self.ledger.spent(now, self._run)
        return (f"waiting {clock_text(row.uptime_s)} · {money_text(row.spend_usd)} "
                f"(run {money_text(run)})")
