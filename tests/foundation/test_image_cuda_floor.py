"""The node image and its CUDA floor, declared together (issue 37 item 2): the default image
is pinned to the llama.cpp build of the llama-cpp-python version uv.lock pins; its floor (or
`[image] cuda_min`) is what Vast's search asks (`cuda_max_good`) and RunPod's create sends
(`minCudaVersion`); a floor that is not major.minor stops the config."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from mvp_tui.config import ConfigError
from mvp_tui.engine.provider_factory import build_provider
from mvp_tui.engine.settings import selection_policy
from mvp_tui.node_protocol import (
    LLAMA_CPP_BUILD,
    LLAMA_CPP_PYTHON,
    RENTED_IMAGE,
    RENTED_IMAGE_CUDA_MIN,
)
from mvp_tui.providers.runpod.client import RunPodProvider, RunPodSettings
from mvp_tui.providers.vastai.offers import build_search_query
from tests.foundation.test_node_image_default import RUNPOD, VAST
from tests.foundation.test_settings_zero import load

ROOT = Path(__file__).resolve().parents[2]


def test_the_default_image_is_the_build_of_the_pinned_llama_cpp_python() -> None:
    """Moving llama-cpp-python in uv.lock (or the RPC build's version) without moving the
    image's build tag fails here: docs/providers/index.md#moving-the-pin says how."""
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    (locked,) = [p["version"] for p in lock["package"] if p["name"] == "llama-cpp-python"]
    assert locked == LLAMA_CPP_PYTHON
    rpc = (ROOT / "scripts" / "llama-rpc-build.sh").read_text()
    assert re.search(rf"^version={re.escape(LLAMA_CPP_PYTHON)}$", rpc, re.M)
    assert f"ghcr.io/ggml-org/llama.cpp:full-cuda-{LLAMA_CPP_BUILD}" == RENTED_IMAGE
    assert re.fullmatch(r"b\d+", LLAMA_CPP_BUILD)
    docs = (ROOT / "docs" / "providers" / "index.md").read_text()
    assert RENTED_IMAGE in docs and f"CUDA {RENTED_IMAGE_CUDA_MIN}" in docs
    assert "## Moving the pin" in docs


def test_unset_the_floor_is_the_default_images_on_both_marketplaces(tmp_path: Path) -> None:
    vast = selection_policy(load(tmp_path, VAST))
    assert (vast.min_cuda, vast.disk_gb) == (float(RENTED_IMAGE_CUDA_MIN), 50.0)
    query = build_search_query(vast)
    assert query["cuda_max_good"] == {"gte": 12.8}
    assert query["disk_space"] == {"gte": 50.0} and query["allocated_storage"] == 50.0
    assert _runpod_floor(load(tmp_path, RUNPOD)) == RENTED_IMAGE_CUDA_MIN


def test_image_cuda_min_moves_both_and_runpods_own_key_wins_there(tmp_path: Path) -> None:
    other = '[image]\nnode = "me/cuda124:1"\ncuda_min = "12.4"\n'
    assert selection_policy(load(tmp_path, VAST + other)).min_cuda == 12.4
    assert _runpod_floor(load(tmp_path, RUNPOD + other)) == "12.4"
    by_env = load(tmp_path, RUNPOD, env={"MVP_IMAGE_CUDA_MIN": "12.6"})
    assert _runpod_floor(by_env) == "12.6"
    own = load(tmp_path, RUNPOD.replace('[runpod]\n', '[runpod]\nmin_cuda_version = "12.2"\n')
               + other)
    assert _runpod_floor(own) == "12.2"


def test_zero_is_no_floor(tmp_path: Path) -> None:
    none = '[image]\ncuda_min = "0"\n'
    policy = selection_policy(load(tmp_path, VAST + none))
    assert policy.min_cuda is None and "cuda_max_good" not in build_search_query(policy)
    assert _runpod_floor(load(tmp_path, RUNPOD + none)) is None


@pytest.mark.parametrize("bad", ["12", "twelve", "12.8.1"])
def test_a_floor_that_is_not_major_minor_stops_the_config(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, VAST + f'[image]\ncuda_min = "{bad}"\n')
    text = str(caught.value)
    assert "[image] cuda_min" in text and repr(bad) in text and "major.minor" in text
    assert "config.toml" in text  # its source


def _runpod_floor(config) -> str | None:  # type: ignore[no-untyped-def]
    provider = build_provider(config)
    assert isinstance(provider, RunPodProvider)
    settings = provider.settings
    assert isinstance(settings, RunPodSettings)
    return settings.min_cuda_version
