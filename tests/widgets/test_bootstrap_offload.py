"""The Bootstrap pane's "offload" row: what the engine's own load log says it put on the
GPUs (the agent's `EngineOffload` record), under the engine's row; absent on a CPU node."""

from __future__ import annotations

import json

from mvp_tui.node_protocol import ENGINE_OFFLOAD
from mvp_tui.widgets.bootstrap_model import BootstrapModel, StageId, Status
from tests.widgets.data import AGENT_CHANNEL, T0, agent_record

CUDA = {"CUDA0": 4403.5, "CPU_Mapped": 281.81}
PROBLEM = ("0/33 layers offloaded to GPU, but the engine's log names no CUDA device "
           "(model buffers: CPU 5,460 MiB): this llama-server runs on the CPU")


def offload(**fields: object) -> bytes:
    record = agent_record(ENGINE_OFFLOAD, T0 + 89, asked="all", layers=33, layers_total=33,
                          buffers_mib=CUDA, problem="", allowed=False)
    return json.dumps({**record, **fields}).encode()


def test_no_row_until_the_agent_proves_an_offload() -> None:
    model = BootstrapModel()
    assert model.offload is None and all(row.name != "offload" for row in model.rows())


def test_every_layer_on_cuda0_is_a_done_row_under_the_engine() -> None:
    model = BootstrapModel()
    assert model.record(AGENT_CHANNEL, offload(), T0)
    row = model.offload
    assert row is not None and row.status is Status.DONE
    assert row.detail == "33/33 layers · CUDA0 4,404 MiB" and row.compact == "33/33 layers"
    rows = model.rows()
    assert rows[rows.index(model.stages[StageId.ENGINE]) + 1] is row


def test_a_shortfall_fails_the_row_with_why_unless_it_was_allowed() -> None:
    model = BootstrapModel()
    assert model.record(AGENT_CHANNEL, offload(layers=0, buffers_mib={"CPU": 5459.93},
                                               problem=PROBLEM + "\x1b[31m"), T0)
    row = model.offload
    assert row is not None and row.status is Status.FAILED and model.failed
    assert row.detail == "0/33 layers · no GPU buffer"
    assert row.full.endswith("this llama-server runs on the CPU") and "\x1b" not in row.full
    allowed = BootstrapModel()
    assert allowed.record(AGENT_CHANNEL, offload(layers=20, problem="only 20/33", allowed=True), T0)
    assert allowed.offload is not None and allowed.offload.status is Status.DONE
    assert allowed.offload.detail.endswith("(short: allow_partial_offload)")


def test_a_malformed_record_is_not_shown() -> None:
    model = BootstrapModel()
    assert not model.record(AGENT_CHANNEL, offload(layers="all"), T0)
    assert model.offload is None
