"""Seed row 116 (issue 37, item 6): RunPod `gpu_types = auto` with no `min_vram_gb` takes the
run's own VRAM need (the board's fit: weights, KV cache, margin) as its floor per GPU, headless
too, so a GPU type too small for the model is never created. `min_vram_gb` still wins; a need
that cannot be read keeps the old 16 GB floor and says why."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from mvp_tui.config.loader import ConfigPaths, load_config
from mvp_tui.engine.model_fit import GIB
from mvp_tui.engine.model_need import read_model_need
from mvp_tui.engine.run import RunEngine
from mvp_tui.engine.settings import ModelSettings
from mvp_tui.events import EngineEvent
from mvp_tui.providers.runpod.client import RunPodProvider
from mvp_tui.providers.runpod.section import FALLBACK_MIN_VRAM_GB
from mvp_tui.rehearsal.tiny_gguf import write_tiny_gguf
from tests.e2e.test_vast_headless import cli
from tests.fakes.runpod_server import FakeRunPod

A5000, RTX4090, A40 = "NVIDIA RTX A5000", "NVIDIA GeForce RTX 4090", "NVIDIA A40"
MODEL_GIB = 30  # weights alone past any 24 GB card, within a 48 GB one


def big_model(path: Path) -> Path:
    """A real GGUF header on a 30 GiB file (sparse: nothing past the header is written)."""
    write_tiny_gguf(path)
    os.truncate(path, MODEL_GIB * GIB)
    return path


def runpod_env(fake: FakeRunPod, tmp_path: Path, **more: str) -> dict[str, str]:
    return {
        "MVP_NODE_PROVIDER": "runpod", "RUNPOD_API_KEY": fake.api_key,
        "MVP_RUNPOD_API_URL": fake.api_url, "MVP_STATE_DIR": str(tmp_path / "state"),
        "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg"), **more,
    }


async def expected_floor(env: dict[str, str], tmp_path: Path, gpus: int = 1) -> int:
    """The board's need for the model, per GPU in whole GB: what the floor must be."""
    config = load_config(env=env, paths=ConfigPaths(default=tmp_path / "none.toml"))
    need = await read_model_need(ModelSettings.from_config(config), nodes=1, environ=env)
    return math.ceil(need.per_node_bytes / gpus / GIB)


async def _offer_ids(env: dict[str, str], tmp_path: Path) -> tuple[list[str], int]:
    config = load_config(env=env, paths=ConfigPaths(default=tmp_path / "none.toml"))
    seen: list[EngineEvent] = []
    engine = RunEngine(config, seen.append, environ=env)
    try:
        offers = await engine.search_offers()
        provider = engine.provider
        assert isinstance(provider, RunPodProvider)
        return [o.offer_id for o in offers], provider.vram_floor_gb
    finally:
        await engine.aclose()


async def test_auto_searches_only_gpus_that_hold_the_runs_need(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    env = runpod_env(fake, tmp_path, MVP_GGUF_LOCAL_PATH=str(big_model(tmp_path / "m.gguf")))
    floor = await expected_floor(env, tmp_path)
    assert 24 < floor <= 48, floor
    ids, used = await _offer_ids(env, tmp_path)
    assert used == floor
    assert ids == [f"SECURE:{A40}"], "the 24 GB types would not hold the model"


async def test_the_need_is_split_over_the_pods_gpus(fake: FakeRunPod, tmp_path: Path) -> None:
    env = runpod_env(fake, tmp_path, MVP_GGUF_LOCAL_PATH=str(big_model(tmp_path / "m.gguf")),
                     MVP_RUNPOD_GPU_COUNT="2")
    floor = await expected_floor(env, tmp_path, gpus=2)
    ids, used = await _offer_ids(env, tmp_path)
    assert used == floor
    assert used <= 24 and f"SECURE:{A5000}" in ids, "two 24 GB GPUs hold it together"


async def test_min_vram_gb_set_by_the_user_wins(fake: FakeRunPod, tmp_path: Path) -> None:
    env = runpod_env(fake, tmp_path, MVP_GGUF_LOCAL_PATH=str(big_model(tmp_path / "m.gguf")),
                     MVP_RUNPOD_MIN_VRAM_GB="20")
    ids, used = await _offer_ids(env, tmp_path)
    assert used == 20 and f"SECURE:{A5000}" in ids


async def test_a_need_that_cannot_be_read_keeps_the_fallback_floor(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    fake.add_gpu("NVIDIA RTX A2000", memory=12, secure_price=0.1)
    env = runpod_env(fake, tmp_path, MVP_HF_ENDPOINT="http://127.0.0.1:9")  # nothing there
    ids, used = await _offer_ids(env, tmp_path)
    assert used == FALLBACK_MIN_VRAM_GB
    assert f"SECURE:{A5000}" in ids and "SECURE:NVIDIA RTX A2000" not in ids


def test_headless_auto_creates_no_gpu_too_small_for_the_model(tmp_path: Path) -> None:
    """Only 16 and 24 GB types in stock, a model that needs more: no create, and the run
    says the floor it used and why."""
    with FakeRunPod() as fake:
        fake.add_gpu("NVIDIA RTX A4000", memory=16, secure_price=0.17)
        fake.add_gpu(A5000, memory=24, secure_price=0.27)
        model = big_model(tmp_path / "m.gguf")
        env = runpod_env(fake, tmp_path, MVP_GGUF_LOCAL_PATH=str(model),
                         MVP_LEASE_READY_TIMEOUT_SECS="2")
        done = cli("up", "--headless", "--yes", "--until", "leased", env=env)
        assert fake.create_requests() == [], "a GPU too small for the model was rented"
    assert done.returncode == 1, done.stderr
    assert "no runpod offer matches" in done.stderr
    assert "runpod auto: GPUs of at least" in done.stderr, done.stderr
    assert "the run's own need" in done.stderr


def test_offers_lists_what_up_would_walk(fake: FakeRunPod, tmp_path: Path) -> None:
    """`mvp-tui offers` searches with the same floor as `up`."""
    env = runpod_env(fake, tmp_path, MVP_GGUF_LOCAL_PATH=str(big_model(tmp_path / "m.gguf")))
    done = cli("offers", "--json", env=env)
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert [o["offer_id"] for o in listed] == [f"SECURE:{A40}"]
    assert listed[0]["fit"] == "fits"
