"""Seed 003 (`003_413a7f860c720e63.txt`, `provision` / `walk` / `no_capacity` /
`after_failure` / `ready`): the RunPod lease walk against the fake RunPod over HTTP.

- the walk covers every GPU type the catalog gives, not only the first five handed over;
- `dataCenterIds`: the catalog's pick for a type in stock, none for one out of stock;
- after ready the run's other pods are always swept (strays recorded first; one that cannot
  be confirmed deleted stays in the record); after a failed walk with an unclear create, the
  seed's warning;
- the seed's fixed failure texts, the provider's text kept as the detail.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mvp_tui.labels import attempt_label
from mvp_tui.lease import WalkFailure
from mvp_tui.lease import events as ev
from mvp_tui.lease.records import LeaseRecordState
from tests.fakes.runpod_server import CAPACITY_DETAIL, FakeRunPod, Fault
from tests.lease.conftest import TAG
from tests.seed.runpod_seed import (
    POLICY,
    SEVEN,
    gpus_created,
    provider_for,
    seeded_fake,
    walk_for,
)


@pytest.fixture
def fake() -> Iterator[FakeRunPod]:
    yield from seeded_fake()


@pytest.mark.parametrize("explicit", [False, True], ids=["auto", "explicit-list"])
async def test_the_walk_covers_every_gpu_type_not_only_the_first_five(
    fake: FakeRunPod, tmp_path: Path, explicit: bool
) -> None:
    """Seven types, the first six refuse with no capacity; the walk is handed the first
    five (`[lease] max_attempts` / `--max-offers` = 5) and still reaches the seventh, with
    `gpu_types = "auto"` (the catalog's order) or an explicit list (its own order, here the
    catalog's reversed)."""
    order = SEVEN[::-1] if explicit else SEVEN
    provider = provider_for(fake, gpu_types=order if explicit else ())
    try:
        offers = await provider.search_offers(POLICY)
        assert [o.offer_id.split(":", 1)[1] for o in offers] == list(order)
        for gpu in order[:6]:
            fake.no_capacity(gpu, times=5)
        walk, _store, sink = walk_for(provider, tmp_path, "r-5eed0001")
        result = await walk.run(offers[:5])
        assert result.ok, result.reason
        assert gpus_created(fake) == list(order)  # each type once, in the walk's order
        assert result.lease is not None and result.lease.offer_id.endswith(order[6])
        assert sink.of(ev.WalkReordered), "the re-read order is said on the Leases pane"
    finally:
        await provider.aclose()


async def test_data_center_ids_are_the_catalog_pick_and_none_for_a_type_out_of_stock(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    """A cheaper type reported out of stock is tried first (and created without a data
    center list); the type in stock is created with the data centers the catalog has it in."""
    fake.add_gpu("NVIDIA SEED CHEAP", memory=24, secure_price=0.05, max_community=0,
                 stock="NONE", data_centers=("EU-RO-1",))
    fake._gpus[SEVEN[0]]["_dcs"] = ["US-KS-2", "CA-MTL-1"]
    provider = provider_for(fake)
    try:
        offers = await provider.search_offers(POLICY)
        assert offers[0].offer_id == "SECURE:NVIDIA SEED CHEAP"
        walk, _store, _sink = walk_for(provider, tmp_path, "r-5eed0002")
        result = await walk.run(offers)
        assert result.ok, result.reason
        first, second = (r.body for r in fake.create_requests())
        assert first["gpu"]["id"] == "NVIDIA SEED CHEAP" and "dataCenterIds" not in first
        assert second["gpu"]["id"] == SEVEN[0]
        assert second["dataCenterIds"] == ["US-KS-2", "CA-MTL-1"]
        assert fake.pods()[0]["dataCenterId"] == "US-KS-2"
    finally:
        await provider.aclose()


async def test_after_ready_the_runs_other_pods_are_always_swept_and_strays_recorded(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    """No unclear create in this walk, yet two pods of the run's node are on the account (a
    crashed earlier walk of the run): both go once the lease is ready; the one whose delete
    cannot be confirmed stays in the record, named as possibly billing."""
    run_id = "r-5eed0003"
    stray = fake.add_pod(attempt_label("mvp", TAG, run_id, 1, 7), SEVEN[1])
    stuck = fake.add_pod(attempt_label("mvp", TAG, run_id, 1, 8), SEVEN[1])
    other_run = fake.add_pod(attempt_label("mvp", TAG, "r-0ther000", 1, 1), SEVEN[1])
    fake.fail_delete(stuck, 10**6)
    provider = provider_for(fake)
    try:
        offers = await provider.search_offers(POLICY)
        walk, store, sink = walk_for(provider, tmp_path, run_id)
        result = await walk.run(offers)
        assert result.ok and result.lease is not None
        live = {p["id"] for p in fake.pods()}
        assert stray not in live and stuck in live and other_run in live
        assert result.lease.provider_id in live
        (sweep,) = sink.of(ev.Sweep)
        assert sweep.listed and set(sweep.found) == {stray, stuck}
        assert sweep.destroyed == (stray,) and sweep.unconfirmed == (stuck,)
        record = store.load(run_id)
        kept = record.lease_by_id(stuck)
        assert kept is not None and kept.state is LeaseRecordState.DELETING
        gone = record.lease_by_id(stray)
        assert gone is not None and gone.state is LeaseRecordState.DELETED
        assert attempt_label("mvp", TAG, run_id, 1, 8) in result.may_bill
    finally:
        await provider.aclose()


async def test_a_failed_walk_with_an_unclear_create_sweeps_and_warns(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    """The first type's creates get no clear answer (and made no pod), the others have no
    capacity: the walk fails as no capacity, sweeps the node's pods, and says the seed's
    warning with the unclear attempts' names."""
    fake.script("create", Fault(status=502), Fault(status=502))
    for gpu in SEVEN[1:]:
        fake.no_capacity(gpu, times=5)
    provider = provider_for(fake)
    try:
        offers = await provider.search_offers(POLICY)
        walk, _store, sink = walk_for(provider, tmp_path, "r-5eed0004")
        result = await walk.run(offers)
        assert result.failure is WalkFailure.EXHAUSTED
        labels = [attempt_label("mvp", TAG, "r-5eed0004", 1, n) for n in (1, 2)]
        warning = (
            f"the create calls {', '.join(labels)} got no clear answer from RunPod: a pod may "
            "still appear; check `mvp-tui ls`"
        )
        assert result.reason.endswith(warning), result.reason
        (failed,) = sink.of(ev.WalkFailed)
        assert warning in failed.reason  # the Leases pane and the headless JSON line
        assert [s.listed for s in sink.of(ev.Sweep)] == [True]
    finally:
        await provider.aclose()


async def test_no_type_placed_is_the_seeds_message_with_runpods_text_as_detail(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    for gpu in SEVEN:
        fake.no_capacity(gpu, times=5)
    provider = provider_for(fake)
    try:
        offers = await provider.search_offers(POLICY)
        walk, _store, _sink = walk_for(provider, tmp_path, "r-5eed0005")
        result = await walk.run(offers)
        assert result.failure is WalkFailure.EXHAUSTED
        assert result.reason == f"no gpu_types entry could be placed: HTTP 400: {CAPACITY_DETAIL}"
    finally:
        await provider.aclose()


async def test_pods_never_ready_are_counted_with_the_last_ones_reason(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    """The cheapest type has no capacity, two others give pods that never get SSH, the rest
    have no capacity either: the seed's "N pods were created but never became ready, the
    last one because …; the other types could not be placed: …"."""
    fake.no_capacity(SEVEN[0], times=5)
    for gpu in SEVEN[3:]:
        fake.no_capacity(gpu, times=5)
    fake.running_without_ssh(10**6)
    provider = provider_for(fake)
    try:
        offers = await provider.search_offers(POLICY)
        walk, _store, sink = walk_for(provider, tmp_path, "r-5eed0006", ready_timeout_s=0.1)
        result = await walk.run(offers)
        assert result.failure is WalkFailure.EXHAUSTED
        last = sink.of(ev.LeaseNotReady)[-1].reason
        assert last.startswith("not running with an SSH endpoint after 0.1 s")
        assert result.reason == (
            "no gpu_types entry gave a ready pod: 2 pods were created but never became ready, "
            f"the last one because {last}; the other types could not be placed: "
            f"HTTP 400: {CAPACITY_DETAIL}"
        )
        assert fake.pods() == []
    finally:
        await provider.aclose()
