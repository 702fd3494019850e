"""The picker's hub client against the fake hub (real HTTP on loopback, its CDN a second
server): search, a repo's quants with sizes, split files as one, the shape from one header,
a gated repo's clear error, and HF_TOKEN sent to the hub only, never to the CDN."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mvp_tui.engine.hub_models import HubError, HubGated, HubModels
from mvp_tui.engine.model_fit import GIB
from tests.fakes.hf_hub_server import FakeHfHub, picker_hub
from tests.widgets.data import offer

LLAMA = "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF"
SPLIT = "unsloth/Llama-3.3-70B-Instruct-GGUF"
GATED = "meta-llama/Llama-3.1-8B-Instruct-GGUF"
TOKEN = "hf_test_token_0123456789abcdef"


@pytest.fixture
def hub() -> Iterator[FakeHfHub]:
    with picker_hub() as fake:
        yield fake


async def test_search_lists_gguf_repos_most_downloaded_first(hub: FakeHfHub) -> None:
    hits = await HubModels({"MVP_HF_ENDPOINT": hub.url}).search("llama")
    assert [h.repo for h in hits] == [LLAMA, SPLIT, GATED]
    assert hits[0].downloads == 1_204_311 and hits[0].likes == 1_402
    assert [h.gated for h in hits] == [False, False, True]
    (asked,) = hub.requests
    assert asked.path.startswith("/api/models?")
    assert "search=llama" in asked.path and "filter=gguf" in asked.path
    assert await HubModels({"MVP_HF_ENDPOINT": hub.url}).search("mistral") == []


async def test_a_repos_quants_their_needs_and_the_largest_each_offer_holds(
    hub: FakeHfHub,
) -> None:
    client = HubModels({"MVP_HF_ENDPOINT": hub.url})
    offers = [offer("1", 0.1, "RTX 3060", vram_mib=8 * 1024), offer("2", 0.3, "RTX 3090")]
    fit = await client.fit(LLAMA, offers, context=8192, nodes=1)
    assert [q.label for q in fit.quants] == ["Q2_K", "Q4_K_M", "Q5_K_M", "Q8_0", "F16"]
    assert [o.cell for o in fit.offers] == ["Q5_K_M", "F16"]
    assert fit.context == 8192 and fit.note == ""
    # One header read (the smallest quant's), from the CDN the hub redirected to.
    resolves = [r.path for r in hub.requests if "/resolve/" in r.path]
    assert resolves == [f"/{LLAMA}/resolve/main/Meta-Llama-3.1-8B-Instruct-Q2_K.gguf"]
    assert [r.headers.get("Range") for r in hub.cdn_requests] == ["bytes=0-"]
    assert any("blobs=true" in r.path for r in hub.requests)


async def test_a_split_quant_is_one_model_with_its_summed_size(hub: FakeHfHub) -> None:
    listing = await HubModels({"MVP_HF_ENDPOINT": hub.url}).listing(SPLIT)
    by_label = {q.label: q for q in listing.quants}
    assert set(by_label) == {"Q4_K_M", "Q8_0"}  # the mmproj file is no model
    split = by_label["Q8_0"]
    assert split.parts == 2 and split.size == int(37.1 * GIB) + int(31.9 * GIB)
    assert split.file == "Q8_0/Llama-3.3-70B-Instruct-Q8_0-00001-of-00002.gguf"


async def test_a_gated_repo_without_a_token_is_a_clear_error(hub: FakeHfHub) -> None:
    with pytest.raises(HubGated) as raised:
        await HubModels({"MVP_HF_ENDPOINT": hub.url}).fit(GATED, [], context=None, nodes=1)
    text = str(raised.value)
    assert f"hub repo {GATED} is gated" in text and "HF_TOKEN is not set" in text
    assert f"accept its terms at https://huggingface.co/{GATED}" in text
    assert "then set HF_TOKEN" in text


async def test_a_token_without_access_is_said_as_such(hub: FakeHfHub) -> None:
    client = HubModels({"MVP_HF_ENDPOINT": hub.url, "HF_TOKEN": TOKEN})
    with pytest.raises(HubGated) as raised:
        await client.fit(GATED, [], context=None, nodes=1)
    assert "the HF_TOKEN given has no access to it" in str(raised.value)
    assert TOKEN not in str(raised.value)
    hub.repos[GATED].granted.add(TOKEN)  # the account accepted the terms
    fit = await client.fit(GATED, [], context=None, nodes=1)
    assert [q.label for q in fit.quants] == ["Q4_K_M"] and fit.needs


async def test_the_token_goes_to_the_hub_only(hub: FakeHfHub) -> None:
    client = HubModels({"MVP_HF_ENDPOINT": hub.url, "HF_TOKEN": TOKEN})
    await client.search("llama")
    await client.fit(LLAMA, [], context=None, nodes=1)
    assert hub.requests and hub.cdn_requests
    assert {r.headers.get("Authorization") for r in hub.requests} == {f"Bearer {TOKEN}"}
    assert all("Authorization" not in r.headers for r in hub.cdn_requests)
    assert all(TOKEN not in r.path for r in [*hub.requests, *hub.cdn_requests])


async def test_unknown_repos_and_a_dead_hub_say_what_to_do(hub: FakeHfHub) -> None:
    client = HubModels({"MVP_HF_ENDPOINT": hub.url})
    with pytest.raises(HubError, match="hub repo nobody/nothing was not found"):
        await client.listing("nobody/nothing")
    with pytest.raises(HubError, match="is not a hub repo id"):
        await client.listing("../etc")
    hub.stop()
    with pytest.raises(HubError, match="did not answer") as raised:
        await client.search("llama")
    assert "MVP_HF_ENDPOINT" in str(raised.value)
