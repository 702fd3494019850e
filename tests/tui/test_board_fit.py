"""The board's `fit` and `~ready`: the model's VRAM need from a local file or the (loopback)
hub, the verdict per offer, unfit offers dimmed and last (or hidden), the lease confirm's
warning, narrow boards that keep `$/h`, `fit` and `~ready`."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path

import pytest

from mvp_tui.engine.gguf_shape import NotGguf, ShortRead, parse_shape
from mvp_tui.engine.model_fit import Fit, ModelNeed
from mvp_tui.engine.model_need import ModelNeedError, read_model_need
from mvp_tui.engine.outlook import outlook_for
from mvp_tui.engine.ready_estimate import clock_text, ready_formula
from mvp_tui.engine.settings import ModelSettings
from mvp_tui.lease.host_journal import HostJournal, HostOutcome, memory_from
from mvp_tui.providers.base import Offer
from mvp_tui.widgets.lease_confirm import LeaseConfirmScreen, LeaseLimits
from mvp_tui.widgets.offers_model import Column, OffersModel, SortKey
from tests.agent.hub_server import HubServer
from tests.fakes.tiny_gguf import write_tiny_gguf
from tests.tui.fit_data import GIB, header_gguf
from tests.widgets.data import offer

REPO, FILE = "acme/big-GGUF", "big-Q4.gguf"


def model_settings(**kw: object) -> ModelSettings:
    base = dict(model_id="m", gguf_local_path=None, gguf_repo=REPO, gguf_file=FILE,
                gguf_revision=None, tokenizer_local_path=None, max_context=None)
    return ModelSettings(**{**base, **kw})  # type: ignore[arg-type]


def big_model(tmp_path: Path) -> Path:
    """30 GB of weights (a sparse file), an 8B-like shape: 32 layers, 8 KV heads of 128."""
    return header_gguf(tmp_path / "big.gguf", size=30 * GIB)


def need_of(path: Path, *, nodes: int = 1, context: int | None = 4096) -> ModelNeed:
    settings = model_settings(gguf_local_path=path, max_context=context)
    return asyncio.run(read_model_need(settings, nodes=nodes, environ={}))


# -- the estimate ------------------------------------------------------------------------------
def test_the_header_gives_the_kv_cache_shape(tmp_path: Path) -> None:
    tiny = write_tiny_gguf(tmp_path / "tiny.gguf").read_bytes()
    shape = parse_shape(tiny)
    assert (shape.layers, shape.embedding, shape.heads, shape.kv_heads) == (2, 64, 4, 4)
    assert shape.kv_bytes(256) == 2 * 4 * (16 + 16) * 256 * 2
    with pytest.raises(ShortRead):
        parse_shape(tiny[:40])
    with pytest.raises(NotGguf):
        parse_shape(b"PK\x03\x04" + tiny[4:])


def test_a_model_larger_than_the_card_does_not_fit(tmp_path: Path) -> None:
    need = need_of(big_model(tmp_path))
    assert need.model_bytes == 30 * GIB
    assert need.kv_bytes == 32 * 8 * 256 * 4096 * 2  # 512 MiB at 4,096 tokens
    assert need.per_node_gb == 33
    small = need.verdict(offer("1", 0.3, vram_mib=24 * 1024))
    assert small.fit is Fit.NO and small.cell == "✗ needs 33 GB"
    assert need.verdict(offer("2", 0.5, vram_mib=32 * 1024)).fit is Fit.TIGHT
    assert need.verdict(offer("3", 0.9, vram_mib=48 * 1024)).fit is Fit.FITS
    assert need.verdict(offer("4", 0.6, n=2, vram_mib=24 * 1024)).fit is Fit.FITS  # 2 GPUs
    assert "needs 33 GB per node: 30.0 GB model + 0.5 GB KV cache at 4,096" in need.describe()


def test_the_context_counts_and_several_nodes_split_the_need(tmp_path: Path) -> None:
    path = big_model(tmp_path)
    long = need_of(path, context=131072)
    assert long.kv_bytes == 16 * GIB and long.per_node_gb == 49
    split = need_of(path, nodes=2)
    assert split.per_node_gb == 17  # each node holds half the layers
    assert split.verdict(offer("1", 0.3, vram_mib=24 * 1024)).fit is Fit.FITS
    assert need_of(path).verdict(offer("1", 0.3, vram_mib=24 * 1024)).fit is Fit.NO


def test_unset_context_is_the_engine_default_capped_by_the_model(tmp_path: Path) -> None:
    tiny = write_tiny_gguf(tmp_path / "tiny.gguf")
    assert need_of(tiny, context=None).context == 256  # its trained context is smaller
    assert need_of(big_model(tmp_path), context=None).context == 4096


def test_the_hub_gives_the_size_and_the_header(tmp_path: Path) -> None:
    tiny = write_tiny_gguf(tmp_path / "tiny.gguf").read_bytes()
    with HubServer() as hub:
        hub.add_file(REPO, "main", FILE, tiny)
        need = asyncio.run(read_model_need(model_settings(max_context=256), nodes=1,
                                           environ={"MVP_HF_ENDPOINT": hub.url}))
        assert need.model_bytes == len(tiny)
        assert need.kv_bytes == parse_shape(tiny).kv_bytes(256)
        assert need.source == f"{hub.url}/{REPO}/resolve/main/{FILE}"
        assert [r.headers.get("Range") for r in hub.state.requests] == ["bytes=0-"]


def test_a_private_repo_needs_the_token_and_never_shows_it(tmp_path: Path) -> None:
    tiny = write_tiny_gguf(tmp_path / "tiny.gguf").read_bytes()
    token = "hf_secret_token_0123456789"
    with HubServer() as hub:
        hub.add_file(REPO, "main", FILE, tiny)
        hub.state.require_token = token
        env = {"MVP_HF_ENDPOINT": hub.url}
        with pytest.raises(ModelNeedError, match="needs HF_TOKEN") as refused:
            asyncio.run(read_model_need(model_settings(), nodes=1, environ=env))
        need = asyncio.run(read_model_need(model_settings(), nodes=1,
                                           environ={**env, "HF_TOKEN": token}))
        assert need.model_bytes == len(tiny)
        assert token not in str(refused.value)
        assert hub.state.requests[-1].headers.get("Authorization") == f"Bearer {token}"


# -- ~ready ------------------------------------------------------------------------------------
def test_ready_counts_the_pull_unless_the_host_ran_the_image(tmp_path: Path) -> None:
    fast = dataclasses.replace(offer("1", 0.3, down=800), machine_id="m1")
    ran = dataclasses.replace(offer("2", 0.3, down=800), machine_id="m2")
    now = time.time()
    journal = HostJournal(tmp_path)
    image = "ghcr.io/ggml-org/llama.cpp:full-cuda"
    journal.append(HostOutcome(at=now - 3600, run_id="r-a", provider="vastai", host="m2",
                               offer_id="2", gpu_name="RTX 4090", stage="serving", ok=True,
                               reason="", image=image))
    memory = memory_from(journal.read(), now, 7)
    need = ModelNeed(model_bytes=4 * 10**9, kv_bytes=0, context=4096)
    outlook = outlook_for(need, image=image, image_gb=3.6, has_image=memory.has_image)
    cold, warm = outlook(fast).ready, outlook(ran).ready
    assert cold is not None and warm is not None
    assert cold.pull_s == pytest.approx(36.0) and not cold.cached_image  # 3.6 GB at 800 Mb/s
    assert warm.pull_s == 0 and warm.cached_image
    assert warm.model_s == pytest.approx(40.0)
    assert cold.total_s - warm.total_s == pytest.approx(36.0)
    assert ready_formula(3.6, 1)(offer("3", 0.3, down=0).down_mbps, False) is None
    assert (clock_text(161), clock_text(3725)) == ("2:41", "1:02:05")


# -- the board's model -------------------------------------------------------------------------
def board_offers() -> list[Offer]:
    return [
        offer("1001", 0.20, "RTX 3060", vram_mib=12 * 1024, down=900),  # the cheapest: too small
        offer("1002", 0.35, "RTX 4090", vram_mib=24 * 1024, down=200),
        offer("1003", 0.60, "RTX A6000", vram_mib=48 * 1024, down=900),
    ]


def board_need() -> ModelNeed:
    return ModelNeed(model_bytes=16 * GIB, kv_bytes=GIB, context=4096)  # needs 19 GB


def test_unfit_offers_are_dimmed_last_and_hidden_on_request() -> None:
    model = OffersModel()
    model.set_offers(board_offers())
    outlook = outlook_for(board_need(), image="i", image_gb=3.6, has_image=lambda o, i: False)
    model.set_outlook(outlook)
    assert model.view() == ["vastai:1002", "vastai:1003", "vastai:1001"]  # by $/h, unfit last
    row = model.row("vastai:1001")
    fit_cell = row.cells[list(Column).index(Column.FIT)]
    assert row.unfit and fit_cell == "✗ needs 19 GB"
    assert model.row("vastai:1003").cells[list(Column).index(Column.FIT)] == "✓"
    assert "1 too small last" in model.subtitle("vastai")
    # Enter on the first offer walks on past it, never onto the card that is too small.
    assert [o.offer_id for o in model.chosen("vastai:1002", 5)] == ["1002", "1003"]
    model.set_outlook(outlook, show_unfit=False)
    assert model.view() == ["vastai:1002", "vastai:1003"]
    assert "1 too small hidden" in model.subtitle("vastai")


def test_ready_is_a_sort_key() -> None:
    model = OffersModel()
    model.set_offers(board_offers())
    model.set_outlook(outlook_for(board_need(), image="i", image_gb=3.6,
                                  has_image=lambda o, i: False))
    while model.sort_key is not SortKey.READY:
        model.cycle_sort()
    assert model.ascending  # soonest first
    assert model.view() == ["vastai:1003", "vastai:1002", "vastai:1001"]
    ready = list(Column).index(Column.READY)
    # 20 s boot + 32 s pull (3.6 GB at 900 Mb/s) + 153 s model + 16 s load
    assert model.row("vastai:1003").cells[ready] == "3:41"


def test_the_lease_confirm_warns_before_a_boot_the_model_cannot_survive() -> None:
    offers = board_offers()
    need = ModelNeed(model_bytes=int(21.5 * GIB), kv_bytes=GIB, context=4096)  # 24 GB: tight
    screen = LeaseConfirmScreen(offers, LeaseLimits(), provider="vastai",
                                fits=[need.verdict(o) for o in offers],
                                need=need.describe())
    warning = screen.fit_warning()
    assert warning.startswith("⚠ offer #1 cannot hold the model")
    assert "offer #2 is tight" in warning and "needs 25 GB per node" in warning
    fine = LeaseConfirmScreen(offers[2:], LeaseLimits(), provider="vastai",
                              fits=[need.verdict(offers[2])])
    assert fine.fit_warning() == ""


async def test_the_real_dashboard_fills_the_fit_column_from_the_model(tmp_path: Path) -> None:
    """The app on a real engine (this machine's provider): the board shows, then the model's
    size is read (a 30 GB local file) and every row gets its verdict; `i` says the need."""
    from mvp_tui.engine.events import OffersListed
    from mvp_tui.widgets.offers import OffersPane
    from tests.tui.test_dashboard_run import dashboard, is_
    from tests.widgets.data import wait_until

    env = {"MVP_GGUF_LOCAL_PATH": str(big_model(tmp_path)), "MVP_MAX_CONTEXT": "4096"}
    app, seen = dashboard(env, tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await seen.first(is_(OffersListed))
        pane = app.query_one(OffersPane)
        await wait_until(pilot, lambda: bool(pane.need), 10)
        assert pane.need.startswith("needs 33 GB per node")
        keys = list(pane.table.keys)
        assert keys and all(pane.model.outlook(k).fit is not Fit.UNKNOWN for k in keys)
        small = [k for k in keys if pane.model.offer(k).vram_gib_total < 33]  # type: ignore[union-attr]
        assert all(pane.model.row(k).unfit for k in small)


def test_a_machine_without_a_gpu_is_judged_on_its_memory() -> None:
    """This machine (or a CPU node) serves from system memory: not '✗ needs N GB' of VRAM."""
    import dataclasses

    from mvp_tui.engine.model_fit import Fit, ModelNeed
    from mvp_tui.providers.base import Offer

    need = ModelNeed(model_bytes=2 * 1024**3, kv_bytes=256 * 1024**2, context=4096)
    cpu = Offer(provider="local", offer_id="local", gpu_name="CPU only", num_gpus=0,
                gpu_ram_mib=0, price_per_hour=0.0, reliability=1.0, down_mbps=0.0,
                up_mbps=0.0, location="this machine", ram_mib=16 * 1024)
    assert need.verdict(cpu).fit is Fit.FITS
    assert need.verdict(dataclasses.replace(cpu, ram_mib=1024)).fit is Fit.NO
    assert need.verdict(dataclasses.replace(cpu, ram_mib=0)).fit is Fit.UNKNOWN
