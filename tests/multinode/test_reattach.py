"""A multi-node run is not re-attached (its workers' sessions would not be re-made): the user
is told how to end it instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from mvp_tui.config import ConfigPaths, load_config
from mvp_tui.engine.run import RunEngine, RunFailed
from mvp_tui.lease.records import LeaseRecord, LeaseRecordState, RecordStore
from mvp_tui.lease.restart import OpenLease


def _lease(node: int) -> LeaseRecord:
    return LeaseRecord(
        provider="local", label=f"mvp-orchestrator-r-00000abc-{node}", node_id=node,
        offer_id="local", gpu_name="CPU", price_per_hour=0.0, state=LeaseRecordState.RUNNING,
        provider_id=f"local-{100 + node}", created_at=1.0, running_at=1.0,
    )


def test_a_run_of_several_nodes_is_not_re_attached(tmp_path: Path) -> None:
    state = tmp_path / "state"
    config = load_config(
        env={"MVP_STATE_DIR": str(state), "MVP_NODE_PROVIDER": "local"},
        paths=ConfigPaths(default=tmp_path / "absent.toml"),
    )
    store = RecordStore(config.state_dir)
    record = store.create_run("r-00000abc", provider="local",
                              label_prefix="mvp-orchestrator", created_at=1.0)
    record.leases += [_lease(2), _lease(1)]
    store.save(record)
    engine = RunEngine(config, lambda event: None, environ={})
    with pytest.raises(RunFailed, match=r"leases of 2 nodes.*mvp-tui down r-00000abc"):
        engine.leasing.adopt(OpenLease("r-00000abc", record.leases[1], exists=True))
    assert engine.leases.lease_record is None
