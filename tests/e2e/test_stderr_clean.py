"""Each command, run as a user runs it (a fresh process, the real dependencies), writes only
mvp-tui's own lines on stderr: no dependency's warning (cryptography's DSA notice reaches
asyncssh's import on every command that loads SSH) and no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_vast_headless import closed_port as closed_port
from tests.e2e.test_vast_headless import fake as fake
from tests.e2e.test_vast_headless import vast_env as vast_env
from tests.fakes.hf_hub_server import FakeHfHub, picker_hub
from tests.fakes.vastai_server import FakeVast
from tests.stderr_lines import foreign_lines


@pytest.fixture
def hub() -> Iterator[FakeHfHub]:
    with picker_hub() as server:
        yield server


def _run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("MVP_", "VAST", "PYTHONWARNINGS"))}
    return subprocess.run([sys.executable, "-m", "mvp_tui", *args], capture_output=True,
                          text=True, env={**base, **env}, timeout=120)


def test_every_command_writes_only_its_own_lines_on_stderr(
    vast_env: dict[str, str], fake: FakeVast, hub: FakeHfHub, tiny_gguf: Path, tmp_path: Path
) -> None:
    vast = {**vast_env, "MVP_HF_ENDPOINT": hub.url}  # the board's fit reads the (fake) hub
    local = {"MVP_NODE_PROVIDER": "local", "MVP_STATE_DIR": str(tmp_path / "local-state"),
             "MVP_HF_ENDPOINT": hub.url, "MVP_PROMPT_OPENAI_PORT": "0"}
    steps: list[tuple[tuple[str, ...], dict[str, str], set[int]]] = [
        (("--version",), vast, {0}),
        (("config",), vast, {0}),
        (("check",), vast, {0}),
        (("offers",), vast, {0}),
        (("models", "llama"), vast, {0}),
        (("hosts",), vast, {0, 2}),  # 2: no journal yet, said on stderr as ours
        (("up", "--headless", "--yes", "--until", "leased"), vast, {0}),
        (("ls",), vast, {0}),
        (("endpoint",), vast, {2}),  # nothing serves: said, exit 2
        (("down", "--all", "--yes"), vast, {0}),
        (("up", "--headless", "--yes", "--gguf-local-path", str(tiny_gguf), "--rpc-bind",
          "127.0.0.1:0", "--until", "ready", "--down-after"), local, {0}),
        (("hosts",), local, {0}),
        (("ls",), local, {0}),
    ]
    said: list[tuple[str, list[str]]] = []
    for args, env, codes in steps:
        done = _run(*args, env=env)
        assert done.returncode in codes, (args, done.returncode, done.stderr)
        said.append((" ".join(args), foreign_lines(done.stderr)))
    assert fake.billing() == []
    assert [(cmd, lines) for cmd, lines in said if lines] == []
