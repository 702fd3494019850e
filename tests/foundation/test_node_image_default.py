"""Which image a lease asks for: a rented node defaults to llama.cpp's public CUDA image (the
seed's `mvp-node:latest` is in no registry a host can pull); any image the user names wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from mvp_tui.config.schema import DEFAULT_IMAGE, RENTED_IMAGE
from mvp_tui.lease.settings import WalkSettings
from mvp_tui.ssh.settings import SshSettings
from tests.foundation.test_settings_zero import load

RUNPOD = '[provider]\nkind = "runpod"\n\n[runpod]\napi_key = "rk-test-000000"\n\n'
VAST = '[provider]\nkind = "vastai"\n\n[vastai]\napi_key = "key-123456"\n\n'


@pytest.mark.parametrize("toml", [VAST, RUNPOD])
def test_rented_nodes_default_to_a_public_image_that_can_serve(tmp_path: Path, toml: str) -> None:
    assert WalkSettings.from_config(load(tmp_path, toml)).image == RENTED_IMAGE


@pytest.mark.parametrize("toml", [VAST, RUNPOD])
def test_an_image_the_user_names_wins(tmp_path: Path, toml: str) -> None:
    named = load(tmp_path, toml + '[image]\nnode = "me/mine:1"\n')
    assert WalkSettings.from_config(named).image == "me/mine:1"
    by_env = load(tmp_path, toml, env={"MVP_NODE_IMAGE": "me/env:2"})
    assert WalkSettings.from_config(by_env).image == "me/env:2"
    # Even the seed's default, when written out, is taken as the user's choice.
    seed = load(tmp_path, toml + f'[image]\nnode = "{DEFAULT_IMAGE}"\n')
    assert WalkSettings.from_config(seed).image == DEFAULT_IMAGE


def test_local_nodes_keep_the_seed_default(tmp_path: Path) -> None:
    assert WalkSettings.from_config(load(tmp_path)).image == DEFAULT_IMAGE


def test_runpod_has_its_own_poll_interval_and_identity(tmp_path: Path) -> None:
    config = load(tmp_path, RUNPOD)
    assert WalkSettings.from_config(config).poll_interval_s == 5.0  # overbrainer's pace
    fast = load(tmp_path, RUNPOD, env={"MVP_RUNPOD_POLL_INTERVAL_SECS": "0.5"})
    assert WalkSettings.from_config(fast).poll_interval_s == 0.5
    key = tmp_path / "pod_key"
    ident = load(tmp_path, RUNPOD + f'ssh_identity = "{key}"\n')
    assert SshSettings.from_config(ident).identity_path == key
