"""Fixtures of the lease tests: a record store in tmp_path and millisecond timings."""

from __future__ import annotations

from pathlib import Path

import pytest

from mvp_tui.lease import RecordStore, WalkSettings

TAG = "a1b2c3d4e5"  # the install tag of `fast_settings` ([lease] owner_tag)


def fast_settings(**overrides: object) -> WalkSettings:
    """Production logic with millisecond waits."""
    values: dict[str, object] = {
        "reconcile_waits_s": (0.0, 0.01),
        "poll_interval_s": 0.005,
        "ready_timeout_s": 0.5,
        "delete_timeout_s": 0.3,
        "delete_poll_s": 0.005,
        "destroy_attempts": 4,
        "destroy_backoff_s": 0.001,
        "destroy_backoff_max_s": 0.004,
        "image": "ghcr.io/example/node:1",
        "disk_gb": 20,
        "owner_tag": TAG,
    }
    values.update(overrides)
    return WalkSettings(**values)  # type: ignore[arg-type]


@pytest.fixture
def store(tmp_path: Path) -> RecordStore:
    return RecordStore(tmp_path / "state")
