"""The run's status as the dashboard knows it (engine/run_status.py): one fold of the events
the UI port routes, the same for a live run and for a replay of its archive."""

from __future__ import annotations

import dataclasses

from mvp_tui.datastream.frame import StreamId
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.engine import events as eng
from mvp_tui.engine.events import LimitReached, RunState
from mvp_tui.engine.ledger import LeaseLedger
from mvp_tui.engine.limits import Limits
from mvp_tui.engine.orch import OrchTap
from mvp_tui.engine.run_status import RunStatus
from mvp_tui.engine.ui_port import UiPort
from mvp_tui.events import EngineEvent
from mvp_tui.lease import events as lease
from mvp_tui.secrets import Redactor
from mvp_tui.tui.replay_events import ArchiveEvents
from tests.tui.test_archive_round_trip import one_run
from tests.widgets.data import RUN, T0, walk_events

CAP = Limits(max_spend_usd=5.0, max_hours=12.0, max_price_per_hour=0.8)


class Nobody:
    """A UI that reads none of the port's facts (the status is what is under test)."""

    def offer_gone(self, offer_id: str) -> None: ...
    def bootstrap_step(self, event: object) -> None: ...
    def lease_changed(self, event: object) -> None: ...
    def node_ready(self, event: object) -> None: ...
    def prompt_step(self, event: object) -> None: ...
    def tokens_pending(self, prompt_id: int) -> None: ...
    def run_changed(self, event: object) -> None: ...


def fresh() -> RunStatus:
    return RunStatus("local", Limits(), LeaseLedger())


def switched(provider: str = "vastai", *, closed: bool = False) -> eng.SessionChanged:
    return eng.SessionChanged(at=T0, run_id=RUN, provider=provider, billing=True, ssh=True,
                              limits=dataclasses.asdict(CAP), closed=closed)


def state(value: RunState) -> eng.RunStateChanged:
    return eng.RunStateChanged(at=T0, run_id=RUN, state=value.value)


def endpoint() -> eng.EndpointReady:
    return eng.EndpointReady(at=T0, run_id=RUN, base_url="http://127.0.0.1:8080",
                             model="tiny", auth="key")


def test_the_session_says_the_provider_and_its_limits() -> None:
    status = fresh()
    assert status.apply(switched()) is True
    # [limits] max_spend_usd reaches the status bar from here: section → Limits → status.
    assert status.limits == CAP and status.limits.max_spend_usd == 5.0
    assert (status.provider_name, status.run_id) == ("vastai", RUN)
    assert status.provider_bills and status.provider_ssh and status.leasing_open
    status.apply(switched(closed=True))
    assert not status.leasing_open


def test_the_run_started_names_its_id_and_directory() -> None:
    status = fresh()
    status.apply(eng.RunStarted(at=T0, run_id="r-9", provider="runpod", profile="deploy",
                                state_dir="/state/runs/r-9"))
    assert (status.run_id, status.run_dir) == ("r-9", "/state/runs/r-9")
    # The provider is the session's word (its client's name: a rehearsal's is its own).
    assert status.provider_name == "local"


def test_busy_and_tearing_down_follow_the_controller_states() -> None:
    status = fresh()
    for value in RunState:
        status.apply(state(value))
        busy = value in (RunState.LEASING, RunState.BRINGING_UP, RunState.TEARING_DOWN)
        assert status.busy is busy, value
        assert status.tearing_down is (value is RunState.TEARING_DOWN), value


def test_the_endpoint_is_said_only_while_the_node_serves() -> None:
    status = fresh()
    status.apply(state(RunState.BRINGING_UP))
    status.apply(endpoint())
    assert status.endpoint is None  # said while bringing up: not served yet
    status.apply(state(RunState.SERVING))
    assert status.endpoint == endpoint()
    status.apply(state(RunState.BRINGING_UP))  # the node replaced: said again once it serves
    status.apply(state(RunState.SERVING))
    assert status.endpoint is None
    status.apply(state(RunState.BRINGING_UP))
    status.apply(endpoint())
    status.apply(state(RunState.SERVING))
    status.apply(state(RunState.TEARING_DOWN))
    assert status.endpoint is None


def test_a_lease_is_held_while_the_ledger_says_it_may_bill() -> None:
    ledger = LeaseLedger()
    status = RunStatus("vastai", Limits(), ledger)
    assert not status.holds_lease
    status.apply(state(RunState.LEASING))
    assert status.holds_lease  # one in the making
    for event in walk_events():
        ledger.apply(event)
        status.apply(event)
    status.apply(state(RunState.SERVING))
    assert status.holds_lease and ledger.live == 1
    ledger.apply(lease.LeaseDeleted(at=T0 + 99, run_id=RUN, provider_id="7003", uptime_s=25.0,
                                    spend_usd=0.01))
    status.apply(state(RunState.ENDED))
    assert not status.holds_lease


def test_the_limit_reached_and_the_idle_stop_are_kept() -> None:
    status = fresh()
    reached = LimitReached(at=T0, run_id=RUN, provider_id="7003", limit="max_spend_usd",
                           value=5.0, reached=5.01)
    notice = eng.IdleStopNotice(at=T0, run_id=RUN, state="warning", stops_in_s=60.0)
    assert status.apply(reached) and status.apply(notice)
    assert (status.limit_reached, status.idle_stop) == (reached, notice)
    assert status.apply(lease.SecretStored(at=T0, run_id=RUN, label="x", name="y")) is False


def test_the_port_folds_the_events_it_met_before_it_was_connected() -> None:
    port, status = UiPort(), fresh()
    port(switched())  # the engine speaks before the dashboard is composed
    port.connect(Nobody(), status)
    port(state(RunState.LEASING))
    assert status.provider_name == "vastai" and status.busy


def test_seeking_back_starts_the_status_over() -> None:
    status = fresh()
    status.apply(switched())
    status.apply(state(RunState.SERVING))
    ledger = LeaseLedger()
    status.restart(ledger)
    assert status.ledger is ledger and status.state == "idle" and status.run_id is None


def _status_of(route_events: list[EngineEvent]) -> RunStatus:
    port, ledger = UiPort(), LeaseLedger()
    status = RunStatus("local", Limits(), ledger)
    port.connect(Nobody(), status)
    for event in route_events:
        ledger.apply(event)
        port(event)
    return status


def test_a_replay_of_the_archive_gives_the_live_status() -> None:
    """The live route and archive → replay route give equal statuses; and the run's facts
    (its provider, limits, id, state) are in it, so neither is the seed's by accident."""
    run = [*one_run()[:-3], state(RunState.SERVING), endpoint()]
    hub = ChannelHub(stream=StreamId("mvp-orch", 1))
    live: list[EngineEvent] = []
    tap = OrchTap(live.append, hub, run_id=RUN, node_id=1, redactor=Redactor([]))
    for event in run:
        tap(event)
    _, replayed = ArchiveEvents().poll(hub)
    live_status, replay_status = _status_of(live), _status_of(replayed)
    assert vars(replay_status).keys() == vars(live_status).keys()
    for name, value in vars(live_status).items():
        if name != "ledger":
            assert getattr(replay_status, name) == value, name
    assert replay_status.ledger.rows(T0 + 99) == live_status.ledger.rows(T0 + 99)
    assert live_status.limits.max_spend_usd == 5.0 and live_status.provider_name == "vastai"
    assert live_status.state == "serving" and live_status.endpoint is not None
    assert live_status.run_dir == "/s" and live_status.limit_reached is not None


async def test_the_status_bar_shows_the_cap_the_session_says() -> None:
    """`[limits] max_spend_usd` reaches the status bar as section → Limits → RunStatus: the
    cap the session's engine reads (a provider switch says its own), not a copy of the
    configuration's kept elsewhere."""
    from mvp_tui.widgets.status_bar import StatusBar
    from tests.tui.apps import make_app

    app = make_app(env={"MVP_MAX_SPEND_USD": "2"})
    async with app.run_test(size=(160, 48)) as pilot:
        bar = app.query_one(StatusBar)
        assert bar.summary.cap_usd == 2.0  # the configuration's, until the session says
        app.dashboard.route(switched())  # the session's engine: $5
        await pilot.pause()
        assert bar.summary.cap_usd == 5.0 and bar.summary.provider == "vastai"
        assert "cap $5.00" in str(bar.render())
