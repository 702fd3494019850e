"""Seed row 117 on RunPod: a pod whose every read fails after its create (the API answers
5xx) ends its attempt after `read_failure_limit` reads in a row, with the cause, instead of
waiting the ready budget while the pod bills; the delete is sent (best effort), and while the
API cannot confirm it the walk says it may bill. Once the API is back, `teardown` confirms."""

from __future__ import annotations

import time
from pathlib import Path

from mvp_tui.events import RecordingSink
from mvp_tui.lease import LeaseWalk, RecordStore, WalkFailure, teardown
from mvp_tui.providers.base import SelectionPolicy
from tests.fakes.runpod_server import FakeRunPod, Fault
from tests.lease.conftest import fast_settings
from tests.runpod.conftest import make_provider

POLICY = SelectionPolicy(require_verified=False)
BUDGET_S = 600.0  # the walk's SSH budget: the test fails long before a walk waits it out


async def test_every_read_failing_after_the_create_ends_the_attempt_with_the_cause(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    provider = make_provider(fake)
    store, sink = RecordStore(tmp_path / "state"), RecordingSink()
    settings = fast_settings(ready_timeout_s=BUDGET_S, poll_interval_s=0.01)
    outage = [Fault(status=503) for _ in range(200)]
    try:
        offers = await provider.search_offers(POLICY)
        fake.on_create = lambda _body: (fake.script("get", *outage), fake.script("list", *outage))
        walk = LeaseWalk(provider, store, sink, settings, run_id="r-0a7e0117")
        started = time.monotonic()
        result = await walk.run(offers)
        took = time.monotonic() - started
        assert took < 60, f"the walk waited {took:.1f} s"
        assert result.failure is WalkFailure.DELETE_UNCONFIRMED, result.reason
        assert "RunPod API failed 5 reads" in result.reason
        assert "503" in result.reason and "status page" in result.reason
        assert "may still bill" in result.reason and walk.run_id in result.reason
        (pod_id,) = fake.deleted()
        gets = [r for r in fake.requests if r.method == "GET" and r.path.endswith(pod_id)]
        deletes = [r for r in fake.requests if r.method == "DELETE"]
        assert len(deletes) == 1 and len(gets) >= 5
        assert len(fake.create_requests()) == 1, "no other offer: the API is down for all"
        with fake._lock:
            fake._faults.clear()  # the API is back: the delete is confirmed
        ok = await teardown(provider, store, walk.run_id, pod_id, sink, settings)
        assert ok and fake.pods() == []
    finally:
        await provider.aclose()


async def test_reads_failing_fewer_times_than_the_limit_are_waited_through(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    provider = make_provider(fake)
    store, sink = RecordStore(tmp_path / "state"), RecordingSink()
    settings = fast_settings(ready_timeout_s=30, poll_interval_s=0.01)
    try:
        offers = await provider.search_offers(POLICY)
        fake.on_create = lambda _body: fake.script("get", *[Fault(status=502)] * 4)
        walk = LeaseWalk(provider, store, sink, settings, run_id="r-0a7e0118")
        result = await walk.run(offers)
        assert result.ok, result.reason
    finally:
        await provider.aclose()
