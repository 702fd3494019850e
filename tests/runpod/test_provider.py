"""RunPodProvider against the fake over real HTTP: offers from the catalog, every create
answer classified, readiness, listing by name, confirmed deletes, account SSH keys."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from mvp_tui.config import ConfigError
from mvp_tui.config.loader import ConfigPaths, load_config
from mvp_tui.engine.provider_factory import build_provider
from mvp_tui.lease.host_journal import host_key, hosts_of
from mvp_tui.providers.base import (
    CreateRequest,
    DestroyOutcome,
    LeaseState,
    Outcome,
    ProviderError,
    SelectionPolicy,
)
from mvp_tui.providers.runpod.boot import BOOT_SCRIPT, HOST_KEY_ENV, pod_command
from mvp_tui.providers.runpod.client import USER_AGENT, RunPodProvider, RunPodSettings, ssh_banner
from tests.e2e.test_vast_headless import cli
from tests.fakes.runpod_server import FakeRunPod, Fault
from tests.runpod.conftest import Sleeps, make_provider

REQUEST = CreateRequest(
    label="mvp-r-abc-1-1",
    image="img:1",
    env={"MVP_RUN_ID": "r-abc"},
    disk_gb=20,
    ssh_public_key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB k",
)
POLICY = SelectionPolicy(require_verified=False)


async def test_auto_offers_are_the_types_over_the_floor_cheapest_first(
    fake: FakeRunPod, provider: RunPodProvider
) -> None:
    fake.add_gpu("NVIDIA RTX A4000", memory=16, secure_price=0.17)
    fake.add_gpu("NVIDIA RTX 2000 Ada", memory=16, secure_price=0.12, stock="NONE")
    fake.add_gpu("NVIDIA L4", memory=24, secure_price=0.43, stock="NONE")  # dearer, out: skipped
    fake.add_gpu("NVIDIA RTX A2000", memory=6, secure_price=0.05)  # under the floor
    offers = await provider.search_offers(POLICY)
    assert [o.offer_id for o in offers] == [
        "SECURE:NVIDIA RTX 2000 Ada",  # out of stock, but cheaper than any in stock: tried first
        "SECURE:NVIDIA RTX A4000", "SECURE:NVIDIA RTX A5000", "SECURE:NVIDIA A40",
        "SECURE:NVIDIA GeForce RTX 4090",
    ]
    first = offers[1]
    assert first.provider == "runpod" and first.gpu_ram_mib == 16 * 1024
    assert first.price_per_hour == pytest.approx(0.17) and "stock high" in first.location
    assert first.stock == "high"  # the board's stock column reads this field
    assert "stock none" in offers[0].location and "stock low" in offers[3].location
    assert any("NVIDIA L4: out of stock" in s for s in provider.last_skipped)
    assert any("RTX A2000: 6 GB VRAM" in s for s in provider.last_skipped)


async def test_one_offer_per_type_and_cloud_and_the_user_order_wins(fake: FakeRunPod) -> None:
    both = make_provider(fake, cloud="ALL", gpu_count=2)
    ordered = make_provider(fake, gpu_types=("NVIDIA A40", "RTX 4090", "NVIDIA H200"))
    try:
        offers = await both.search_offers(POLICY)
        assert [o.offer_id for o in offers][:2] == [
            "COMMUNITY:NVIDIA RTX A5000", "SECURE:NVIDIA RTX A5000"]
        assert offers[0].num_gpus == 2 and offers[0].price_per_hour == pytest.approx(0.32)
        picked = await ordered.search_offers(POLICY)
        assert [o.offer_id for o in picked] == [
            "SECURE:NVIDIA A40",
            "SECURE:NVIDIA GeForce RTX 4090",
        ]
        assert any("NVIDIA H200: not in the catalog" in s for s in ordered.last_skipped)
        capped = await ordered.search_offers(SelectionPolicy(max_price_per_hour=0.5))
        assert [o.offer_id for o in capped] == ["SECURE:NVIDIA A40"]
    finally:
        await both.aclose()
        await ordered.aclose()


async def test_create_sends_the_v2_body_with_our_user_agent_and_bearer_only(
    fake: FakeRunPod, provider: RunPodProvider
) -> None:
    offer = (await provider.search_offers(POLICY))[0]
    result = await provider.create(offer, REQUEST)
    assert result.outcome is Outcome.CREATED and result.provider_id
    (sent,) = fake.create_requests()
    assert sent.headers["user-agent"] == USER_AGENT and USER_AGENT.startswith("mvp-tui/")
    assert sent.headers["authorization"] == f"Bearer {fake.api_key}"
    # A CUDA floor by default: the CUDA image must not land on an older driver.
    assert sent.body["gpu"] == {"id": "NVIDIA RTX A5000", "count": 1, "minCudaVersion": "12.8"}
    assert sent.body["ports"] == ["22/tcp"] and sent.body["cloud"] == "SECURE"
    assert sent.body["name"] == "mvp-r-abc-1-1" and sent.body["env"]["PUBLIC_KEY"].startswith(
        "ssh-"
    )
    assert all(fake.api_key not in r.path and fake.api_key not in str(r.query)
               for r in fake.requests)
    # The start command rides in the document's `args` (RunPod's JSON entrypoint form), not
    # in a field CreatePodRequest lacks; the fake's pod runs exactly that.
    assert "cmd" not in sent.body
    assert json.loads(sent.body["args"]) == {"entrypoint": ["/bin/sh", "-c"], "cmd": [BOOT_SCRIPT]}
    assert fake.cmd_of(result.provider_id) == pod_command()
    assert "mvp_boot_guard" in BOOT_SCRIPT and HOST_KEY_ENV in BOOT_SCRIPT


async def test_offers_name_their_data_centers_and_a_pod_where_it_landed(
    fake: FakeRunPod, provider: RunPodProvider
) -> None:
    # The host memory's key: `<data center>/<GPU type>` (lease/host_journal.host_key).
    offer = (await provider.search_offers(POLICY))[0]
    assert offer.data_centers == ("US-TX-3", "EU-RO-1")
    assert hosts_of(offer)[:2] == ("US-TX-3/NVIDIA RTX A5000", "EU-RO-1/NVIDIA RTX A5000")
    created = await provider.create(offer, REQUEST)
    assert created.provider_id is not None
    status = await provider.get(created.provider_id)
    assert status.data_center == "US-TX-3"
    assert host_key(offer, data_center=status.data_center) == "US-TX-3/NVIDIA RTX A5000"


@pytest.mark.parametrize(
    ("script", "outcome"),
    [
        ("capacity", Outcome.UNAVAILABLE),
        ("pool", Outcome.FORBIDDEN),
        ("balance", Outcome.NO_CREDITS),
        (
            Fault(
                status=400,
                body={
                    "title": "Bad Request",
                    "status": 400,
                    "detail": "minCudaVersion and allowedCudaVersions",
                },
            ),
            Outcome.REJECTED,
        ),
        (Fault(status=422), Outcome.REJECTED),
        (Fault(status=401), Outcome.AUTH_FAILED),
        (Fault(status=500, perform=True), Outcome.AMBIGUOUS),
        (Fault(status=504), Outcome.AMBIGUOUS),
        (Fault(drop=True, perform=True), Outcome.AMBIGUOUS),
    ],
)
async def test_every_create_answer_is_classified(
    fake: FakeRunPod, provider: RunPodProvider, script: object, outcome: Outcome
) -> None:
    gpu = "NVIDIA RTX A5000"
    if script == "capacity":
        fake.no_capacity(gpu)
    elif script == "pool":
        fake.forbid_pool(gpu)
    elif script == "balance":
        fake.balance = 0
    else:
        assert isinstance(script, Fault)
        fake.script("create", script)
    offer = (await provider.search_offers(POLICY))[0]
    result = await provider.create(offer, REQUEST)
    assert result.outcome is outcome, result
    assert fake.api_key not in result.detail
    assert len(fake.create_requests()) == 1, "a create is never sent twice"


async def test_429_is_waited_out_per_retry_after_then_sent_again(
    fake: FakeRunPod, provider: RunPodProvider, sleeps: Sleeps
) -> None:
    offer = (await provider.search_offers(POLICY))[0]
    fake.rate_limit("create", 2, retry_after=3)
    result = await provider.create(offer, REQUEST)
    assert result.outcome is Outcome.CREATED
    assert sleeps.waits == [3.0, 3.0] and len(fake.answers(429)) == 2
    fake.rate_limit("create", 9, retry_after=1)
    with pytest.raises(ProviderError) as refused:
        await provider.create(offer, REQUEST)
    assert refused.value.http_status == 429 and len(fake.pods()) == 1


async def test_running_is_not_ready_until_the_direct_endpoint_shows(
    fake: FakeRunPod, provider: RunPodProvider
) -> None:
    fake.running_without_ssh(2)
    offer = (await provider.search_offers(POLICY))[0]
    pod_id = (await provider.create(offer, REQUEST)).provider_id
    assert pod_id
    states = [(s.state, s.raw_state, s.ssh) for s in
              [await provider.get(pod_id) for _ in range(4)]]
    assert [s[0] for s in states] == [LeaseState.PENDING] * 3 + [LeaseState.RUNNING]
    assert states[1][1] == "RUNNING (no SSH yet)"
    endpoint = states[3][2]
    assert endpoint is not None and endpoint.via == "direct" and endpoint.user == "root"


async def test_the_banner_probe_holds_ready_until_sshd_answers(fake: FakeRunPod) -> None:
    async def sshd(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"SSH-2.0-OpenSSH_9.6\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(sshd, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    provider = make_provider(fake, probe_ssh_banner=True)
    try:
        fake.ssh_endpoint = ("127.0.0.1", port)
        offer = (await provider.search_offers(POLICY))[0]
        pod_id = (await provider.create(offer, REQUEST)).provider_id
        assert pod_id
        await provider.get(pod_id)
        assert (await provider.get(pod_id)).state is LeaseState.RUNNING
        server.close()
        await server.wait_closed()
        status = await provider.get(pod_id)
        assert status.state is LeaseState.PENDING and "sshd not answering" in status.raw_state
        assert not await ssh_banner("127.0.0.1", port, 0.5)
    finally:
        await provider.aclose()


async def test_list_by_label_reads_every_pod_and_keeps_the_prefix(
    fake: FakeRunPod, provider: RunPodProvider
) -> None:
    fake.add_pod("mvp-r-abc-1-1")
    fake.add_pod("mvp-r-abc-1-2")
    fake.add_pod("mvp-r-abcd-1-1")
    fake.add_pod("someone-else")
    found = await provider.list_by_label("mvp-r-abc-1-")
    assert sorted(s.label or "" for s in found) == ["mvp-r-abc-1-1", "mvp-r-abc-1-2"]


async def test_delete_is_confirmed_by_404_and_absence_from_the_list(
    fake: FakeRunPod, provider: RunPodProvider
) -> None:
    pod_id = fake.add_pod("mvp-r-abc-1-1")
    fake.fail_delete(pod_id, 1)
    assert (await provider.destroy(pod_id)).outcome is DestroyOutcome.FAILED
    fake.linger_after_delete(1)
    assert (await provider.destroy(pod_id)).outcome is DestroyOutcome.ACCEPTED
    assert (await provider.get(pod_id)).state is LeaseState.RUNNING  # the API still shows it
    status = await provider.get(pod_id)
    assert status.state is LeaseState.GONE
    assert (await provider.destroy(pod_id)).outcome is DestroyOutcome.GONE
    assert fake.pods() == []


async def test_an_html_404_is_not_gone(fake: FakeRunPod, provider: RunPodProvider) -> None:
    pod_id = fake.add_pod("mvp-r-abc-1-1")
    fake.script("get", Fault(status=404, body="<html>nginx</html>", content_type="text/html"))
    with pytest.raises(ProviderError):
        await provider.get(pod_id)
    fake.script("delete", Fault(status=404, body="<html>nginx</html>", content_type="text/html"))
    assert (await provider.destroy(pod_id)).outcome is DestroyOutcome.FAILED


async def test_account_ssh_key_is_registered_once_keeping_the_others(
    fake: FakeRunPod, provider: RunPodProvider, public_key: str
) -> None:
    other = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOther me@laptop"
    fake.account_keys = [other]
    assert await provider.ensure_ssh_key(public_key) is True
    assert fake.account_keys == [other, public_key]
    assert await provider.ensure_ssh_key(public_key + " renamed") is False
    with pytest.raises(ProviderError):
        label = "OPENSSH PRIVATE KEY"  # the header alone: no key-shaped literal in the repo
        await provider.ensure_ssh_key(f"-----BEGIN {label}-----")


async def test_billing_has_the_providers_figure(fake: FakeRunPod, provider: RunPodProvider) -> None:
    pod_id = fake.add_pod("mvp-r-abc-1-1")
    assert await provider.billed_usd(pod_id) == pytest.approx(0.0027)
    assert await provider.billed_usd("unknown") is None


def test_the_retired_v1_url_and_an_empty_key_are_refused() -> None:
    with pytest.raises(ProviderError, match="retired"):
        RunPodProvider(api_key="k" * 20, api_url="https://rest.runpod.io/v1")
    with pytest.raises(ProviderError, match="no RunPod API key"):
        RunPodProvider(api_key=" ")


def _config(tmp_path: Path, env: dict[str, str]):  # type: ignore[no-untyped-def]
    return load_config(env=env, paths=ConfigPaths(default=tmp_path / "none.toml"))


async def test_build_provider_takes_runpod_keys_from_the_config(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    env = {"MVP_NODE_PROVIDER": "runpod", "RUNPOD_API_KEY": fake.api_key,
           "MVP_RUNPOD_API_URL": fake.api_url, "MVP_RUNPOD_GPU_TYPES": "NVIDIA A40",
           "MVP_RUNPOD_CLOUD": "COMMUNITY"}
    provider = build_provider(_config(tmp_path, env))
    assert isinstance(provider, RunPodProvider)
    try:
        assert provider.settings.gpu_types == ("NVIDIA A40",)
        offers = await provider.search_offers(POLICY)
        assert [o.offer_id for o in offers] == ["COMMUNITY:NVIDIA A40"]
    finally:
        await provider.aclose()
    with pytest.raises(ConfigError, match="RUNPOD_API_KEY"):
        build_provider(_config(tmp_path, {"MVP_NODE_PROVIDER": "runpod"}))
    with pytest.raises(ConfigError, match="retired"):
        build_provider(
            _config(tmp_path, {**env, "MVP_RUNPOD_API_URL": "https://rest.runpod.io/v1"})
        )


async def test_a_paged_pod_list_is_followed_to_its_end(
    fake: FakeRunPod, provider: RunPodProvider
) -> None:
    for n in range(5):
        fake.add_pod(f"mvp-r-abc-1-{n + 1}")
    fake.page_size = 2
    found = await provider.list_by_label("mvp-r-abc-1-")
    assert len(found) == 5
    assert [r.query.get("cursor") for r in fake.requests if r.path == "/v2/pods"] == [
        None, "2", "4"]


async def test_cloudflare_403_stops_with_its_own_reason_not_as_a_pool_refusal(
    fake: FakeRunPod, provider: RunPodProvider
) -> None:
    offer = (await provider.search_offers(POLICY))[0]
    fake.script("create", Fault(status=403, body="error code: 1010", content_type="text/plain"))
    result = await provider.create(offer, REQUEST)
    assert result.outcome is Outcome.REJECTED and "1010" in result.detail
    assert "User-Agent" in result.detail


async def test_a_create_that_times_out_after_sending_is_ambiguous(fake: FakeRunPod) -> None:
    provider = RunPodProvider(
        api_key=fake.api_key,
        api_url=fake.api_url,
        settings=RunPodSettings(probe_ssh_banner=False),
        create_timeout_s=0.3,
    )
    try:
        offer = (await provider.search_offers(POLICY))[0]
        fake.script("create", Fault(perform=True, delay_s=1.0, drop=True))
        result = await provider.create(offer, REQUEST)
        assert result.outcome is Outcome.AMBIGUOUS and "no answer within" in result.detail
        assert len(fake.pods()) == 1  # it exists: the walk finds it by its name
    finally:
        await provider.aclose()


def test_headless_with_no_matching_runpod_offer_names_runpod_s_keys(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    fake.add_gpu("NVIDIA RTX 2000 Ada", memory=16, secure_price=0.12)
    env = {"MVP_NODE_PROVIDER": "runpod", "RUNPOD_API_KEY": fake.api_key,
           "MVP_RUNPOD_API_URL": fake.api_url, "MVP_RUNPOD_MIN_VRAM_GB": "80",
           "MVP_STATE_DIR": str(tmp_path / "state"), "HOME": str(tmp_path)}
    done = cli("up", "--headless", "--yes", env=env)
    assert done.returncode == 1, done.stderr
    assert "no runpod offer matches" in done.stderr and "[runpod] gpu_types" in done.stderr
    assert "[vastai]" not in done.stderr and fake.create_requests() == []


def test_a_cuda_floor_is_sent_unless_the_user_sets_another(tmp_path: Path) -> None:
    env = {"MVP_NODE_PROVIDER": "runpod", "RUNPOD_API_KEY": "rp-key-0123456789"}
    provider = build_provider(_config(tmp_path, env))
    assert isinstance(provider, RunPodProvider)
    assert provider.settings.min_cuda_version == "12.8"
    mine = build_provider(_config(tmp_path, {**env, "MVP_RUNPOD_MIN_CUDA_VERSION": "12.4"}))
    assert isinstance(mine, RunPodProvider) and mine.settings.min_cuda_version == "12.4"
