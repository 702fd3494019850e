"""Screens that matter, as SVG snapshots: fixed size, clock, config and theme."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC

import pytest
from textual.pilot import Pilot

from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.engine.events import NodeWatchdog
from mvp_tui.tui.app import MvpApp
from mvp_tui.widgets.bootstrap import BootstrapPane
from mvp_tui.widgets.bootstrap_model import StageId, Status
from mvp_tui.widgets.leases import LeasesPane
from tests.tui.apps import make_app
from tests.widgets.data import (
    DEADLINE,
    NO_KEY_REASON,
    RUN,
    T0,
    downloading,
    fixed_clock,
    publish_node,
    settle,
    ssh_events,
    wait_until,
    walk_events,
    watchdog_failed,
    watchdog_ready,
)

RunBefore = Callable[[Pilot[None]], Awaitable[None]]


@pytest.mark.parametrize("theme", ["mvp-dark", "mvp-light"])
@pytest.mark.parametrize("size", [(160, 48), (100, 30)])
def test_shell(snap_compare, theme: str, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(make_app(theme=theme), terminal_size=size)


def test_help_screen(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(make_app(), press=["question_mark"], terminal_size=(160, 48))


# -- the node's dead-man's switch, in the composed dashboard --------------------------------
SIZES = [(160, 48), (100, 30)]
SIZE_IDS = ["160x48", "100x30"]
VASTAI = {"MVP_PROVIDER": "vastai"}  # the provider the walk's leases came from


def switch_run(
    hub: ChannelHub, records: list[dict[str, object]], verdict: NodeWatchdog
) -> RunBefore:
    """The walk and SSH events, then the node's frames and the switch's verdict, in the
    order a run brings them."""

    async def run_before(pilot: Pilot[None]) -> None:
        app = pilot.app
        assert isinstance(app, MvpApp)
        for event in [*walk_events(), *ssh_events()]:
            app.dashboard.route(event)
        await pilot.pause()
        publish_node(hub, *records)
        app.dashboard.route(verdict)
        model = app.query_one(BootstrapPane).model
        await wait_until(pilot, lambda: model.stages[StageId.WATCHDOG].status is not Status.PENDING)
        await pilot.pause()
        # The lease table measured its switch column while the panes were still settling
        # (a resize, a header tick): lay it out once more at the final size.
        app.query_one(LeasesPane)._render_leases()
        await settle(pilot)
        # The screenshot ends with `App.exit`, which asks first while a lease is live; this
        # shell has no engine holding one, so let that exit through.
        app._exit_cleared = True

    return run_before


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_node_switch_armed(snap_compare, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    """Bootstrap: the switch's row done with its deadline and silence limit; Leases: the
    running lease with its deadline (a column, or a line below the table when narrow)."""
    hub = ChannelHub(clock=lambda: 0.0)
    app = make_app(hub=hub, wall=fixed_clock(T0 + 95), tz=UTC, env=VASTAI)
    verdict = NodeWatchdog(
        at=T0 + 80.4,
        run_id=RUN,
        status="ready",
        deadline_at=DEADLINE,
        idle_teardown_mins=20.0,
        armed=True,
    )
    run_before = switch_run(hub, [watchdog_ready(), *downloading()], verdict)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_node_switch_failed(snap_compare, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    """Bootstrap: the switch's row failed with its reason (wrapped where there is room);
    Leases: "switch FAILED" on the lease and the reason in its history line."""
    hub = ChannelHub(clock=lambda: 0.0)
    app = make_app(hub=hub, wall=fixed_clock(T0 + 95), tz=UTC, env=VASTAI)
    verdict = NodeWatchdog(
        at=T0 + 81.9,
        run_id=RUN,
        status="failed",
        reason=NO_KEY_REASON,
        deadline_at=DEADLINE,
        idle_teardown_mins=20.0,
    )
    run_before = switch_run(hub, [watchdog_failed()], verdict)
    assert snap_compare(app, terminal_size=size, run_before=run_before)
