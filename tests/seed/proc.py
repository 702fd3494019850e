"""`python -m mvp_tui …` as a child with stdin, stdout and stderr piped, in a clean env (no
MVP_* or VAST* of the caller's), for the tests that talk to a run's stdin."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path


def clean_env(state: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MVP_", "VAST"))}
    return {**env, "MVP_STATE_DIR": str(state), **extra}


async def start_cli(args: list[str], env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mvp_tui", *args, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )
