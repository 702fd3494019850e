"""What the node agent says of an image that cannot do the job, and how it finds the engine
in llama.cpp's own images (the default for rented nodes: llama-server in /app, off PATH)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from mvp_tui.config.schema import RENTED_IMAGE
from mvp_tui.node import engine
from mvp_tui.node.engine import engine_spec, image_lacks
from mvp_tui.node.instance_api import SwitchSettings
from mvp_tui.node.settings import Settings
from tests.agent.agent_run import AgentRun, agent_env


async def test_an_image_without_an_engine_fails_at_the_probe_naming_what_it_lacks(
    tmp_path: Path, tiny_model: Path
) -> None:
    """No llama-server anywhere, and a Python without the llama_cpp package: the first
    failing record says so before the model is touched, with the image that has both."""
    python = tmp_path / "python-without-packages"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')  # no site-packages
    python.chmod(0o755)
    env = agent_env(tmp_path, PATH="/usr/bin:/bin", MVP_GGUF_LOCAL_PATH=str(tiny_model))
    run = await AgentRun.start(env, python=str(python))
    try:
        fatal = await run.weights()
        assert fatal["type"] == "WorkerFatal", fatal
        assert "this image lacks a serving engine" in fatal["reason"]
        assert "it lacks: engine (llama-server or the llama_cpp package)" in fatal["reason"]
        assert "/app/llama-server" in fatal["reason"] and RENTED_IMAGE in fatal["fix"]
        assert ("probe", "failed") in run.phases()
        assert not any(phase == "model" for phase, _ in run.phases()), "failed before the model"
        assert await run.wait_exit() == 1
    finally:
        await run.kill()


def test_llama_server_off_path_is_found_where_llama_cpp_images_keep_it(
    tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = tmp_path / "app"
    app.mkdir()
    server = app / "llama-server"
    server.write_text("#!/bin/sh\n")
    server.chmod(0o755)
    monkeypatch.setattr(engine, "KNOWN_LLAMA_SERVERS", (str(server),))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/lib")
    settings = Settings(agent_env(tmp_path))
    spec = engine_spec(settings, tiny_model, "tiny")
    assert spec.kind == "llama-server" and spec.argv[0] == str(server)
    # The image's shared libraries sit next to the binary, on no loader path.
    assert spec.env == {"LD_LIBRARY_PATH": f"{app}{os.pathsep}/opt/lib"}
    assert image_lacks(settings, []) == []


def test_the_switch_talks_to_runpod_v2_by_default() -> None:
    settings = SwitchSettings({"MVP_NODE_PROVIDER": "runpod"})
    assert settings.api_url == "https://api.runpod.io/v2"  # REST v1 was retired 2026-11-15
