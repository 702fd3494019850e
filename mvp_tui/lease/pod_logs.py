"""The last log lines of a lease, read before it is deleted (seed 003 `logs::drain`: RunPod
drops a pod's logs with the pod).

Only a provider that serves them (`PodLogReader`: RunPod's `GET /v2/pods/{id}/logs`) is
asked. Best effort and bounded: a slow or failing log API never holds up or fails a delete.
The lines are untrusted text: cleaned and redacted by the provider, then written to
`<state dir>/runs/<run>/pod-logs/<id>.log` (mode 600, atomically).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Protocol, runtime_checkable

from mvp_tui.lease.atomic import write_atomic
from mvp_tui.lease.records import RecordStore
from mvp_tui.providers.base import ProviderError

LAST_LINES = 100  # the log API's own default backfill
READ_TIMEOUT_S = 5.0
_SAFE_ID = re.compile(r"[^A-Za-z0-9_.-]")


@runtime_checkable
class PodLogReader(Protocol):
    """A provider that serves an instance's recent log lines."""

    async def last_log_lines(self, provider_id: str, lines: int) -> list[str]: ...


def log_path(store: RecordStore, run_id: str, provider_id: str) -> Path:
    name = _SAFE_ID.sub("_", provider_id)[:128] or "pod"
    return store.run_dir(run_id) / "pod-logs" / f"{name}.log"


async def save_last_logs(
    provider: object, store: RecordStore, run_id: str, provider_id: str
) -> Path | None:
    """Read and keep the instance's last log lines; the file, or None when none were read."""
    if not isinstance(provider, PodLogReader):
        return None
    try:
        async with asyncio.timeout(READ_TIMEOUT_S):
            lines = await provider.last_log_lines(provider_id, LAST_LINES)
    except (ProviderError, TimeoutError, OSError):
        return None
    if not lines:
        return None
    path = log_path(store, run_id, provider_id)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_atomic(path, ("\n".join(lines) + "\n").encode())
    except OSError:
        return None
    return path
