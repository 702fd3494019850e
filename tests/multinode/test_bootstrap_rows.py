"""The Bootstrap checklist of a multi-node run: a row per worker and the MiB on each node."""

from __future__ import annotations

import json

from mvp_tui.lease.events import LeaseRunning
from mvp_tui.widgets.bootstrap_model import BootstrapModel, StageId, Status


def _record(**fields: object) -> bytes:
    return json.dumps(fields).encode()


def test_worker_rows_and_placement_per_node() -> None:
    model = BootstrapModel()
    running = dict(run_id="r-00000001", label="x", host="", port=0, user="", via="none",
                   after_s=0.0, price_per_hour=0.0)
    model.apply(LeaseRunning(at=1.0, provider_id="local-11", **running))
    worker_config = _record(type="NodeAgentPhase", node_id=2, phase="config", status="ready",
                            detail={"role": "worker"}, at=2.0)
    assert model.record("mvp.node.2.agent", worker_config, 2.0)
    ready = _record(type="RpcServerReady", node_id=2, endpoint="127.0.0.1:5000", at=3.0)
    assert model.record("mvp.worker.weights", ready, 3.0)
    # The main node is leased next: a new lease, the same run — the worker's row stays.
    model.apply(LeaseRunning(at=4.0, provider_id="local-12", **running))
    main_start = _record(type="NodeAgentPhase", node_id=1, phase="engine_start",
                         status="started", detail={}, at=5.0)
    model.record("mvp.node.1.agent", main_start, 5.0)
    loaded = _record(type="WeightsLoaded", node_id=1, model_id="tiny", port=8080, load_ms=900,
                     placement_mib={"CPU_Mapped": 0.3, "127.0.0.1:5000": 1.25}, at=6.0)
    model.record("mvp.worker.weights", loaded, 6.0)
    (worker,) = [row for row in model.rows() if row.name == "worker node 2"]
    assert worker.status is Status.DONE
    assert worker.detail == "RPC server on 127.0.0.1:5000 · 1.2 MiB"
    engine = model.stages[StageId.ENGINE]
    assert engine.status is Status.DONE and engine.detail.endswith("MiB here 0.3, node 2 1.2")


def test_a_failed_worker_shows_on_its_row_not_the_main_engine() -> None:
    model = BootstrapModel()
    config = _record(type="NodeAgentPhase", node_id=3, phase="config", status="ready",
                     detail={"role": "worker"}, at=1.0)
    model.record("mvp.node.3.agent", config, 1.0)
    fatal = _record(type="WorkerFatal", node_id=3, reason="ggml-rpc-server is not in PATH")
    model.record("mvp.worker.weights", fatal, 2.0)
    (row,) = [r for r in model.rows() if r.name == "worker node 3"]
    assert row.status is Status.FAILED and "not in PATH" in row.detail
    assert model.stages[StageId.ENGINE].status is Status.PENDING
