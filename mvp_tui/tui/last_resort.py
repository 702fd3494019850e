"""After the dashboard: the run's leases are confirmed gone, or named with exit 3.

The app stops its run on every way out it sees. This is the net under it: when the app ended
without a completed stop (an exception in a widget, a terminal that vanished mid-teardown),
the run's record is read and its open leases destroyed through a fresh provider client, as
`mvp-tui down RUN` would. The dashboard says the outcome (tui/dashboard.py `after_app`).
"""

from __future__ import annotations

import asyncio

from mvp_tui.config import Config, ConfigError
from mvp_tui.engine.controller import RunController, StopResult
from mvp_tui.engine.provider_factory import build_provider
from mvp_tui.lease.records import RecordStore
from mvp_tui.lease.restart import LeaseRef, down
from mvp_tui.lease.settings import WalkSettings


def settle_run(config: Config, run_id: str, controller: RunController | None) -> StopResult:
    """The run's final stop: the app's, when it completed one that left its record closed;
    else the record's open leases destroyed now, confirmed (a fresh provider client)."""
    result = controller.result if controller is not None else None
    if result is None or (result.nothing_bills and _still_open(config, run_id)):
        # No completed stop, or one that missed a lease its record still holds.
        result = _destroy_from_record(config, run_id)
    return result


def _still_open(config: Config, run_id: str) -> bool:
    store = RecordStore(config.state_dir)
    try:
        return store.record_path(run_id).exists() and store.load(run_id).is_open
    except Exception:
        return True  # unreadable: let the teardown path report it


def _destroy_from_record(config: Config, run_id: str) -> StopResult:
    store = RecordStore(config.state_dir)
    if not store.record_path(run_id).exists():
        return StopResult()
    try:
        record = store.load(run_id)
    except Exception as exc:
        return StopResult(errors=(f"run {run_id}: {exc}",))
    if not record.is_open:
        return StopResult()
    try:
        return asyncio.run(_down(config, store, run_id))
    except Exception as exc:
        refs = tuple(
            LeaseRef(run_id, x.provider_id, x.label, f"{type(exc).__name__}: {exc}")
            for x in record.open_leases()
        )
        return StopResult(left=refs)


async def _down(config: Config, store: RecordStore, run_id: str) -> StopResult:
    try:
        settings = WalkSettings.from_config(config)
        provider = build_provider(config)
    except ConfigError as exc:
        raise RuntimeError(str(exc)) from None
    try:
        report = await down(provider, store, run_id, settings=settings)
    finally:
        await provider.aclose()
    return StopResult.from_down(report)
