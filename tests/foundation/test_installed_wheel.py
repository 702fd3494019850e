"""mvp-tui installed as CLI apps are installed (`pipx install`, `uv tool install`): the wheel,
built from the sdist, in a venv outside the checkout at the lock's versions, serves a headless
run of the local node to "nothing bills" with the node agent built from the installed package
(scripts/wheel-check.sh does the work and says each step)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.prompt.engine import require_engine

REPO = Path(__file__).resolve().parents[2]


def test_the_installed_wheel_serves_a_local_run_to_nothing_bills(tmp_path: Path) -> None:
    require_engine()  # the run serves the tiny model with llama-cpp-python's server
    done = subprocess.run(
        [str(REPO / "scripts" / "wheel-check.sh"), str(tmp_path)],
        capture_output=True, text=True, timeout=900,
        env={**{k: v for k, v in os.environ.items() if not k.startswith(("MVP_", "VAST"))},
             # From uv's cache only: the set-up filled it, and a test needs no registry.
             "PYTHON": sys.executable, "TMPDIR": str(tmp_path), "UV_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stderr[-4000:]
    said = done.stderr.splitlines()
    assert said[-1].startswith("wheel-check: ok: mvp_tui-"), said[-5:]
    agent = next(line for line in said if line.startswith("wheel-check: agent "))
    assert f"{tmp_path}/app/lib/" in agent and "/site-packages/mvp_tui" in agent, agent
