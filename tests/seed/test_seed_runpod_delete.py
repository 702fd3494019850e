"""Seed 003 (`003_413a7f860c720e63.txt`, `remove`): who deleted a pod, and its last logs.

A pod already gone when we delete it (its node's switch or boot guard deleted it with its
pod-scoped key) is recorded as deleted by the node (seed `DeletedBy::Watchdog`), never as our
confirmed delete; a live pod's last log lines (`GET /v2/pods/{id}/logs`, an SSE stream) are
kept under the run's directory before the delete, cleaned and redacted.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mvp_tui.lease import events as ev
from mvp_tui.lease import teardown
from mvp_tui.lease.pod_logs import log_path
from mvp_tui.lease.records import LeaseRecordState
from mvp_tui.providers.base import DestroyOutcome
from mvp_tui.providers.runpod.client import RunPodProvider, RunPodSettings
from tests.fakes.runpod_server import FakeRunPod
from tests.lease.conftest import fast_settings
from tests.seed.runpod_seed import (
    POLICY,
    provider_for,
    seeded_fake,
    walk_for,
)


@pytest.fixture
def fake() -> Iterator[FakeRunPod]:
    yield from seeded_fake()


async def test_a_pod_its_node_deleted_is_recorded_as_deleted_by_the_node(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    provider = provider_for(fake)
    try:
        offers = await provider.search_offers(POLICY)
        walk, store, sink = walk_for(provider, tmp_path, "r-5eed0101")
        result = await walk.run(offers[:1])
        assert result.ok and result.lease is not None and result.lease.provider_id
        pod_id = result.lease.provider_id
        # The node's switch deletes its own pod with the pod-scoped key, as on RunPod.
        node = RunPodProvider(
            api_key=fake.instance_env(pod_id)["RUNPOD_API_KEY"],
            api_url=fake.api_url,
            settings=RunPodSettings(probe_ssh_banner=False),
        )
        try:
            assert (await node.destroy(pod_id)).outcome is DestroyOutcome.ACCEPTED
        finally:
            await node.aclose()
        assert fake.destroyed_by(pod_id) == "instance"
        ok = await teardown(provider, store, walk.run_id, pod_id, sink, fast_settings())
        assert ok
        lease = store.load(walk.run_id).lease_by_id(pod_id)
        assert lease is not None and lease.state is LeaseRecordState.DELETED
        assert lease.deleted_by == "node" and "deleted by its node" in lease.detail
        (deleted,) = sink.of(ev.LeaseDeleted)
        assert deleted.deleted_by == "node"
        assert fake.log_reads() == [], "a gone pod has no logs to read"
    finally:
        await provider.aclose()


async def test_a_live_pods_last_logs_are_kept_before_our_confirmed_delete(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    provider = provider_for(fake)
    try:
        offers = await provider.search_offers(POLICY)
        walk, store, sink = walk_for(provider, tmp_path, "r-5eed0102")
        result = await walk.run(offers[:1])
        assert result.ok and result.lease is not None and result.lease.provider_id
        pod_id = result.lease.provider_id
        fake.add_log_lines(pod_id, *(f"boot line {n}" for n in range(150)))
        fake.add_log_lines(
            pod_id, f"\x1b[31mCUDA error\x1b[0m key={fake.api_key}", "engine exited 1"
        )
        ok = await teardown(provider, store, walk.run_id, pod_id, sink, fast_settings())
        assert ok
        lease = store.load(walk.run_id).lease_by_id(pod_id)
        assert lease is not None and lease.deleted_by == "mvp-tui"
        assert sink.of(ev.LeaseDeleted)[-1].deleted_by == "mvp-tui"
        # Read before the delete was sent; the last 100 lines, as the API's default tail.
        (read,) = fake.log_reads()
        assert read.query == {"tail": "100"}
        order = [x.op for x in fake.exchanges if x.op in ("logs", "delete")]
        assert order[:2] == ["logs", "delete"]
        path = log_path(store, walk.run_id, pod_id)
        lines = path.read_text().splitlines()
        assert len(lines) == 100 and lines[-1] == "[container] engine exited 1"
        assert lines[0] == "[container] boot line 52"
        assert "CUDA error" in lines[-2] and "\x1b" not in path.read_text()
        assert fake.api_key not in path.read_text()
        assert path.stat().st_mode & 0o777 == 0o600
    finally:
        await provider.aclose()
