"""The Leases pane fed by a real lease walk against the fake Vast server (real HTTP): an
offer sold before the create, then a create answered 500 whose instance exists → adopted."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from datetime import UTC
from pathlib import Path

import pytest
from textual.pilot import Pilot

from mvp_tui.events import EngineEvent, RecordingSink
from mvp_tui.lease.records import RecordStore
from mvp_tui.lease.settings import WalkSettings
from mvp_tui.lease.walk import LeaseWalk
from mvp_tui.providers.vastai.client import VastAiProvider
from mvp_tui.widgets.leases import LeasesPane
from tests.fakes.vastai_server import FakeVast, Fault
from tests.widgets.data import T0, fixed_clock
from tests.widgets.harness import Harness

KEY = "fake-vast-key-0123456789"


async def _no_wait(_seconds: float) -> None:
    await asyncio.sleep(0)


async def recorded_walk(state: Path) -> list[EngineEvent]:
    """Events of one deterministic walk: fixed run id, a clock that ticks 1 s per read."""
    ticks = itertools.count()
    sink = RecordingSink()
    with FakeVast(api_key=KEY, loading_polls=1) as fake:
        fake.clock = lambda: T0
        fake.add_offer(dph_total=0.30, gpu_name="RTX 3090")
        fake.add_offer(dph_total=0.35, gpu_name="RTX 4090")
        provider = VastAiProvider(api_key=KEY, api_url=fake.url)
        try:
            offers = sorted(await provider.search_offers(_policy()), key=lambda o: o.price_per_hour)
            fake.script("create", Fault(status=404), Fault(status=500, perform=True))
            settings = WalkSettings(reconcile_waits_s=(0.0,), poll_interval_s=0.01,
                                    sleep=_no_wait, image="mvp-node:latest",
                                    owner_tag="a1b2c3d4e5")  # the labels of the golden
            walk = LeaseWalk(provider, RecordStore(state), sink, settings,
                             clock=lambda: T0 + next(ticks), run_id="r-00c0ffee")
            result = await walk.run(offers)
            assert result.ok, result.reason
            assert len(fake.billing()) == 1  # adopted, not duplicated
            await provider.destroy(result.lease.provider_id or "")  # type: ignore[union-attr]
        finally:
            await provider.aclose()
    return sink.events


def _policy():  # type: ignore[no-untyped-def]
    from mvp_tui.providers.base import SelectionPolicy

    return SelectionPolicy(require_verified=False, min_reliability=None, min_down_mbps=None)


@pytest.fixture
def walk_events(tmp_path: Path) -> Iterator[list[EngineEvent]]:
    yield asyncio.run(recorded_walk(tmp_path / "state"))


def test_leases_pane_from_a_walk_against_the_fake(snap_compare, walk_events) -> None:  # type: ignore[no-untyped-def]
    kinds = [e.kind for e in walk_events]
    answers = [e.outcome for e in walk_events if e.kind == "attempt_answered"]  # type: ignore[attr-defined]
    assert answers == ["unavailable", "ambiguous"]
    assert "reconciled" in kinds and "lease_running" in kinds
    app = Harness(lambda: [LeasesPane(clock=fixed_clock(T0 + 60), tz=UTC)])

    async def run_before(pilot: Pilot[None]) -> None:
        pane = pilot.app.query_one(LeasesPane)
        for event in walk_events:
            pane.handle_event(event)
        pane.focus()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(160, 30), run_before=run_before)
