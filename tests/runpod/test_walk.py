"""The lease walk against RunPodProvider and the fake over HTTP: the ordered GPU walk, the
catalog read again after a type proves unplaceable, an ambiguous create adopted (never
re-sent blind), RUNNING without SSH waited out, deletes confirmed through a failing DELETE."""

from __future__ import annotations

import base64
from pathlib import Path

import asyncssh

from mvp_tui.events import RecordingSink
from mvp_tui.lease import LeaseWalk, RecordStore, WalkFailure, teardown
from mvp_tui.lease import events as ev
from mvp_tui.lease.records import CreateAttemptOutcome, SecretState
from mvp_tui.providers.base import SelectionPolicy
from mvp_tui.providers.runpod.client import HOST_KEY_ENV
from tests.fakes.runpod_server import FakeRunPod, Fault
from tests.lease.conftest import fast_settings
from tests.runpod.conftest import make_provider

POLICY = SelectionPolicy(require_verified=False)


def gpus_created(fake: FakeRunPod) -> list[str]:
    return [r.body["gpu"]["id"] for r in fake.create_requests()]


def catalog_reads(fake: FakeRunPod) -> int:
    return sum(1 for r in fake.requests if r.path == "/v2/catalog/gpus")


async def test_auto_walk_rereads_the_catalog_adopts_the_lost_create_and_tears_down(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    provider = make_provider(fake, max_out_of_stock=0)
    store, sink = RecordStore(tmp_path / "state"), RecordingSink()
    try:
        offers = await provider.search_offers(POLICY)
        assert [o.gpu_name for o in offers] == ["RTX A5000", "A40", "RTX 4090"]
        fake.no_capacity("NVIDIA RTX A5000")
        fake.set_stock("NVIDIA A40", "NONE")  # sold out meanwhile: the re-read sorts it last
        fake.lose_create_answer(500, gpu="NVIDIA GeForce RTX 4090")
        fake.running_without_ssh(3)
        walk = LeaseWalk(provider, store, sink, fast_settings(), run_id="r-0a1b2c3d")
        result = await walk.run(offers)
        assert result.ok, result.reason
        assert gpus_created(fake) == ["NVIDIA RTX A5000", "NVIDIA GeForce RTX 4090"]
        assert catalog_reads(fake) == 2
        assert [a.outcome for a in result.attempts] == [
            CreateAttemptOutcome.UNAVAILABLE, CreateAttemptOutcome.ADOPTED]
        (pod,) = fake.pods()
        assert result.lease is not None and result.lease.provider_id == pod["id"]
        assert [e.raw_state for e in sink.of(ev.LeasePending)][-1] == "RUNNING (no SSH yet)"
        fake.fail_delete(pod["id"], 1)
        ok = await teardown(provider, store, walk.run_id, pod["id"], sink, fast_settings())
        assert ok and fake.pods() == []
        text = "".join(p.read_text() for p in (tmp_path / "state").rglob("*.json"))
        assert fake.api_key not in text and text
    finally:
        await provider.aclose()


async def test_the_users_order_is_walked_once_each_and_402_stops(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    provider = make_provider(fake, gpu_types=("NVIDIA A40", "NVIDIA RTX A5000"))
    store, sink = RecordStore(tmp_path / "state"), RecordingSink()
    try:
        offers = await provider.search_offers(POLICY)
        fake.no_capacity("NVIDIA A40")
        fake.forbid_pool("NVIDIA RTX A5000")
        walk = LeaseWalk(provider, store, sink, fast_settings(), run_id="r-00000001")
        result = await walk.run(offers)
        assert result.failure is WalkFailure.EXHAUSTED
        assert gpus_created(fake) == ["NVIDIA A40", "NVIDIA RTX A5000"]
        assert catalog_reads(fake) == 1, "a list in the user's order is not re-sorted"
        fake.balance = 0
        walk = LeaseWalk(provider, store, sink, fast_settings(), run_id="r-00000002")
        result = await walk.run(offers[:1] + [o for o in offers if "4090" in o.gpu_name])
        assert result.failure is WalkFailure.NO_CREDITS
        assert len(fake.create_requests()) == 3 and fake.pods() == []
    finally:
        await provider.aclose()


async def test_a_pod_that_never_gets_ssh_is_deleted_and_the_next_type_tried(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    provider = make_provider(fake)
    store, sink = RecordStore(tmp_path / "state"), RecordingSink()
    try:
        offers = await provider.search_offers(POLICY)
        fake.running_without_ssh(10_000)
        walk = LeaseWalk(provider, store, sink, fast_settings(ready_timeout_s=0.2),
                         run_id="r-00000003")
        result = await walk.run(offers[:2])
        assert result.failure is WalkFailure.EXHAUSTED
        # Past the two handed over: every type the catalog gives (seed 003).
        tried = len(result.attempts)
        assert tried == len(offers) and len(fake.create_requests()) == tried
        assert fake.pods() == [] and len(sink.of(ev.LeaseNotReady)) == tried
    finally:
        await provider.aclose()


async def test_the_host_key_is_pinned_in_the_record_before_the_create_is_sent(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    """The public half pinned, the secret holding the private half recorded with its id,
    both on disk before the create arrives; the create's env holds only the reference."""
    provider = make_provider(fake)
    store, sink = RecordStore(tmp_path / "state"), RecordingSink()
    on_disk: list[str | None] = []
    secrets_on_disk: list[list[tuple[str, str | None, SecretState]]] = []

    def look(body: dict[str, object]) -> None:
        record = store.load("r-00000004")
        (lease,) = [x for x in record.leases if x.label == body["name"]]
        on_disk.append(lease.host_key)
        secrets_on_disk.append([(s.name, s.secret_id, s.state) for s in record.secrets])

    fake.on_create = look
    try:
        offers = await provider.search_offers(POLICY)
        walk = LeaseWalk(provider, store, sink, fast_settings(), run_id="r-00000004")
        result = await walk.run(offers[:1])
        assert result.ok and result.lease is not None
        (sent,) = fake.create_requests()
        (secret,) = fake.secrets()
        (value,) = fake.secret_values()
        assert sent.body["env"][HOST_KEY_ENV] == "{{ RUNPOD_SECRET_" + secret["name"] + " }}"
        private = asyncssh.import_private_key(base64.b64decode(value))
        public = private.export_public_key().decode().strip()
        assert on_disk == [public] and result.lease.host_key == public
        assert secrets_on_disk == [[(secret["name"], secret["id"], SecretState.STORED)]]
        text = "".join(p.read_text() for p in (tmp_path / "state").rglob("*.json"))
        assert value not in text and "PRIVATE KEY" not in text
        assert all(value not in str(e) for e in sink.events)
        await teardown(provider, store, walk.run_id, result.lease.provider_id or "", sink,
                       fast_settings())
        assert fake.pods() == [] and fake.secrets() == []
        assert fake.deleted_secrets == [secret["id"]]
    finally:
        await provider.aclose()


async def test_a_failed_catalog_reread_keeps_the_order_left(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    provider = make_provider(fake)
    try:
        offers = await provider.search_offers(POLICY)
        fake.script("catalog", Fault(status=503))
        kept = await provider.reorder_offers(offers[1:], offers[:1])
        assert kept == offers[1:]
    finally:
        await provider.aclose()


async def test_the_walk_says_its_order_after_a_catalog_reread_and_when_it_fails(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    """Seed 003: after an unplaceable type the order left is said; a failed re-read says
    so, and the GPU types left keep their order."""
    provider = make_provider(fake, max_out_of_stock=0)
    store, sink = RecordStore(tmp_path / "state"), RecordingSink()
    try:
        offers = await provider.search_offers(POLICY)
        fake.no_capacity("NVIDIA RTX A5000")
        fake.script("catalog", Fault(status=503))
        walk = LeaseWalk(provider, store, sink, fast_settings(), run_id="r-0a1b2c3e")
        result = await walk.run(offers)
        assert result.ok, result.reason
        (said,) = sink.of(ev.WalkReordered)
        assert said.offers == tuple(f"runpod:{o.offer_id}" for o in offers[1:])
        assert "could not be read again" in said.reason and "keep their order" in said.reason
        assert result.lease is not None
        await teardown(provider, store, walk.run_id, result.lease.provider_id or "", sink,
                       fast_settings())
        assert fake.pods() == []
    finally:
        await provider.aclose()
