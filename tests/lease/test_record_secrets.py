"""The run record keeps the config with every key its spec declares `secret` redacted: the
declaration decides (config/sections/), not how the key is spelled."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from mvp_tui.config import Config, ConfigPaths, load_config
from mvp_tui.config.schema import BY_DOTTED, KEYS
from mvp_tui.engine import run_lease
from mvp_tui.engine.run_lease import recorded_config

KEY = "vast-key-0123456789"


def _config(tmp_path: Path) -> Config:
    env = {"MVP_STATE_DIR": str(tmp_path / "state"), "MVP_NODE_PROVIDER": "vastai",
           "VASTAI_API_KEY": KEY, "MVP_MODEL_ID": "served-name"}
    return load_config(env=env, paths=ConfigPaths(default=tmp_path / "none.toml"))


def test_the_declared_secrets_are_redacted_and_nothing_else(tmp_path: Path) -> None:
    kept = recorded_config(_config(tmp_path))
    assert {spec.dotted for spec in KEYS if spec.secret} >= {"vastai.api_key", "runpod.api_key"}
    assert kept["vastai.api_key"] == "<redacted>" and KEY not in repr(kept)
    assert kept["model.id"] == "served-name"
    assert kept["state.dir"] == str(tmp_path / "state")  # a path as text


def test_a_key_declared_secret_is_redacted_whatever_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _config(tmp_path)
    # `model.id` declared secret (its name ends in no `api_key`): the record hides it.
    # (The key table is a live view of the registered providers: the reader's is swapped.)
    table = dict(BY_DOTTED)
    monkeypatch.setattr(run_lease, "BY_DOTTED", table)
    table["model.id"] = dataclasses.replace(table["model.id"], secret=True)
    assert recorded_config(config)["model.id"] == "<redacted>"
    # And a key not declared secret is kept, even one spelled like a key.
    table["vastai.api_key"] = dataclasses.replace(table["vastai.api_key"], secret=False)
    assert recorded_config(config)["vastai.api_key"] == KEY
