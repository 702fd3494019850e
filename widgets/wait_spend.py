"""The price of waiting, as the Bootstrap pane's last line: while a node comes up, how long
this attempt has waited and what it and the run have cost so far; once it serves, the
engine's summary (`ReadySummary`: each stage's time and the money spent before the first
token). Pure state from lease and engine events; the pane renders `line(now)`."""

from __future__ import annotations

from mvp_tui.engine.events import NodeReady, ReadySummary
from mvp_tui.engine.ready_estimate import clock_text
from mvp_tui.events import EngineEvent
from mvp_tui.lease import events as lease
from mvp_tui.lease.spend import spend_usd
from mvp_tui.untrusted import clean_line


class WaitSpend:
    def __init__(self) -> None:
        self._since: float | None = None  # this attempt's create answer (billing starts)
        self._price = 0.0
        self._lease: str | None = None
        self._closed = 0.0  # what earlier attempts of the run cost (their confirmed deletes)
        self.summary = ""  # the engine's line at ready

    def handle(self, event: EngineEvent) -> bool:
        """Whether the line changed."""
        if isinstance(event, lease.LeaseRunning):
            if event.provider_id != self._lease:
                self.summary = ""
            self._lease, self._price = event.provider_id, event.price_per_hour
            self._since = event.at - event.after_s
            return True
        if isinstance(event, lease.LeaseDeleted):
            self._closed += event.spend_usd
            if event.provider_id == self._lease:
                self._since, self._lease = None, None
            return True
        if isinstance(event, NodeReady):  # serving: the wait is over (the summary follows)
            self._since = None
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
        if self._since is None:
            return ""
        waited = max(0.0, now - self._since)
        attempt = spend_usd(self._price, waited)
        run = self._closed + attempt
        return f"waiting {clock_text(waited)} · ${attempt:.4f} (run ${run:.4f})"
