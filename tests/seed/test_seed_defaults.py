"""Seed defaults this app keeps differently, each pinned and listed in the README's
"Compatibility with the seed" with the seed file it differs from: the `local` profile is a
bare child process (the seed's is Docker), the local and Docker image is `mvp-node:latest`
(the seed's `swactor-mvp-node:latest`, which the README names right), and the Docker cached
model is mounted read-only (the seed's `readonly: false`), with the reason.
Contract: 002_…txt `ProfileKind`, `DEFAULT_IMAGE`, `node_spec` mounts."""

from __future__ import annotations

from pathlib import Path

from mvp_tui.config import load_config
from mvp_tui.config.loader import ConfigPaths
from mvp_tui.engine.run import RunEngine
from providers.docker_spec import DockerSettings, create_config

README = Path(__file__).resolve().parents[2] / "README.md"


def compatibility() -> str:
    return README.read_text().split("## Compatibility with the seed", 1)[1].split("\n## ")[0]


def entry(title: str) -> str:
    """The README compatibility entry whose bold title starts with `title`."""
    for item in compatibility().split("\n- ")[1:]:
        if item.startswith(f"**{title}"):
            return " ".join(item.split())
    raise AssertionError(f"no compatibility entry {title!r}")


async def test_the_local_profile_runs_the_node_as_a_child_process(tmp_path: Path) -> None:
    env = {"MVP_RUNTIME_CONFIG": "local", "MVP_STATE_DIR": str(tmp_path / "state")}
    config = load_config(env=env, paths=ConfigPaths(default=tmp_path / "none.toml"))
    assert (config.profile, config.provider) == ("local", "local")
    engine = RunEngine(config, lambda _event: None)
    try:
        assert engine.provider.info.name == "local" and not engine.provider.info.ssh
    finally:
        await engine.aclose()
    deploy = load_config(env={**env, "MVP_RUNTIME_CONFIG": "deploy"},
                         paths=ConfigPaths(default=tmp_path / "none.toml"))
    assert deploy.provider == "vastai"  # as the seed's deploy profile
    text = entry("The `local` profile")
    assert "002" in text and "Docker" in text and "--provider docker" in text


def test_the_default_image_is_named_right(tmp_path: Path) -> None:
    config = load_config(env={}, paths=ConfigPaths(default=tmp_path / "none.toml"))
    assert config.node_image()[0] == "mvp-node:latest"
    readme = " ".join(README.read_text().split())
    assert "The seed's `mvp-node:latest`" not in readme
    assert "the seed's default is `swactor-mvp-node:latest`" in readme
    assert "swactor-mvp-node:latest" in entry("The default image") and "002" in entry(
        "The default image"
    )


def test_the_cached_model_is_mounted_read_only_and_the_readme_says_why(tmp_path: Path) -> None:
    model = tmp_path / "cached.gguf"
    model.write_bytes(b"GGUF")
    settings = DockerSettings(cached_model_host_path=model)
    _, body = create_config(settings, image="mvp-node:latest", label="mvp-41-1-1",
                            request_env={})
    (mount,) = body["HostConfig"]["Mounts"]
    assert mount["Target"] == "/models/cached/cached.gguf" and mount["ReadOnly"] is True
    text = entry("The Docker node")
    assert "read-only" in text and "readonly: false" in text and "001" in text
