"""Which model is served when a local path and hub keys come from different layers: the
seed's rule (shared/seeds/002, `set_gguf_repo`/`set_gguf_file`/`set_gguf_revision`). Layers
apply in order (defaults, file, env, flags) and, in one layer, the local path before the hub
keys: a hub key in the same layer as the path or a later one serves the hub, and the hub keys
from before the path are forgotten. `mvp-tui config` says which model and why."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mvp_tui.config import ConfigPaths, load_config
from mvp_tui.config.loader import flag_dest
from mvp_tui.config.schema import BY_DOTTED, DEFAULT_HF_FILE, DEFAULT_HF_REPO, KEYS
from mvp_tui.engine.settings import ModelSettings, RuntimeSettings, node_env

BY_FLAG = {spec.flag: spec for spec in KEYS if spec.flag}


def load(tmp_path: Path, toml: str = "", env: dict[str, str] | None = None,
         flags: dict[str, str] | None = None):
    path = tmp_path / "config.toml"
    path.write_text(toml)
    parsed = {flag_dest(BY_FLAG[f]): (v, f) for f, v in (flags or {}).items()}
    paths = ConfigPaths(explicit=path, explicit_source="flag --config")
    return load_config(flags=parsed, env=env or {}, paths=paths)


def served_env(config) -> dict[str, str]:  # type: ignore[no-untyped-def]
    runtime, model = RuntimeSettings.from_config(config), ModelSettings.from_config(config)
    return node_env(runtime, model, provider="local", run_id="41", environ={})


LOCAL = '[model]\ngguf_local_path = "/models/tiny.gguf"\n'


def test_a_file_path_with_an_env_repo_serves_the_env_repo(tmp_path: Path) -> None:
    config = load(tmp_path, LOCAL, env={"MVP_GGUF_REPO": "org/other-GGUF"})
    env = served_env(config)
    assert "MVP_GGUF_LOCAL_PATH" not in env
    assert env["MVP_GGUF_REPO"] == "org/other-GGUF"
    assert env["MVP_GGUF_FILE"] == DEFAULT_HF_FILE  # the seed: a default, not the file's
    assert "env MVP_GGUF_REPO" in config.model_source.why


def test_a_path_alone_serves_the_local_file(tmp_path: Path) -> None:
    env = served_env(load(tmp_path, LOCAL))
    assert env["MVP_GGUF_LOCAL_PATH"] == "/models/tiny.gguf"
    assert "MVP_GGUF_REPO" not in env and "MVP_GGUF_FILE" not in env


def test_a_later_path_wins_over_an_earlier_repo(tmp_path: Path) -> None:
    toml = '[model]\ngguf_repo = "org/file-GGUF"\ngguf_file = "x.gguf"\n'
    config = load(tmp_path, toml, env={"MVP_GGUF_LOCAL_PATH": "/models/env.gguf"})
    assert served_env(config)["MVP_GGUF_LOCAL_PATH"] == "/models/env.gguf"
    assert "env MVP_GGUF_LOCAL_PATH" in config.model_source.why


def test_in_one_layer_the_hub_keys_come_after_the_path(tmp_path: Path) -> None:
    toml = '[model]\ngguf_local_path = "/models/tiny.gguf"\ngguf_revision = "main"\n'
    env = served_env(load(tmp_path, toml))
    assert "MVP_GGUF_LOCAL_PATH" not in env
    assert (env["MVP_GGUF_REPO"], env["MVP_GGUF_FILE"]) == (DEFAULT_HF_REPO, DEFAULT_HF_FILE)
    assert env["MVP_GGUF_REVISION"] == "main"


def test_hub_keys_from_before_the_path_are_forgotten(tmp_path: Path) -> None:
    # file: repo and revision; env: a path (undoes them); flag: a file (back to the hub).
    toml = '[model]\ngguf_repo = "org/file-GGUF"\ngguf_revision = "v1"\n'
    config = load(
        tmp_path, toml, env={"MVP_GGUF_LOCAL_PATH": "/m.gguf"}, flags={"--gguf-file": "f.gguf"}
    )
    env = served_env(config)
    assert (env["MVP_GGUF_REPO"], env["MVP_GGUF_FILE"]) == (DEFAULT_HF_REPO, "f.gguf")
    assert "MVP_GGUF_REVISION" not in env and "MVP_GGUF_LOCAL_PATH" not in env
    assert BY_DOTTED["model.gguf_file"].label in config.model_source.why


def test_mvp_tui_config_says_which_model_is_served_and_why(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(LOCAL)
    base = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    run = subprocess.run(
        [sys.executable, "-m", "mvp_tui", "--config", str(path), "config"],
        capture_output=True, text=True, timeout=60,
        env={**base, "MVP_GGUF_REPO": "org/other-GGUF"},
    )
    assert run.returncode == 0, run.stderr
    served = run.stdout.split("# model served: ", 1)[1]
    assert served.startswith(f"hub repo org/other-GGUF, file {DEFAULT_HF_FILE}")
    assert "env MVP_GGUF_REPO" in served and f"file {path}:2" in served
