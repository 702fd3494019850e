"""Seed defaults this app keeps differently, each pinned and listed in the docs' "Compatibility
with the seed" (docs/seed-compatibility.md) with the seed file it differs from: the `local`
profile is a bare child process (the seed's is Docker), the local and Docker image is
`mvp-node:latest` (the seed's `swactor-mvp-node:latest`, which the docs name right), and the
Docker cached model is mounted read-only (the seed's `readonly: false`), with the reason.
Contract: 002_…txt `ProfileKind`, `DEFAULT_IMAGE`, `node_spec` mounts."""

from __future__ import annotations

from pathlib import Path

from mvp_tui.config import load_config
from mvp_tui.config.loader import ConfigPaths
from mvp_tui.engine.run import RunEngine
from mvp_tui.providers.docker.spec import DockerSettings, create_config

DOCS = Path(__file__).resolve().parents[2] / "docs"


def compatibility() -> str:
    return (DOCS / "seed-compatibility.md").read_text(encoding="utf-8")


def docs_text() -> str:
    """Every docs page, whitespace folded."""
    pages = sorted(DOCS.rglob("*.md"))
    return " ".join(" ".join(page.read_text(encoding="utf-8").split()) for page in pages)


def entry(title: str) -> str:
    """The docs' compatibility entry whose bold title starts with `title`."""
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
    docs = docs_text()
    assert "The seed's `mvp-node:latest`" not in docs
    node_image = " ".join((DOCS / "providers" / "index.md").read_text(encoding="utf-8").split())
    assert "the seed's default is `swactor-mvp-node:latest`" in node_image
    assert "swactor-mvp-node:latest" in entry("The default image") and "002" in entry(
        "The default image"
    )


def test_the_cached_model_is_mounted_read_only_and_the_docs_say_why(tmp_path: Path) -> None:
    model = tmp_path / "cached.gguf"
    model.write_bytes(b"GGUF")
    settings = DockerSettings(cached_model_host_path=model)
    _, body = create_config(settings, image="mvp-node:latest", label="mvp-41-1-1",
                            request_env={})
    (mount,) = body["HostConfig"]["Mounts"]
    assert mount["Target"] == "/models/cached/cached.gguf" and mount["ReadOnly"] is True
    text = entry("The Docker node")
    assert "read-only" in text and "readonly: false" in text and "001" in text
