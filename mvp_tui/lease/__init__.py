"""Leasing safely: the lease walk, run records, reconciliation and confirmed teardown.

Provider-agnostic: everything here speaks only `mvp_tui.providers.base.Provider`.
"""

from __future__ import annotations

from mvp_tui.labels import attempt_label, belongs_to_run, node_prefix, parse_label, run_prefix
from mvp_tui.lease.events import DeleteReason, WalkFailure
from mvp_tui.lease.naming import new_run_id
from mvp_tui.lease.record_pins import RecordPins
from mvp_tui.lease.records import (
    AttemptRecord,
    CreateAttemptOutcome,
    LeaseRecord,
    LeaseRecordState,
    RecordError,
    RecordStore,
    RunRecord,
)
from mvp_tui.lease.restart import DownReport, LeaseRef, OpenLease, down, reconcile_open_runs
from mvp_tui.lease.settings import WalkSettings
from mvp_tui.lease.spend import lease_spend_usd, lease_uptime_s, spend_usd, total_spend_usd
from mvp_tui.lease.teardown import teardown
from mvp_tui.lease.walk import LeaseWalk, WalkResult

__all__ = [
    "AttemptRecord",
    "CreateAttemptOutcome",
    "DeleteReason",
    "DownReport",
    "LeaseRecord",
    "LeaseRecordState",
    "LeaseRef",
    "LeaseWalk",
    "OpenLease",
    "RecordError",
    "RecordPins",
    "RecordStore",
    "RunRecord",
    "WalkFailure",
    "WalkResult",
    "WalkSettings",
    "attempt_label",
    "belongs_to_run",
    "down",
    "lease_spend_usd",
    "lease_uptime_s",
    "new_run_id",
    "node_prefix",
    "parse_label",
    "reconcile_open_runs",
    "run_prefix",
    "spend_usd",
    "teardown",
    "total_spend_usd",
]
