"""A prompt RPC that cannot bind writes the seed's `prompt_rpc` `failed` record with its
error before the run fails (the seed: `{"error": …}` on `mvp.orch.bootstrap`, then it
returns the error). A real headless run on this machine, its RPC port already taken.
Contract: 002_…txt `spawn_prompt_rpc` in `run`."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from tests.seed.proc import clean_env


def test_a_taken_rpc_port_writes_prompt_rpc_failed_with_its_error(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "mvp_tui", "up", "--headless", "--gguf-local-path",
             str(tiny_gguf), "--rpc-bind", f"127.0.0.1:{port}"],
            capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
            env=clean_env(tmp_path / "state", MVP_NODE_PROVIDER="local"),
        )
    assert done.returncode != 0, done.stderr
    phases = [
        record["payload"]
        for record in map(json.loads, done.stdout.splitlines())
        if record.get("channel") == "mvp.orch.bootstrap"
    ]
    failed = [p for p in phases if p["phase"] == "prompt_rpc"]
    assert [p["status"] for p in failed] == ["failed"], failed
    error = failed[0]["detail"]["error"]
    assert f"cannot bind the prompt RPC to 127.0.0.1:{port}" in error, error
    assert error in done.stderr  # the run fails with the same error
    names = [p["phase"] for p in phases]
    assert "serve_prompts" not in names and "prompt_loop" not in names
    assert names.index("weights_loaded") < names.index("prompt_rpc")  # after the weights
