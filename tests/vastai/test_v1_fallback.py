"""Vast's v0 single-instance routes retired (410 `deprecated_endpoint`, peers 2026-12-07
V6/V7): the dashboard's read and destroy go on through v1 (the CLI's v1 list, filtered on
the id; the same DELETE on /api/v1/instances/{id}/), and a 410 is never read as "gone"."""

from __future__ import annotations

import json

import pytest

from mvp_tui.lease.teardown import delete_confirmed
from mvp_tui.providers.base import (
    CreateRequest,
    DestroyOutcome,
    LeaseState,
    ProviderError,
    SelectionPolicy,
)
from mvp_tui.providers.vastai.client import VastAiProvider
from tests.fakes.vastai_server import FakeVast, Fault
from tests.lease.conftest import fast_settings


async def _lease(fake: FakeVast, provider: VastAiProvider) -> str:
    fake.add_offer()
    (offer,) = await provider.search_offers(SelectionPolicy())
    result = await provider.create(offer, CreateRequest("mvp-r1-n1", "img:1", {}, 20))
    assert result.provider_id is not None
    return result.provider_id


def _calls(fake: FakeVast, method: str, instance: str) -> list[str]:
    """The paths of `method` calls about `instance`, in order (the v1 list by its filter)."""
    out = []
    for r in fake.requests:
        if r.method != method:
            continue
        if r.path == "/api/v1/instances/":
            if json.loads(r.query.get("select_filters") or "{}") == {"id": {"eq": int(instance)}}:
                out.append(r.path)
        elif r.path.rstrip("/").endswith(f"/{instance}"):
            out.append(r.path)
    return out


async def test_a_410_on_the_v0_read_is_answered_from_the_v1_list(
    fake: FakeVast, provider: VastAiProvider
) -> None:
    lease = await _lease(fake, provider)
    fake.retired_v0 = {"show"}

    status = await provider.get(lease)
    while status.state is LeaseState.PENDING:
        status = await provider.get(lease)

    assert status.state is LeaseState.RUNNING and status.provider_id == lease
    assert status.label == "mvp-r1-n1" and status.ssh is not None
    calls = _calls(fake, "GET", lease)
    assert calls[:2] == [f"/api/v0/instances/{lease}/", "/api/v1/instances/"]
    # Destroyed: the v1 list no longer shows it, and that (not the 410) is "gone".
    assert (await provider.destroy(lease)).outcome is DestroyOutcome.ACCEPTED
    gone = await provider.get(lease)
    assert gone.state is LeaseState.GONE and "v1" in gone.detail


async def test_a_410_is_never_gone_when_v1_cannot_say(
    fake: FakeVast, provider: VastAiProvider
) -> None:
    """The v1 list failing too: the read raises (the lease stays open, fail closed); a
    retired read never closes a lease that may still bill."""
    lease = await _lease(fake, provider)
    fake.retired_v0 = {"show"}
    fake.script("list", Fault(status=400, body={"success": False, "error": "invalid_request",
                                                "msg": "Error in query parameters"}))
    with pytest.raises(ProviderError, match="v1 list"):
        await provider.get(lease)
    assert fake.billing() != []


async def test_a_410_on_the_v0_destroy_destroys_on_v1_and_the_teardown_confirms_it(
    fake: FakeVast, provider: VastAiProvider
) -> None:
    lease = await _lease(fake, provider)
    fake.retired_v0 = {"show", "destroy"}

    check = await delete_confirmed(provider, lease, fast_settings())

    assert check.confirmed, check.reason
    assert fake.billing() == [] and fake.destroyed_by(int(lease)) == "account"
    # What `check --live` reports as the routes a real account answered.
    assert provider.v0_retired == {"read", "delete"}
    assert _calls(fake, "DELETE", lease) == [f"/api/v0/instances/{lease}/",
                                             f"/api/v1/instances/{lease}/"]


async def test_a_refused_v1_destroy_fails_and_names_both_routes(
    fake: FakeVast, provider: VastAiProvider
) -> None:
    """v1 refusing the destroy as well: FAILED (retried, never gone), with both answers."""
    lease = await _lease(fake, provider)
    fake.retired_v0 = {"destroy"}
    fake.script("destroy", Fault(status=410), Fault(status=404, body={
        "success": False, "error": "not_found", "msg": "no such route"}))

    result = await provider.destroy(lease)

    assert result.outcome is DestroyOutcome.FAILED
    assert "v0 destroy: HTTP 410" in result.detail and "v1 destroy: HTTP 404" in result.detail
    assert fake.billing() != []
