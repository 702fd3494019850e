"""A `[model]` hub repo, file or revision with an empty, `.` or `..` part is refused (issue 30
item 11): at load, before any request, naming the key, the value, its source and the fix; on
the node, before a cache path is made; and the instance's prefetch fetches nothing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from mvp_tui.config import ConfigError
from mvp_tui.node.download import model_cache_path
from mvp_tui.node.settings import ConfigError as NodeConfigError
from mvp_tui.node.settings import Settings
from mvp_tui.providers.prefetch import prefetch_script
from tests.foundation.test_api_key_sources import _cli
from tests.foundation.test_config import load

HUB = {"MVP_GGUF_REPO": "owner/repo", "MVP_GGUF_FILE": "model.gguf"}


@pytest.mark.parametrize(
    ("name", "value"),
    [("MVP_GGUF_REVISION", ".."), ("MVP_GGUF_REVISION", "."), ("MVP_GGUF_REVISION", "a/../b"),
     ("MVP_GGUF_FILE", "../other/model.gguf"), ("MVP_GGUF_REPO", "owner/..")],
)
def test_a_dot_part_is_refused_at_load_naming_key_value_source(
    tmp_path: Path, name: str, value: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        load(tmp_path, env={**HUB, name: value})
    text = str(refused.value)
    key = name.removeprefix("MVP_").lower()
    assert f"[model] {key} = {value!r}" in text and name in text and "outside the repo" in text


def test_refs_style_revisions_stay_allowed(tmp_path: Path) -> None:
    config = load(tmp_path, env={**HUB, "MVP_GGUF_REVISION": "refs/pr/1"})
    assert config.settings.model.gguf_revision == "refs/pr/1"


def test_the_cli_exits_2_before_anything(tmp_path: Path) -> None:
    done = _cli(tmp_path, "config", **HUB, MVP_GGUF_REVISION="..")
    assert done.returncode == 2, done.stderr
    assert "gguf_revision = '..'" in done.stderr and "fix:" in done.stderr


def test_the_node_refuses_it_before_making_a_cache_path(tmp_path: Path) -> None:
    settings = Settings({**HUB, "MVP_GGUF_REVISION": "..", "MVP_MODEL_CACHE_DIR": str(tmp_path)})
    with pytest.raises(NodeConfigError, match="MVP_GGUF_REVISION"):
        model_cache_path(settings)


def test_the_prefetch_fetches_nothing_for_a_dot_revision(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    called = tmp_path / "curl-called"
    (bin_dir / "curl").write_text(f"#!/bin/sh\ntouch {called}\n")
    (bin_dir / "curl").chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "MVP_PREFETCH": "1", **HUB,
           "MVP_GGUF_REVISION": "..", "MVP_MODEL_CACHE_DIR": str(tmp_path / "cache"),
           "HOME": str(tmp_path)}
    done = subprocess.run(["/bin/sh", "-c", prefetch_script()], env=env, timeout=30,
                          check=False, capture_output=True)
    assert done.returncode == 0
    assert not called.exists() and not (tmp_path / "cache").exists()
