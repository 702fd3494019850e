"""get and list_by_label against FakeVast: states, SSH endpoints, v1 pagination."""

from __future__ import annotations

from typing import Any

import pytest

from mvp_tui.providers.base import (
    CreateRequest,
    LeaseState,
    ProviderError,
    SelectionPolicy,
    SshEndpoint,
)
from mvp_tui.providers.vastai.client import VastAiProvider
from tests.fakes.vastai_server import FakeVast, Fault


async def _lease(fake: FakeVast, provider: VastAiProvider, label: str = "mvp-r1-n1") -> str:
    offer_id = fake.add_offer()
    offers = await provider.search_offers(SelectionPolicy())
    offer = next(o for o in offers if o.offer_id == str(offer_id))
    result = await provider.create(offer, CreateRequest(label, "img:1", {}, 20))
    assert result.provider_id is not None
    return result.provider_id


async def test_loading_then_running_with_direct_ssh(
    fake: FakeVast, provider: VastAiProvider
) -> None:
    lease = await _lease(fake, provider)
    first = await provider.get(lease)
    second = await provider.get(lease)

    assert (first.state, first.raw_state, first.ssh) == (LeaseState.PENDING, "loading", None)
    assert second.state is LeaseState.RUNNING
    assert second.label == "mvp-r1-n1"
    # The instance's own dph_total: the offer's 0.3521 (at Vast's default 8 GB) with the
    # 20 GB disk it was created with priced in (0.15 $/GB/month ÷ 730 h).
    assert second.price_per_hour == pytest.approx(0.3521 + 0.15 * (20 - 8) / 730)
    assert second.started_at is not None
    row = fake.instances()[0]
    host_port = int(row["ports"]["22/tcp"][0]["HostPort"])
    assert second.ssh == SshEndpoint("127.0.0.1", host_port, "root", "direct")
    assert host_port != row["ssh_port"]  # direct port, never the proxy port on the direct IP
    (request,) = [r for r in fake.requests if r.path == f"/api/v0/instances/{lease}/"][:1]
    assert request.query == {"owner": "me"}


async def test_proxy_endpoint_when_no_direct_port(fake: FakeVast, provider: VastAiProvider) -> None:
    fake.ssh_endpoint = ("127.0.0.1", 2222, False)
    fake.loading_polls = 0
    lease = await _lease(fake, provider)
    status = await provider.get(lease)
    assert status.state is LeaseState.RUNNING
    assert status.ssh == SshEndpoint("127.0.0.1", 2222, "root", "proxy")


async def test_test_controlled_direct_endpoint(fake: FakeVast) -> None:
    """`fake.ssh_endpoint` lets the SSH work point a lease at a real local sshd."""
    fake.ssh_endpoint = ("127.0.0.1", 32022, True)
    fake.loading_polls = 0
    client = VastAiProvider(api_key=fake.api_key, api_url=fake.url, ssh_user="ubuntu")
    try:
        lease = await _lease(fake, client)
        status = await client.get(lease)
    finally:
        await client.aclose()
    assert status.ssh == SshEndpoint("127.0.0.1", 32022, "ubuntu", "direct")


@pytest.mark.parametrize(
    "patch",
    [
        {"ssh_host": "unknown", "ports": None},
        {"ssh_host": "", "ports": None},
        {"ssh_port": 0, "ports": None},
        {"ssh_port": None, "ports": {}},
        {"ssh_host": "127.0.0.1 ; rm -rf /", "ports": None},
    ],
)
async def test_unusable_endpoint_is_not_ready(
    fake: FakeVast, provider: VastAiProvider, patch: dict[str, Any]
) -> None:
    fake.loading_polls = 0
    lease = await _lease(fake, provider)
    fake.patch_instance(int(lease), **patch)
    status = await provider.get(lease)
    assert status.state is LeaseState.RUNNING
    assert status.ssh is None


async def test_direct_port_zero_falls_back_to_proxy(
    fake: FakeVast, provider: VastAiProvider
) -> None:
    fake.loading_polls = 0
    lease = await _lease(fake, provider)
    fake.patch_instance(
        int(lease),
        public_ipaddr=" 203.0.113.5\n",
        ports={"22/tcp": [{"HostIp": "0.0.0.0", "HostPort": "0"}]},
        ssh_host="127.0.0.1",
        ssh_port=12345,
    )
    status = await provider.get(lease)
    assert status.ssh == SshEndpoint("127.0.0.1", 12345, "root", "proxy")


async def test_public_ip_whitespace_is_stripped(fake: FakeVast, provider: VastAiProvider) -> None:
    fake.loading_polls = 0
    lease = await _lease(fake, provider)
    fake.patch_instance(
        int(lease),
        public_ipaddr=" 127.0.0.1 \n",
        ports={"22/tcp": [{"HostIp": "0.0.0.0", "HostPort": "40022"}]},
    )
    status = await provider.get(lease)
    assert status.ssh == SshEndpoint("127.0.0.1", 40022, "root", "direct")


@pytest.mark.parametrize(
    ("patch", "state"),
    [
        ({"actual_status": None}, LeaseState.PENDING),
        ({"actual_status": "created"}, LeaseState.PENDING),
        ({"actual_status": "loading"}, LeaseState.PENDING),
        ({"actual_status": "unknown"}, LeaseState.PENDING),
        ({"actual_status": "brand_new_state"}, LeaseState.PENDING),
        ({"actual_status": "running"}, LeaseState.RUNNING),
        ({"actual_status": "stopped"}, LeaseState.STOPPED),
        ({"actual_status": "frozen"}, LeaseState.STOPPED),
        ({"actual_status": "exited"}, LeaseState.DEAD),
        ({"actual_status": "offline"}, LeaseState.DEAD),
        (
            {"actual_status": "created", "status_msg": ": OCI runtime create failed: x"},
            LeaseState.DEAD,
        ),
        (
            {"actual_status": "loading", "status_msg": "Error response from daemon"},
            LeaseState.DEAD,
        ),
        ({"actual_status": "loading", "intended_status": "stopped"}, LeaseState.STOPPED),
    ],
)
async def test_state_mapping(
    fake: FakeVast, provider: VastAiProvider, patch: dict[str, Any], state: LeaseState
) -> None:
    lease = await _lease(fake, provider)
    fake.patch_instance(int(lease), **patch)
    status = await provider.get(lease)
    assert status.state is state
    if state is not LeaseState.RUNNING:
        assert status.ssh is None


async def test_die_on_start_reports_dead(fake: FakeVast, provider: VastAiProvider) -> None:
    offer_id = fake.add_offer()
    fake.die_on_start(offer_id)
    fake.loading_polls = 0
    offers = await provider.search_offers(SelectionPolicy())
    offer = next(o for o in offers if o.offer_id == str(offer_id))
    result = await provider.create(offer, CreateRequest("mvp-x", "img", {}, 20))
    assert result.provider_id is not None
    status = await provider.get(result.provider_id)
    assert (status.state, status.raw_state) == (LeaseState.DEAD, "exited")
    assert "OCI runtime create failed" in status.detail


async def test_stick_loading_never_runs(fake: FakeVast, provider: VastAiProvider) -> None:
    offer_id = fake.add_offer()
    fake.stick_loading(offer_id)
    offers = await provider.search_offers(SelectionPolicy())
    offer = next(o for o in offers if o.offer_id == str(offer_id))
    result = await provider.create(offer, CreateRequest("mvp-x", "img", {}, 20))
    assert result.provider_id is not None
    states = {(await provider.get(result.provider_id)).state for _ in range(5)}
    assert states == {LeaseState.PENDING}


async def test_destroyed_instance_is_gone(fake: FakeVast, provider: VastAiProvider) -> None:
    lease = await _lease(fake, provider)
    await provider.destroy(lease)
    status = await provider.get(lease)
    assert (status.state, status.provider_id) == (LeaseState.GONE, lease)
    assert (await provider.get("999999")).state is LeaseState.GONE


async def test_get_404_no_such_instance_is_gone(fake: FakeVast, provider: VastAiProvider) -> None:
    fake.script("show", Fault(status=404))
    assert (await provider.get("7001")).state is LeaseState.GONE


async def test_get_html_404_is_not_gone(fake: FakeVast, provider: VastAiProvider) -> None:
    """A 404 page from something that is not Vast must not close a lease that bills."""
    fake.script("show", Fault(status=404, body="<html>Not Found</html>"))
    with pytest.raises(ProviderError) as info:
        await provider.get("7001")
    assert info.value.http_status == 404


async def test_get_errors_raise_provider_error(fake: FakeVast, provider: VastAiProvider) -> None:
    fake.script("show", Fault(status=500), Fault(status=200, body="garbage"), Fault(drop=True))
    for expected in ("HTTP 500", "HTTP 200", "RemoteProtocolError"):
        with pytest.raises(ProviderError) as info:
            await provider.get("7001")
        assert expected in str(info.value)


async def test_get_rejects_a_non_numeric_id(provider: VastAiProvider) -> None:
    with pytest.raises(ProviderError) as info:
        await provider.get("../users/current")
    assert "not a Vast.ai id" in str(info.value)


async def test_list_by_label_pages_through_the_v1_list(
    fake: FakeVast, provider: VastAiProvider
) -> None:
    ours = [fake.add_instance(label=f"mvp-r1-n{n}") for n in range(30)]
    fake.add_instance(label="other-job")
    fake.add_instance(label=None)
    ours.append(fake.add_instance(label="mvp-r1-late"))

    found = await provider.list_by_label("mvp-r1-")

    assert sorted(int(s.provider_id) for s in found) == sorted(ours)
    assert all(s.label is not None and s.label.startswith("mvp-r1-") for s in found)
    assert all(s.state is LeaseState.RUNNING for s in found)
    pages = [r for r in fake.requests if r.path == "/api/v1/instances/"]
    assert len(pages) == 2  # 33 instances, 25 a page
    assert all(r.query["limit"] == "25" for r in pages)
    assert "after_token" not in pages[0].query
    assert pages[1].query["after_token"]
    assert not any(r.path == "/api/v0/instances/" for r in fake.requests)  # the 410 one


async def test_list_by_label_sees_destroys(fake: FakeVast, provider: VastAiProvider) -> None:
    keep = fake.add_instance(label="mvp-a")
    gone = fake.add_instance(label="mvp-b")
    await provider.destroy(str(gone))
    found = await provider.list_by_label("mvp-")
    assert [s.provider_id for s in found] == [str(keep)]


async def test_list_errors_raise(fake: FakeVast, provider: VastAiProvider) -> None:
    fake.script("list", Fault(status=500))
    with pytest.raises(ProviderError) as info:
        await provider.list_by_label("mvp-")
    assert info.value.http_status == 500


async def test_list_repeating_token_stops(fake: FakeVast, provider: VastAiProvider) -> None:
    page = {"success": True, "instances": [], "next_token": "same"}
    fake.script("list", Fault(status=200, body=page), Fault(status=200, body=page))
    with pytest.raises(ProviderError) as info:
        await provider.list_by_label("mvp-")
    assert "repeated a page token" in str(info.value)


async def test_v0_list_is_deprecated_in_the_fake(fake: FakeVast) -> None:
    """The fake answers the old list like Vast does now, so nobody can lean on it."""
    import httpx

    async with httpx.AsyncClient(base_url=fake.url) as client:
        answer = await client.get(
            "/api/v0/instances/", headers={"Authorization": f"Bearer {fake.api_key}"}
        )
    assert answer.status_code == 410
    assert answer.json()["error"] == "deprecated_endpoint"
    assert answer.headers["content-type"] == "application/json"
