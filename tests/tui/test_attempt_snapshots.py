"""The walk across hosts, as SVG snapshots of the composed dashboard (fixed size, clock and
data): the Leases pane with a host that failed at SSH and a serving node lost and replaced,
and the Bootstrap pane with each stage's budget while SSH is being waited for."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC

import pytest
from textual.pilot import Pilot

from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.engine.events import (
    AttemptAbandoned,
    NodeReady,
    NodeReplacing,
    StageBudget,
    WalkOrderSaid,
)
from mvp_tui.events import EngineEvent
from mvp_tui.lease import events as ev
from mvp_tui.ssh.events import AttemptOutcome, SshAttempt
from mvp_tui.tui.app import MvpApp
from mvp_tui.widgets.bootstrap import BootstrapPane
from mvp_tui.widgets.bootstrap_model import StageId
from mvp_tui.widgets.leases import LeasesPane
from tests.tui.apps import make_app
from tests.widgets.data import RUN, T0, fixed_clock, wait_until

VASTAI = {"MVP_PROVIDER": "vastai"}
SIZES = [(160, 48), (100, 30)]
SIZE_IDS = ["160x48", "100x30"]
RunBefore = Callable[[Pilot[None]], Awaitable[None]]


def leased(at: float, attempt: int, offer: str, lease: str, price: float) -> list[EngineEvent]:
    """One offer created and running."""
    label = f"mvp-{RUN}-1-{attempt}"
    return [
        ev.AttemptStarted(at=at, run_id=RUN, label=label, offer_id=offer, gpu_name="RTX 4090",
                          price_per_hour=price, attempt=attempt),
        ev.AttemptAnswered(at=at + 0.4, run_id=RUN, label=label, offer_id=offer,
                           outcome="created", http_status=200, detail="", provider_id=lease),
        ev.LeaseRunning(at=at + 20, run_id=RUN, provider_id=lease, label=label, host="1.2.3.4",
                        port=22000 + attempt, user="root", via="direct", after_s=19.6,
                        price_per_hour=price),
    ]


def gone(at: float, lease: str, uptime: float, price: float) -> list[EngineEvent]:
    return [
        ev.LeaseDeleting(at=at, run_id=RUN, provider_id=lease, reason=ev.DeleteReason.HOST_FAILED),
        ev.LeaseDeleted(at=at + 1, run_id=RUN, provider_id=lease, uptime_s=uptime,
                        spend_usd=round(price * uptime / 3600, 4)),
    ]


def walk_across_hosts() -> list[EngineEvent]:
    """Host 7001 never answers SSH (destroyed, next offer); 7002 serves, is lost and
    replaced by 7003, which serves."""
    return [
        WalkOrderSaid(at=T0, run_id=RUN, reason="as picked",
                      offers=("vastai:1001", "vastai:1002", "vastai:1003", "vastai:1004")),
        *leased(T0 + 1, 1, "1001", "7001", 0.30),
        AttemptAbandoned(at=T0 + 141, run_id=RUN, provider_id="7001", offer_id="1001",
                         stage="ssh", scope="host", failure_kind="ssh_unreachable",
                         reason="SSH at 1.2.3.4:22001 did not answer within its boot budget "
                         "of 120 s", fix="nothing to fix here if other hosts answer"),
        *gone(T0 + 141.2, "7001", 140.0, 0.30),
        WalkOrderSaid(at=T0 + 142.5, run_id=RUN, reason="after ssh_unreachable",
                      offers=("vastai:1002", "vastai:1003", "vastai:1004")),
        *leased(T0 + 143, 2, "1002", "7002", 0.35),
        NodeReady(at=T0 + 190, run_id=RUN, model_id="llama-3.2-1b", engine="llama-server",
                  local_url="http://127.0.0.1:19778"),
        NodeReplacing(at=T0 + 900, run_id=RUN, provider_id="7002", replacement=1,
                      reason="the provider says lease 7002 is exited"),
        AttemptAbandoned(at=T0 + 900.1, run_id=RUN, provider_id="7002", offer_id="1002",
                         stage="serving", scope="host", failure_kind="instance_exited",
                         reason="the provider says lease 7002 is exited"),
        *gone(T0 + 900.3, "7002", 737.0, 0.35),
        *leased(T0 + 903, 3, "1003", "7003", 0.41),
    ]


def bootstrap_waiting_for_ssh() -> list[EngineEvent]:
    """A host is running; its sshd has not answered yet: 21 s of a 240 s boot budget."""
    key = "7003"
    return [
        *leased(T0 + 53.7, 3, "1003", key, 0.41),
        StageBudget(at=T0 + 73.8, run_id=RUN, stage="engine", budget_s=600.0),
        StageBudget(at=T0 + 73.9, run_id=RUN, stage="ssh", budget_s=240.0),
        SshAttempt(at=T0 + 74, lease_key=key, attempt=1, target="1.2.3.4:22003",
                   outcome=AttemptOutcome.NOT_LISTENING, detail="connection refused",
                   next_try_s=1.0),
        SshAttempt(at=T0 + 94, lease_key=key, attempt=9, target="1.2.3.4:22003",
                   outcome=AttemptOutcome.NOT_LISTENING, detail="connection refused",
                   next_try_s=1.0),
    ]


def posting(events: Sequence[EngineEvent], settled: Callable[[MvpApp], bool]) -> RunBefore:
    async def run_before(pilot: Pilot[None]) -> None:
        app = pilot.app
        assert isinstance(app, MvpApp)
        for event in events:
            app.dashboard.route(event)
        await wait_until(pilot, lambda: settled(app))
        await pilot.pause()
        app.query_one(LeasesPane)._render_leases()  # measured while the panes settled
        await pilot.pause()
        app._exit_cleared = True  # no engine holds the lease shown: let the exit through

    return run_before


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_leases_with_a_failed_host_and_a_replacement(snap_compare, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    """Leases: 7001 failed at ssh → next offer; 7002 lost while serving → replaced by 7003."""
    app = make_app(hub=ChannelHub(clock=lambda: 0.0), wall=fixed_clock(T0 + 960), tz=UTC,
                   env=VASTAI)

    def settled(app: MvpApp) -> bool:
        return "7003" in app.query_one(LeasesPane).model.leases

    assert snap_compare(app, terminal_size=size, run_before=posting(walk_across_hosts(), settled))


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_bootstrap_with_stage_budgets(snap_compare, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    """Bootstrap: the ssh row running against its boot budget (elapsed/budget)."""
    app = make_app(hub=ChannelHub(clock=lambda: 0.0), wall=fixed_clock(T0 + 95.3), tz=UTC,
                   env=VASTAI)

    def settled(app: MvpApp) -> bool:
        return app.query_one(BootstrapPane).model.stages[StageId.SSH].budget_s == 240.0

    run_before = posting(bootstrap_waiting_for_ssh(), settled)
    assert snap_compare(app, terminal_size=size, run_before=run_before)
