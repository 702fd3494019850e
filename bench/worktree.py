"""What a bench passes on to the processes it measures when run from a development worktree."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def worktree_env() -> dict[str, str]:
    """A development worktree's redirect (`MVP_WT` and the PYTHONPATH of its sitecustomize)
    passed on, so the processes measured run this checkout's code, widgets included (the
    benches' child environments drop `MVP_*` and set PYTHONPATH to the repo)."""
    if not os.environ.get("MVP_WT"):
        return {}
    path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {"MVP_WT": os.environ["MVP_WT"], "PYTHONPATH": os.pathsep.join([*path, str(REPO)])}
