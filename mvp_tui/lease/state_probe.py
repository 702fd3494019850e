"""The state dir's probe: can it take run records, written the way records are written?

`up` runs it before anything reaches a provider (a lease is recorded before it is created);
`mvp-tui check` runs the same probe."""

from __future__ import annotations

import os
from pathlib import Path

from mvp_tui.config.values import ConfigError
from mvp_tui.lease.atomic import write_atomic

# Room for a run's records (its record with many attempts and the endpoint beside it are a
# few KiB each; 64 KiB leaves them more than ten times that).
RECORD_ROOM_BYTES = 64 * 1024
FIX = (
    "fix its permissions or free space, or point [state] dir / MVP_STATE_DIR / --state-dir "
    "elsewhere"
)


def probe_state_dir(state_dir: Path, source: object) -> Path:
    """Write (atomically, fsynced) and remove a record-sized file under `state_dir`/runs;
    the runs directory on success, else a ConfigError naming the dir, its `source`, the
    cause and the fix. A disk with room for a few bytes but not for records fails here."""
    runs = state_dir / "runs"
    try:
        runs.mkdir(parents=True, exist_ok=True, mode=0o700)
        probe = runs / f".write-check-{os.getpid()}"  # per process: runs share the dir
        try:
            write_atomic(probe, bytes(RECORD_ROOM_BYTES))
        finally:
            probe.unlink(missing_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"[state] dir = {str(state_dir)!r} (from {source}) cannot take run records "
            f"({exc.strerror or exc}: {exc.filename or runs}); every lease is recorded before "
            "it is created, so nothing was rented",
            fix=FIX,
        ) from None
    return runs
