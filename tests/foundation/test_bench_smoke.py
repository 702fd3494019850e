"""Every bench still runs: each at `--smoke` size (tiny inputs, no targets) in its own process,
so a bench that no longer matches the code fails here, not on the day someone measures.
Benches print figures; nothing here asserts on one. A bench that needs a peer (sshd, the
llama-cpp-python server, the llama.cpp RPC binaries, dockerd) follows the peer rule: it
skips on a laptop without it and fails under CI=true."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.docker.conftest import docker_host  # noqa: F401  (the session's private dockerd)
from tests.peers import require_llama_rpc
from tests.prompt.engine import require_engine
from tests.ssh.sshd import sshd_executable

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"
TIMEOUT_S = 120  # a hung bench fails; the smoke sizes take seconds


def _sshd() -> None:
    sshd_executable()


PEERS: dict[str, tuple[Callable[[], object], ...]] = {
    "bench_agent_start": (),
    "bench_attempts": (),
    "bench_bringup": (_sshd, require_engine),
    "bench_dashboard_tokens": (),
    "bench_datastream": (),
    "bench_docker": (require_engine,),  # and dockerd: the fixture below
    "bench_gate": (require_engine,),
    "bench_local_ready": (require_engine,),
    "bench_multinode": (require_engine, require_llama_rpc),
    "bench_prompt": (require_engine,),
    "bench_ranking": (),
    "bench_runpod": (),
    "bench_soak": (),  # the fake llama-server, no peer
    "bench_ssh": (_sshd,),
    "bench_startup": (),
    "bench_ui": (),
    "bench_vast_offers": (),
    "bench_walk": (),
}


def test_every_bench_is_smoked() -> None:
    assert sorted(p.stem for p in BENCH.glob("bench_*.py")) == sorted(PEERS)


@pytest.mark.parametrize("name", sorted(PEERS))
def test_the_bench_runs_at_smoke_size(name: str, request: pytest.FixtureRequest) -> None:
    for require in PEERS[name]:
        require()
    # No user settings reach a bench; where the peers live does (the RPC build, the image
    # cache, a worktree's redirect).
    kept = ("MVP_LLAMA_CACHE", "MVP_TEST_", "MVP_WT")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MVP_", "VAST")) or k.startswith(kept)}
    if name == "bench_docker":
        env["MVP_TEST_DOCKER_HOST"] = request.getfixturevalue("docker_host")
    done = subprocess.run(
        [sys.executable, str(BENCH / f"{name}.py"), "--smoke"], cwd=REPO, env=env,
        capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
    )
    assert done.returncode == 0, f"{name} --smoke exited {done.returncode}:\n" + (
        done.stdout[-2000:] + done.stderr[-3000:]
    )
    assert done.stdout.strip(), f"{name} --smoke printed no figures"
