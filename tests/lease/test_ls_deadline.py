"""`mvp-tui ls` shows each lease's node deadline: running_at + the run's [limits] max_hours,
read from the run record (no provider call), in the text table and as `deadline_at` in JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from mvp_tui.lease import LeaseRecord, LeaseRecordState, RecordStore
from mvp_tui.lease.deadline import deadline_at, max_hours

RUNNING_AT = 1_764_504_253.7  # 2025-11-30 12:04:13.7 UTC


def _lease(run_id: str, provider_id: str, state: LeaseRecordState, **extra: Any) -> LeaseRecord:
    values: dict[str, Any] = {
        "provider": "vastai",
        "label": f"mvp-{run_id}-1-1",
        "node_id": 1,
        "offer_id": "1003",
        "gpu_name": "RTX A6000",
        "price_per_hour": 0.41,
        "state": state,
        "provider_id": provider_id,
        "created_at": RUNNING_AT - 41.2,
        "running_at": RUNNING_AT,
        **extra,
    }
    return LeaseRecord(**values)


def _write(store: RecordStore, run_id: str, config: dict[str, Any], *leases: LeaseRecord) -> None:
    record = store.create_run(
        run_id, provider="vastai", label_prefix="mvp", created_at=RUNNING_AT - 60, config=config
    )
    record.leases.extend(leases)
    store.save(record)


def _ls(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MVP_", "VAST", "RUNPOD"))}
    env.update(MVP_STATE_DIR=str(state), TZ="UTC")
    return subprocess.run(
        [sys.executable, "-m", "mvp_tui", "ls", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_ls_json_and_text_show_the_node_deadline(tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = RecordStore(state)
    _write(
        store,
        "r-0a1b",
        {"limits.max_hours": 2.5, "vastai.api_key": "<redacted>"},
        _lease("r-0a1b", "7003", LeaseRecordState.RUNNING),
        _lease("r-0a1b", "7002", LeaseRecordState.DELETED, deleted_at=RUNNING_AT + 26),
    )
    _write(store, "r-0a1c", {}, _lease("r-0a1c", "7100", LeaseRecordState.RUNNING))  # no limit
    _write(  # created, never ran: no deadline yet
        store,
        "r-0a1d",
        {"limits.max_hours": 0.01},
        _lease("r-0a1d", "7200", LeaseRecordState.PENDING, running_at=None),
    )

    result = _ls(state, "--json")
    assert result.returncode == 0, result.stderr
    rows = {row["provider_id"]: row for row in map(json.loads, result.stdout.splitlines())}
    assert set(rows) == {"7003", "7100", "7200"}  # the deleted one may not bill: not listed
    assert rows["7003"]["deadline_at"] == round(RUNNING_AT + 2.5 * 3600, 3)
    assert rows["7100"]["deadline_at"] is None
    assert rows["7200"]["deadline_at"] is None

    everything = _ls(state, "--json", "--all")
    listed = {row["provider_id"]: row for row in map(json.loads, everything.stdout.splitlines())}
    assert listed["7002"]["deadline_at"] == rows["7003"]["deadline_at"]  # the run's limit

    text = _ls(state)
    assert text.returncode == 0, text.stderr
    line = next(x for x in text.stdout.splitlines() if "7003" in x)
    assert "ends 2025-11-30 14:34 (passed)" in line  # TZ=UTC; that time is long gone
    assert "no deadline" in next(x for x in text.stdout.splitlines() if "7100" in x)


def test_max_hours_from_the_record_config() -> None:
    assert max_hours({"limits.max_hours": 0.01}) == 0.01
    assert max_hours({"limits": {"max_hours": 3}}) == 3.0  # a nested table works too
    assert max_hours({"limits.max_hours": 0}) is None  # 0: no limit
    assert max_hours({"limits.max_hours": True}) is None
    assert max_hours({"limits.max_hours": "2"}) is None
    assert max_hours({"limits.max_hours": float("nan")}) is None
    assert max_hours({}) is None
    lease = _lease("r-1", "1", LeaseRecordState.RUNNING)
    assert deadline_at(lease, {"limits.max_hours": 0.01}) == round(RUNNING_AT + 36.0, 3)


def test_ls_shows_each_run_idle_stop(tmp_path: Path) -> None:
    from mvp_tui.lease.endpoint_record import EndpointRecord, save_endpoint

    state = tmp_path / "state"
    store = RecordStore(state)
    _write(store, "r-0b01", {}, _lease("r-0b01", "7301", LeaseRecordState.RUNNING))
    _write(store, "r-0b02", {}, _lease("r-0b02", "7302", LeaseRecordState.RUNNING))
    save_endpoint(store, "r-0b01", EndpointRecord(api_key="mvp-k" * 8, idle_stop_mins=30.0))
    listed = _ls(state, "--json").stdout.splitlines()
    rows = {row["provider_id"]: row for row in map(json.loads, listed)}
    assert rows["7301"]["idle_stop_mins"] == 30.0 and rows["7302"]["idle_stop_mins"] is None
    text = _ls(state).stdout.splitlines()
    assert "idle stop 30 min" in next(x for x in text if "7301" in x)
    assert "idle stop off" in next(x for x in text if "7302" in x)
    assert "mvp-k" not in "\n".join(text)  # never the key


def test_ls_says_per_run_what_may_still_bill_and_its_rate(tmp_path: Path) -> None:
    """From the ledger rebuilt from each record: a run with a lease left running says how
    many may bill, at what $/h and what they cost so far; each lease's spend is in JSON."""
    state = tmp_path / "state"
    store = RecordStore(state)
    _write(store, "r-live", {},
           _lease("r-live", "7001", LeaseRecordState.DELETED, deleted_at=RUNNING_AT + 100,
                  price_per_hour=0.30),
           _lease("r-live", "7002", LeaseRecordState.RUNNING))
    done = _ls(state, "--json")
    rows = {r["provider_id"]: r for r in map(json.loads, done.stdout.splitlines())
            if "provider_id" in r}
    assert set(rows) == {"7002"}  # a closed lease is not listed without --all
    assert rows["7002"]["may_bill"] is True and rows["7002"]["spent_usd"] > 0
    text = _ls(state, "--all").stdout
    assert "run r-live: 1 lease(s) may bill · $0.410/h · $" in text, text
    line = next(x for x in text.splitlines() if x.startswith("run r-live:"))
    spent = float(line.rsplit("$", 1)[1].split()[0].replace(",", ""))
    # The deleted one's spend (141.2 s at $0.30/h) plus the running one's so far.
    assert spent > 0.30 * 141.2 / 3600
