"""A GPU run that would be a CPU run: `mvp-tui up --headless` on this machine, as a node
with a GPU (a fake `nvidia-smi` on PATH answering the probe with one H100) whose
`llama-server` (the fake) prints a CPU build's recorded load log (tests/agent/logs/
cpu_build_ngl0.log: `offloaded 0/3 layers to GPU`, host buffers only). The attempt fails
with the cause, the run ends without serving, and the host journal keeps what the engine's
log said."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mvp_tui.lease.host_journal import HostJournal
from tests.e2e.headless import HeadlessRun
from tests.fakes.tiny_gguf import write_tiny_gguf

ROOT = Path(__file__).resolve().parents[1]
FAKE_SERVER = ROOT / "agent" / "fake_llama_server.py"
CPU_LOG = ROOT / "agent" / "logs" / "cpu_build_ngl0.log"
H100 = "NVIDIA H100 80GB HBM3, 81559 MiB"


def gpu_node_bin(bin_dir: Path) -> Path:
    """`llama-server` (the fake) and an `nvidia-smi` that reports one H100, to put first on
    PATH: the local node's probe and engine find them there."""
    bin_dir.mkdir()
    server = bin_dir / "llama-server"
    server.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_SERVER}" "$@"\n')
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!{sys.executable}\nprint({H100!r})\n")
    for tool in (server, smi):
        tool.chmod(0o755)
    return bin_dir


async def test_a_gpu_node_whose_engine_offloaded_nothing_fails_the_attempt(
    tmp_path: Path,
) -> None:
    model = write_tiny_gguf(tmp_path / "tiny.gguf", seed=0)
    bin_dir = gpu_node_bin(tmp_path / "bin")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "FAKE_LOG_FILE": str(CPU_LOG),
           "FAKE_READY_HINT_AFTER_S": "0.2", "MVP_PROVIDER": "local"}
    args = ["--gguf-local-path", str(model), "--prompt", "hello", "--max-tokens", "4",
            "--rpc-bind", "127.0.0.1:0"]
    state = tmp_path / "state"
    async with HeadlessRun(args, state, env=env) as run:
        code = await run.finish()
    assert code != 0, run.stderr
    assert not run.events("node_ready") and not run.events("prompt_done")
    (abandoned,) = run.events("attempt_abandoned")
    assert abandoned["scope"] == "host"  # the host's failure: the walk would try the next
    assert abandoned["reason"].startswith("GPU offload not proven: 0/3 layers offloaded to GPU")
    assert "names no CUDA device" in abandoned["reason"]
    assert "allow_partial_offload" in abandoned["fix"]
    (line,) = HostJournal(state).read()
    assert not line.ok and "GPU offload not proven" in line.reason
    assert line.offload is not None
    assert (line.offload.layers, line.offload.total, line.offload.asked) == (0, 3, "all")
    assert dict(line.offload.buffers_mib) == {"CPU_Mapped": 0.72}
    assert not line.offload.proven
    assert line.offload.summary() == "0/3 layers · no GPU buffer (not proven)"
    # As the file holds it, for `mvp-tui hosts` and the next run.
    raw = json.loads((state / "hosts.jsonl").read_text().splitlines()[0])
    assert raw["offload"]["layers"] == 0 and raw["offload"]["buffers_mib"] == {"CPU_Mapped": 0.72}
