"""The run's endpoint and the node's idle stop, as SVG snapshots of the composed dashboard
(fixed size, clock and data): the Prompt pane's border with the local OpenAI address and its
key, the Bootstrap pane's idle-stop row under the switch, and the idle stop's warning toast."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC

import pytest
from textual.pilot import Pilot

from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.engine.events import EndpointReady, IdleStopNotice, NodeReady
from mvp_tui.events import EngineEvent
from mvp_tui.tui.app import MvpApp
from mvp_tui.widgets.bootstrap import BootstrapPane
from mvp_tui.widgets.prompt import PromptPane
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

VASTAI = {"MVP_PROVIDER": "vastai"}
SIZES = [(160, 48), (100, 30)]
SIZE_IDS = ["160x48", "100x30"]
URL = "http://127.0.0.1:8642"
RunBefore = Callable[[Pilot[None]], Awaitable[None]]


def serving() -> list[EngineEvent]:
    return [
        *walk_events(),
        *ssh_events(),
        NodeReady(at=T0 + 93, run_id=RUN, model_id="llama-3.2-1b", engine="llama-server",
                  local_url=URL),
        EndpointReady(at=T0 + 93.1, run_id=RUN, base_url=URL, model="llama-3.2-1b",
                      auth="key", idle_stop_mins=30.0),
    ]


def idle_stop_frames(*states: tuple[str, float | None]) -> list[dict[str, object]]:
    loaded = agent_record("WeightsLoaded", T0 + 92.8, model_id="llama-3.2-1b",
                          engine="llama-server", port=8642, load_ms=5100, auth="key",
                          idle_stop_mins=30.0)
    records: list[dict[str, object]] = [watchdog_ready(idle_stop_mins=30.0), loaded]
    for index, (state, left) in enumerate(states):
        extra = {"stops_in_s": left} if left is not None else {}
        records.append(agent_record("NodeAgentProgress", T0 + 90 + index, phase="watchdog",
                                    state=state, idle_stop_mins=30.0, **extra))
    return records


def posting(
    events: Sequence[EngineEvent],
    settled: Callable[[MvpApp], bool],
    frames: Sequence[dict[str, object]] = (),
) -> RunBefore:
    async def run_before(pilot: Pilot[None]) -> None:
        app = pilot.app
        assert isinstance(app, MvpApp)
        for event in events:
            app.dashboard.route(event)
        if frames:
            assert app.hub is not None
            publish_node(app.hub, *frames)
        await wait_until(pilot, lambda: settled(app))
        await pilot.pause()
        app._exit_cleared = True  # no engine holds the lease shown: let the exit through

    return run_before


def _app() -> MvpApp:
    return make_app(hub=ChannelHub(clock=lambda: 0.0), wall=fixed_clock(T0 + 95.3), tz=UTC,
                    env=VASTAI)


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_prompt_pane_with_the_endpoint_line(snap_compare, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    """The Prompt pane's border: the model, and where other tools reach it (with the key)."""

    def settled(app: MvpApp) -> bool:
        return app.query_one(PromptPane).endpoint_note == "OpenAI, key: y"

    assert snap_compare(_app(), terminal_size=size, run_before=posting(serving(), settled))


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_bootstrap_with_the_idle_stop_row(snap_compare, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    """Bootstrap: the idle stop armed, with its window, under the node switch's row."""

    def settled(app: MvpApp) -> bool:
        row = app.query_one(BootstrapPane).model.idle_stop
        return row is not None and row.detail.startswith("armed")

    frames = idle_stop_frames(("idle_stop_armed", None))
    assert snap_compare(_app(), terminal_size=size,
                        run_before=posting(serving(), settled, frames))


def test_the_idle_stop_warning_toast(snap_compare) -> None:  # type: ignore[no-untyped-def]
    """Two minutes before the node stops itself: a warning toast saying how to keep it."""
    warning = IdleStopNotice(at=T0 + 95, run_id=RUN, state="warning", idle_stop_mins=30.0,
                             stops_in_s=120.0)

    def settled(app: MvpApp) -> bool:
        row = app.query_one(BootstrapPane).model.idle_stop
        return bool(app._notifications) and row is not None and row.detail.startswith("stops")

    frames = idle_stop_frames(("idle_stop_armed", None), ("idle_stop_warning", 120.0))
    run_before = posting([*serving(), warning], settled, frames)
    assert snap_compare(_app(), terminal_size=(160, 48), run_before=run_before)


async def test_the_prompt_panes_endpoint_line_says_one_request_at_a_time() -> None:
    """An engine that serves one request at a time (llama-cpp-python's server: the node says
    one slot): the Prompt pane's endpoint line says so, for the tools pointed at it."""
    *before, ready = serving()
    assert isinstance(ready, EndpointReady)
    app = _app()
    async with app.run_test(size=(100, 30)) as pilot:
        for event in [*before, dataclasses.replace(ready, slots=1)]:
            app.dashboard.route(event)
        pane = app.query_one(PromptPane)
        await wait_until(pilot, lambda: "one request" in pane.endpoint_note)
        assert str(pane.border_subtitle).endswith(
            f"also on {URL.removeprefix('http://')} (OpenAI, key: y, one request at a time)")
        app._exit_cleared = True
