"""GPU offload in the Bootstrap pane, as SVG snapshots of the composed dashboard (fixed size,
clock and data): the "offload" row under the engine's, from the agent's `EngineOffload`
record: every layer on CUDA0 on a serving node (wide), and a GPU node whose llama-server put
none of them on a GPU, failed with why (narrow)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC

import pytest
from textual.pilot import Pilot

from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.engine.events import NodeReady
from mvp_tui.events import EngineEvent
from mvp_tui.node_protocol import ENGINE_OFFLOAD
from mvp_tui.tui.app import MvpApp
from mvp_tui.widgets.bootstrap import BootstrapPane
from mvp_tui.widgets.bootstrap_model import StageId, Status
from tests.tui.apps import make_app
from tests.widgets.data import (
    RUN,
    T0,
    agent_record,
    fixed_clock,
    publish_node,
    ssh_events,
    wait_until,
    walk_events,
    watchdog_ready,
)

RunBefore = Callable[[Pilot[None]], Awaitable[None]]
# What tests/agent/logs/cuda_v100_ggml_ci.log and cpu_build_ngl0.log give the agent.
PROVEN = {"asked": "all", "why": "the fit: 1,700 MiB needed, 81,559 MiB VRAM", "layers": 33,
          "layers_total": 33, "buffers_mib": {"CUDA0": 1454.83, "CPU_Mapped": 69.08},
          "gpus": ["NVIDIA H100 80GB HBM3"], "problem": "", "allowed": False}
SHORT = ("0/33 layers offloaded to GPU, but the engine's log names no CUDA device (model "
         "buffers: CPU 5,460 MiB): this llama-server runs on the CPU (a build without CUDA, "
         "or its CUDA backend did not load)")
REFUSED = {**PROVEN, "layers": 0, "buffers_mib": {"CPU": 5459.93}, "problem": SHORT}


def engine_started(at: float) -> dict[str, object]:
    return agent_record("NodeAgentPhase", at, phase="engine_start", status="ready", detail={})


def proven() -> list[dict[str, object]]:
    loaded = agent_record("WeightsLoaded", T0 + 92.8, model_id="llama-3.2-1b",
                          engine="llama-server", port=8642, load_ms=5100, auth="key")
    # No engine_start record: the pane reads the weights channel before the agent's within
    # one poll, and a real node sends them seconds apart.
    return [watchdog_ready(), agent_record(ENGINE_OFFLOAD, T0 + 92.7, **PROVEN), loaded]


def refused() -> list[dict[str, object]]:
    failed = agent_record(
        "NodeAgentPhase", T0 + 92.8, phase="engine_health", status="failed",
        detail={"reason": f"GPU offload not proven: {SHORT}",
                "fix": "this host is given up for the next offer; set [model] "
                       "allow_partial_offload = true to serve anyway, or choose an image "
                       "whose llama-server is built with CUDA"})
    return [watchdog_ready(), engine_started(T0 + 87.5),
            agent_record(ENGINE_OFFLOAD, T0 + 92.7, **REFUSED), failed]


def posting(events: Sequence[EngineEvent], frames: Sequence[dict[str, object]],
            status: Status, engine: str) -> RunBefore:
    """The lease's events, then the node's frames; settled once the offload row and the
    engine's (its last frame: `engine` starts its detail) say what they will."""

    async def run_before(pilot: Pilot[None]) -> None:
        app = pilot.app
        assert isinstance(app, MvpApp) and app.hub is not None
        for event in events:
            app.dashboard.route(event)
        publish_node(app.hub, *frames)
        model = app.query_one(BootstrapPane).model
        await wait_until(pilot, lambda: model.offload is not None
                         and model.offload.status is status
                         and model.stages[StageId.ENGINE].detail.startswith(engine))
        await pilot.pause()
        app._exit_cleared = True  # no engine holds the lease shown: let the exit through

    return run_before


def _app() -> MvpApp:
    return make_app(hub=ChannelHub(clock=lambda: 0.0), wall=fixed_clock(T0 + 95.3), tz=UTC,
                    env={"MVP_PROVIDER": "vastai"})


@pytest.mark.parametrize(
    ("case", "size"), [("proven", (160, 48)), ("refused", (100, 30))], ids=["proven", "refused"]
)
def test_bootstrap_with_the_offload_row(snap_compare, case: str, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    events: list[EngineEvent] = [*walk_events(), *ssh_events()]
    if case == "proven":
        events.append(NodeReady(at=T0 + 93, run_id=RUN, model_id="llama-3.2-1b",
                                engine="llama-server", local_url="http://127.0.0.1:8642"))
        run_before = posting(events, proven(), Status.DONE, "llama-3.2-1b on :8642")
    else:
        run_before = posting(events, refused(), Status.FAILED, "GPU offload not proven")
    assert snap_compare(_app(), terminal_size=size, run_before=run_before)
