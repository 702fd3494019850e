"""The node's dead-man's switch in the dashboard: the Bootstrap pane's "node watchdog" row
(from the agent's `watchdog` phase frames, so a replay shows it too) and the Leases pane's
deadline and armed state per lease (from the engine's `NodeWatchdog` events)."""

from __future__ import annotations

import json
from datetime import UTC, timedelta, timezone
from pathlib import Path

from textual.widgets import Static

from mvp_tui.datastream import ChannelHub
from mvp_tui.engine.events import NodeReady, NodeWatchdog
from mvp_tui.lease import events as ev
from mvp_tui.widgets.bootstrap import BootstrapPane, layout_rows
from mvp_tui.widgets.bootstrap_model import BootstrapModel, Stage, StageId, Status
from mvp_tui.widgets.leases import SWITCH_COLUMN, LeasesPane
from mvp_tui.widgets.leases_model import (
    LeaseDisplayState,
    LeasesModel,
    SwitchStatus,
    Tone,
    switch_text,
)
from mvp_tui.widgets.node_switch import armed_text, wall_text
from tests.widgets.data import (
    AGENT_CHANNEL,
    DEADLINE,
    NO_KEY_REASON,
    RUN,
    T0,
    agent_record,
    downloading,
    fixed_clock,
    publish_node,
    ssh_events,
    walk_events,
    watchdog_failed,
    watchdog_phase,
    watchdog_ready,
)
from tests.widgets.harness import Harness, screen_text

NOW = T0 + 95


def feed(model: BootstrapModel, *records: dict[str, object]) -> None:
    for record in records:
        model.record(AGENT_CHANNEL, json.dumps(record).encode(), NOW)


def bootstrap(*records: dict[str, object]) -> BootstrapModel:
    model = BootstrapModel(tz=UTC)
    for event in [*walk_events(), *ssh_events()]:
        model.apply(event)
    feed(model, *records)
    return model


def fired(
    trigger: str = "deadline", at: float = T0 + 9074, action: str = "destroy"
) -> dict[str, object]:
    return watchdog_phase("started", at, None, trigger=trigger, deadline_at=DEADLINE, action=action)


def destroyed(trigger: str = "deadline", at: float = T0 + 9080.5) -> dict[str, object]:
    return watchdog_phase("ready", at, 6500, trigger=trigger, destroyed=True, attempts=2)


# -- Bootstrap model ----------------------------------------------------------------------


def test_the_switch_row_comes_right_after_agent_started() -> None:
    names = [stage.name for stage in BootstrapModel().rows()]
    assert names.index("node watchdog") == names.index("agent started") + 1
    assert names.index("model") == names.index("node watchdog") + 1


def test_verdict_ready_shows_armed_deadline_and_silence() -> None:
    model = bootstrap(watchdog_ready())
    row = model.stages[StageId.WATCHDOG]
    assert row.status is Status.DONE
    assert row.detail == "armed · deadline 14:34 · silence 20 min"
    assert row.compact == "armed · ends 14:34"
    assert row.started_at == T0 + 80.0 and row.ended_at == T0 + 80.4  # elapsed_ms 400
    # The pane's time zone decides the clock time (snapshots fix UTC).
    other = BootstrapModel(tz=timezone(timedelta(hours=2)))
    feed(other, watchdog_ready())
    assert other.stages[StageId.WATCHDOG].detail == "armed · deadline 16:34 · silence 20 min"


def test_verdict_ready_without_a_deadline_or_unarmed() -> None:
    row = bootstrap(watchdog_ready(deadline_at=None)).stages[StageId.WATCHDOG]
    assert row.detail == "armed · silence 20 min"
    assert row.compact == "armed · silence 20 min"
    row = bootstrap(
        watchdog_ready(deadline_at=None, idle_teardown_mins=None, armed=False, action="end")
    ).stages[StageId.WATCHDOG]
    assert row.status is Status.DONE
    assert row.detail == "not armed · no deadline or silence limit"
    # A deadline on another day names the day.
    row = bootstrap(watchdog_ready(deadline_at=T0 + 26 * 3600)).stages[StageId.WATCHDOG]
    assert row.detail.startswith("armed · deadline Dec 01 14:03")


def test_detached_turns_the_silence_switch_off_and_attached_back_on() -> None:
    model = bootstrap(watchdog_ready())
    detach = agent_record(
        "NodeAgentProgress", T0 + 200, phase="watchdog", state="detached", idle_armed=False
    )
    feed(model, detach)
    row = model.stages[StageId.WATCHDOG]
    assert row.detail == "armed · deadline 14:34 · silence off (detached)"
    feed(model, {**detach, "state": "attached", "idle_armed": True})
    assert row.detail == "armed · deadline 14:34 · silence 20 min"
    no_deadline = bootstrap(watchdog_ready(deadline_at=None))
    feed(no_deadline, detach)
    assert no_deadline.stages[StageId.WATCHDOG].detail == "not armed · silence off (detached)"


def test_verdict_failed_shows_the_reason_cleaned() -> None:
    row = bootstrap(watchdog_failed()).stages[StageId.WATCHDOG]
    assert row.status is Status.FAILED
    assert row.detail == NO_KEY_REASON  # whole: it names the fix
    hostile = "no key\x1b[31m here\x1b]0;title\x07\nnext ≥ line " + "x" * 600
    row = bootstrap(watchdog_failed(reason=hostile)).stages[StageId.WATCHDOG]
    assert "\x1b" not in row.detail and "\n" not in row.detail and "\x07" not in row.detail
    assert row.detail.startswith("no key herenext ≥ line xxx")
    assert "[cut " in row.detail and len(row.detail) < 450
    assert bootstrap(watchdog_phase("failed", T0 + 81, 5)).stages[StageId.WATCHDOG].detail


def test_firing_then_destroyed() -> None:
    model = bootstrap(watchdog_ready(), fired())
    row = model.stages[StageId.WATCHDOG]
    assert row.status is Status.ACTIVE
    assert row.detail == "destroying its lease (deadline)"
    assert row.started_at == T0 + 9074 and row.ended_at is None
    feed(model, destroyed())
    assert row.status is Status.DONE
    assert row.detail == "destroyed its lease (deadline)"
    assert row.seconds(NOW) == 6.5
    # Control lines after it fired change nothing.
    feed(model, agent_record("NodeAgentProgress", T0, phase="watchdog", idle_armed=False))
    assert row.detail == "destroyed its lease (deadline)"


def test_a_local_node_ends_instead_of_destroying() -> None:
    model = bootstrap(watchdog_ready(action="end"), fired("idle", action="end"))
    row = model.stages[StageId.WATCHDOG]
    assert row.detail == "ending the node (idle)"
    feed(model, watchdog_phase("ready", T0 + 9075, 3, trigger="idle", ended=True, destroyed=False))
    assert (row.status, row.detail) == (Status.DONE, "ended the node (idle)")


def test_a_node_past_its_verdict_without_one_says_so() -> None:
    model = bootstrap(agent_record("NodeAgentPhase", T0 + 80, phase="probe", status="started"))
    row = model.stages[StageId.WATCHDOG]
    assert row.status is Status.PENDING
    assert row.detail == "none reported: no switch on this node"
    assert row.compact == "none reported"


def test_untyped_numbers_from_the_node_are_not_shown() -> None:
    row = bootstrap(watchdog_ready(deadline_at="soon", idle_teardown_mins=True)).stages[
        StageId.WATCHDOG
    ]
    assert row.detail == "armed · no deadline or silence limit"
    assert wall_text(1e300, UTC) == "?"
    assert wall_text(float("nan"), UTC) == "?"
    assert (
        armed_text(armed=True, deadline_at=float("inf"), idle_mins=float("nan"), tz=UTC, ref=None)
        == "armed · no deadline or silence limit"
    )


def test_a_new_lease_starts_the_switch_row_afresh() -> None:
    model = bootstrap(watchdog_failed())
    running = walk_events()[-1]
    assert isinstance(running, ev.LeaseRunning)
    from dataclasses import replace

    model.apply(replace(running, provider_id="7009"))
    assert model.stages[StageId.WATCHDOG].status is Status.PENDING
    assert model.switch is None


# -- Bootstrap layout: narrow panes, wrapped failures -----------------------------------------


def stages(model: BootstrapModel) -> list[Stage]:
    return model.rows()


def test_a_narrow_pane_drops_timings_and_takes_the_short_form() -> None:
    model = BootstrapModel(tz=UTC)
    for event in [*walk_events(), *ssh_events()]:
        model.apply(event)
    feed(model, watchdog_ready(), *downloading())
    layout = layout_rows(stages(model), 36, 7)
    assert not layout.timed and not layout.folded
    row = layout.rows.index(model.stages[StageId.WATCHDOG])
    assert layout.details[row] == (18, ["armed · ends 14:34"])
    row = layout.rows.index(model.stages[StageId.MODEL])
    assert layout.details[row] == (18, ["71% downloading"])  # no bar, no sizes: they fit
    wide = layout_rows(stages(model), 60, 13)
    assert wide.timed
    row = wide.rows.index(model.stages[StageId.WATCHDOG])
    # Room to spare: the whole detail, wrapped under the detail column, never after a "·".
    assert wide.details[row] == (29, ["armed · deadline 14:34", "· silence 20 min"])


def test_too_few_lines_fold_the_first_steps_done() -> None:
    model = bootstrap(watchdog_ready())
    feed(model, *downloading())
    model.record(
        "mvp.orch.bootstrap",
        json.dumps({"type": "OrchBootstrap", "phase": "config", "status": "ready"}).encode(),
        NOW,
    )
    rows = stages(model)
    assert len(rows) == 8
    layout = layout_rows(rows, 36, 7)
    assert [s.name for s in layout.folded] == ["config", "lease running"]
    assert len(layout.rows) == 6  # one summary line + six rows = seven lines


def test_a_failure_wraps_its_reason_and_folds_steps_done_for_room() -> None:
    model = bootstrap(watchdog_failed())
    rows = stages(model)
    wide = layout_rows(rows, 60, 13)
    assert not wide.folded and not wide.failure_cut
    indent, lines = wide.details[wide.rows.index(model.stages[StageId.WATCHDOG])]
    assert indent == 4 and lines[0] == ""  # all of it below the row, from further left
    assert " ".join(lines[1:]) == NO_KEY_REASON
    assert all(len(line) <= 56 for line in lines)
    small = layout_rows(rows, 36, 7)
    assert [s.name for s in small.folded] == ["lease running", "ssh attempt 3", "host key",
                                              "agent started"]
    assert small.failure_cut  # 36 x 7 cells cannot hold it: cut, with an ellipsis on screen
    _, lines = small.details[small.rows.index(model.stages[StageId.WATCHDOG])]
    assert len(lines) == 1 + 7 - 1 - len(small.rows)  # every spare line is the reason's


async def test_bootstrap_pane_renders_the_row_from_a_hub(tmp_path: Path) -> None:
    app = Harness(lambda: [BootstrapPane(clock=fixed_clock(NOW), tz=UTC)])
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(BootstrapPane)
        for event in [*walk_events(), *ssh_events()]:
            pane.handle_event(event)
        hub = ChannelHub(clock=lambda: 0.0)
        pane.attach_hub(hub)
        publish_node(hub, watchdog_ready(), *downloading())
        pane.poll()
        await pilot.pause()
        text = pane.checklist_text().plain
        assert "✓ node watchdog" in text
        assert "armed · deadline 14:34 · silence 20 min" in screen_text(app)


# -- Leases model -----------------------------------------------------------------------------


def leases(*events: object) -> LeasesModel:
    model = LeasesModel(tz=UTC)
    for event in [*walk_events(), *events]:
        assert isinstance(event, ev.EngineEvent)
        model.apply(event)
    return model


def verdict(status: str = "ready", at: float = T0 + 80.4, **extra: object) -> NodeWatchdog:
    values: dict[str, object] = {
        "deadline_at": DEADLINE,
        "idle_teardown_mins": 20.0,
        "armed": status == "ready",
        **extra,
    }
    return NodeWatchdog(at=at, run_id=RUN, status=status, **values)  # type: ignore[arg-type]


def last_parts(model: LeasesModel) -> list[str]:
    return [text for text, _ in model.history[-1].parts]


def test_armed_lease_shows_its_deadline() -> None:
    model = leases(verdict())
    lease = model.leases["7003"]
    assert lease.switch is not None and lease.switch.status is SwitchStatus.ARMED
    assert switch_text(lease, UTC, NOW) == ("switch armed · ends 14:34", Tone.OK)
    assert last_parts(model)[-1] == "→ node switch armed · deadline 14:34 · silence 20 min"
    assert model.leases["7002"].switch is None  # the deleted lease had no node
    assert switch_text(model.leases["7002"], UTC, NOW) == ("", Tone.PLAIN)


def test_before_the_verdict_and_ready_without_one() -> None:
    model = leases()
    assert switch_text(model.leases["7003"], UTC, NOW) == ("switch pending", Tone.PENDING)
    model.apply(NodeReady(at=T0 + 90, run_id=RUN, model_id="m", engine="llama.cpp", local_url="u"))
    assert switch_text(model.leases["7003"], UTC, NOW) == ("no switch", Tone.WARN)
    assert last_parts(model)[-1] == "→ no node switch reported"
    # Ready after a verdict changes nothing.
    model = leases(verdict())
    model.apply(NodeReady(at=T0 + 90, run_id=RUN, model_id="m", engine="e", local_url="u"))
    assert switch_text(model.leases["7003"], UTC, NOW)[0] == "switch armed · ends 14:34"


def test_silence_only_and_not_armed() -> None:
    model = leases(verdict(deadline_at=None))
    assert switch_text(model.leases["7003"], UTC, NOW)[0] == "switch armed · silence 20 min"
    model = leases(verdict(deadline_at=None, idle_teardown_mins=None, armed=False))
    assert switch_text(model.leases["7003"], UTC, NOW) == ("switch not armed", Tone.WARN)


def test_failed_verdict_shows_failed_and_the_reason() -> None:
    model = leases(verdict("failed", reason=NO_KEY_REASON + "\x1b[2J"))
    assert switch_text(model.leases["7003"], UTC, NOW) == ("switch FAILED", Tone.FAIL)
    assert last_parts(model)[-1] == f"→ node switch FAILED: {NO_KEY_REASON}"
    # Then the dashboard destroys the lease: gone, nothing more to say about its switch.
    model.apply(ev.LeaseDeleted(at=T0 + 90, run_id=RUN, provider_id="7003", uptime_s=57.5,
                                spend_usd=0.0066))
    assert switch_text(model.leases["7003"], UTC, NOW) == ("", Tone.PLAIN)
    assert last_parts(model)[-1] == "→ deleted ($0.0066)"


def test_the_node_destroying_its_own_lease() -> None:
    model = leases(verdict(), verdict("fired", at=T0 + 9074, trigger="deadline"))
    lease = model.leases["7003"]
    assert switch_text(lease, UTC, NOW) == ("switch fired (deadline): destroying", Tone.PENDING)
    assert lease.state is LeaseDisplayState.RUNNING
    model.apply(verdict("destroyed", at=T0 + 9080.5, trigger="deadline", deadline_at=None))
    assert lease.state is LeaseDisplayState.NODE_DESTROYED and lease.state.may_bill
    assert lease.switch is not None and lease.switch.deadline_at == DEADLINE  # kept
    assert switch_text(lease, UTC, NOW) == ("its node destroyed it (deadline)", Tone.WARN)
    money = model.money(lease, T0 + 99_999)
    assert money is not None and money.uptime_s == T0 + 9080.5 - (T0 + 32.5)  # at its word
    parts = last_parts(model)
    assert parts[-1] == "→ its node destroyed it (deadline)"
    assert "→ node switch fired (deadline): destroying its lease…" not in parts  # answered
    model.apply(ev.LeaseDeleted(at=T0 + 9100, run_id=RUN, provider_id="7003", uptime_s=9048.0,
                                spend_usd=1.0305))
    assert lease.state is LeaseDisplayState.DELETED
    assert switch_text(lease, UTC, NOW) == ("its node destroyed it (deadline)", Tone.WARN)
    assert last_parts(model)[-1] == "→ confirmed gone ($1.0305)"


def test_a_deleted_lease_shows_the_provider_s_receipt_beside_the_estimate() -> None:
    model = leases()
    model.apply(ev.LeaseDeleted(at=T0 + 90, run_id=RUN, provider_id="7003", uptime_s=57.5,
                                spend_usd=0.0066, billed_usd=0.0071))
    assert last_parts(model)[-1] == "→ deleted (est. $0.0066, billed $0.0071)"
    money = model.money(model.leases["7003"], NOW)
    assert money is not None and money.billed_usd == 0.0071


def test_a_local_node_ended_and_events_of_other_runs() -> None:
    model = leases(verdict("ended", trigger="idle"))
    assert model.leases["7003"].state is LeaseDisplayState.NODE_ENDED
    assert switch_text(model.leases["7003"], UTC, NOW)[0] == "its node ended it (idle)"
    other = leases()
    before = len(other.history), [x.switch for x in other.leases.values()]
    assert other.apply(NodeWatchdog(at=T0, run_id="r-other", status="ready", armed=True))
    assert other.apply(verdict("bogus"))
    assert (len(other.history), [x.switch for x in other.leases.values()]) == before


def test_the_switch_follows_the_runs_current_lease() -> None:
    running = walk_events()[-1]
    assert isinstance(running, ev.LeaseRunning)
    from dataclasses import replace

    model = leases(verdict(), replace(running, provider_id="7010", at=T0 + 200), verdict())
    assert model.leases["7010"].switch is not None
    assert model.leases["7003"].switch is not None  # the first node's verdict stays its own


# -- Leases pane ------------------------------------------------------------------------------


async def test_leases_pane_shows_the_switch_as_a_column_when_it_fits() -> None:
    app = Harness(lambda: [LeasesPane(clock=fixed_clock(NOW), tz=UTC)])
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(LeasesPane)
        for event in [*walk_events(), verdict()]:
            pane.handle_event(event)
        await pilot.pause()
        assert pane.table.get_cell("7003", SWITCH_COLUMN).plain == "switch armed · ends 14:34"
        assert pane.table.get_cell("7002", SWITCH_COLUMN).plain == ""
        assert not pane.query_one("#leases-switch", Static).display


async def test_leases_pane_too_narrow_puts_the_switch_below_the_table() -> None:
    app = Harness(lambda: [LeasesPane(clock=fixed_clock(NOW), tz=UTC)])
    async with app.run_test(size=(160, 20)) as pilot:
        pane = app.query_one(LeasesPane)
        for event in [*walk_events(), verdict()]:
            pane.handle_event(event)
        await pilot.pause()
        table = pane.table
        assert SWITCH_COLUMN in table.columns
        await pilot.resize_terminal(62, 20)
        await pilot.pause()
        assert SWITCH_COLUMN not in table.columns
        assert not table.show_horizontal_scrollbar  # the dropped column left no scrollbar
        below = pane.query_one("#leases-switch", Static)
        assert below.display
        assert "7003  switch armed · ends 14:34" in screen_text(app)
        assert pane.has_class("-switch-below")
        # Wider again: back to a column.
        await pilot.resize_terminal(160, 20)
        await pilot.pause()
        assert SWITCH_COLUMN in table.columns
        assert not below.display and not pane.has_class("-switch-below")
