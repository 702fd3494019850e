"""The Leases pane fed a recorded walk; ctrl+d asks first, with focus on Cancel."""

from __future__ import annotations

from datetime import UTC

from textual.widgets import Static

from mvp_tui.lease import events as ev
from mvp_tui.widgets.confirm import ConfirmScreen
from mvp_tui.widgets.leases import LeasesPane
from mvp_tui.widgets.leases_model import HISTORY_LINES, LeaseDisplayState, LeasesModel, Tone
from tests.widgets.data import NOW, RUN, T0, fixed_clock, walk_events
from tests.widgets.harness import Harness, screen_text

SIZE = (160, 48)


class Clock:
    def __init__(self, at: float) -> None:
        self.at = at

    def __call__(self) -> float:
        return self.at


def harness(clock: Clock | None = None) -> Harness:
    return Harness(lambda: [LeasesPane(clock=clock or fixed_clock(), tz=UTC)])


def history_lines(pane: LeasesPane) -> list[str]:
    return [
        str(line) for line in pane.query_one("#leases-lines", Static).render().plain.split("\n")
    ]  # type: ignore[attr-defined]


async def test_a_recorded_walk_reads_one_line_per_attempt() -> None:
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(LeasesPane)
        assert pane.query_one(".empty", Static).display
        for event in walk_events():
            pane.handle_event(event)
        await pilot.pause()
        assert not pane.query_one(".empty", Static).display
        lines = history_lines(pane)
        assert lines == [
            "12:03:02  offer 1001  RTX 4090 $0.300/h  unavailable (404): sold before create → next",
            "12:03:03  offer 1002  RTX 4090 $0.350/h  ambiguous (500) → reconciled: adopted 7002"
            " → not ready: exited: OCI error → deleted ($0.0025)",
            "12:03:32  offer 1003  RTX A6000 $0.410/h  created 7003 → running after 41.2 s",
        ]
        # The live section: 7002 deleted with its final spend, 7003 running and billing.
        table = pane.table
        assert [r.key.value for r in table.ordered_rows] == ["7002", "7003"]
        assert table.get_cell("7003", "state").plain == "running"
        assert table.get_cell("7002", "state").plain == "deleted"
        assert table.get_cell("7002", "spend").plain == "$0.0025"
        # 7003 created at T0+32.5; now is T0+95: 62.5 s at $0.41/h.
        assert table.get_cell("7003", "uptime").plain == "0:01:02"
        assert table.get_cell("7003", "spend").plain == "$0.0071"


async def test_spend_ticks_from_event_times_and_the_clock() -> None:
    clock = Clock(NOW)
    app = harness(clock)
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(LeasesPane)
        for event in walk_events():
            pane.handle_event(event)
        await pilot.pause()
        clock.at = T0 + 32.5 + 3600  # one hour after the create answer
        pane.tick()
        assert pane.table.get_cell("7003", "uptime").plain == "1:00:00"
        assert pane.table.get_cell("7003", "spend").plain == "$0.4100"
        assert pane.table.get_cell("7002", "uptime").plain == "0:00:26"  # deleted: frozen


async def test_ctrl_d_asks_with_focus_on_cancel_then_posts_teardown() -> None:
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(LeasesPane)
        for event in walk_events():
            pane.handle_event(event)
        await pilot.pause()
        pane.focus()
        await pilot.pause()
        assert app.focused is pane.table
        # On 7002 (deleted) teardown makes no sense: dimmed, nothing asked.
        assert pane.check_action("teardown", ()) is None
        await pilot.press("ctrl+d")
        assert not isinstance(app.screen, ConfirmScreen)
        await pilot.press("down")  # 7003, running
        assert pane.check_action("teardown", ()) is True
        await pilot.press("ctrl+d")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        assert app.screen.focused is not None and app.screen.focused.id == "choice-cancel"
        await pilot.press("enter")  # Cancel
        await pilot.pause()
        assert app.of(LeasesPane.TeardownRequested) == []
        await pilot.press("ctrl+d")
        await pilot.pause()
        await pilot.press("right", "enter")  # Tear down
        await pilot.pause()
        (message,) = app.of(LeasesPane.TeardownRequested)
        assert isinstance(message, LeasesPane.TeardownRequested)
        assert message.provider_id == "7003"


async def test_unconfirmed_delete_is_shown_as_a_failure() -> None:
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(LeasesPane)
        for event in walk_events():
            pane.handle_event(event)
        pane.handle_event(
            ev.LeaseDeleteUnconfirmed(
                at=T0 + 90, run_id=RUN, provider_id="7003", reason="still listed after 5 checks"
            )
        )
        await pilot.pause()
        assert "delete UNCONFIRMED, may still bill" in history_lines(pane)[-1]
        assert pane.table.get_cell("7003", "state").plain == "delete unconfirmed"
        assert "delete unconfirmed" in screen_text(app)


def test_history_is_bounded_and_ignores_other_events() -> None:
    model = LeasesModel()
    assert not model.apply(ev.WalkFailed.__mro__[-2](at=1.0))  # a bare EngineEvent
    for i in range(HISTORY_LINES + 50):
        model.apply(
            ev.OfferSkipped(
                at=T0 + i, run_id=RUN, offer_id=str(i), price_per_hour=9, reason="over max $/h"
            )
        )
    assert len(model.history) == HISTORY_LINES
    assert model.history[0].parts[0][0].startswith("offer 50 ")


def test_a_lease_that_may_bill_is_never_forgotten() -> None:
    model = LeasesModel()
    for i in range(40):
        pid = str(9000 + i)
        model.apply(
            ev.LeaseRunning(
                at=T0,
                run_id=RUN,
                provider_id=pid,
                label=f"l{i}",
                host="h",
                port=22,
                user="root",
                via="proxy",
                after_s=1.0,
                price_per_hour=0.1,
            )
        )
    assert len(model.leases) == 40
    assert all(lease.state is LeaseDisplayState.RUNNING for lease in model.leases.values())


def test_a_secret_left_on_the_account_is_a_warning_with_its_remedy() -> None:
    model = LeasesModel()
    assert model.apply(
        ev.SecretLeftOver(
            at=T0, run_id=RUN, label="mvp-r-1-1-1", name="mvp_host_key_x", secret_id="sec1",
            reason="delete failed 6 times (last: HTTP 500)", fix="`mvp-tui down r-1 --yes`",
        )
    )
    ((text, tone),) = model.history[-1].parts
    assert "secret mvp_host_key_x left on the account (does not bill)" in text
    assert tone is Tone.WARN and "mvp-tui down r-1 --yes" in model.full_text()


async def test_a_narrow_pane_drops_uptime_then_gpu_and_never_hides_the_money() -> None:
    """A tagged lease id ("7003 (rehearsal)") made the six columns overflow a 100x30 pane: the
    spend went off screen behind a one-glyph scrollbar. The pane now gives up uptime, then
    the GPU, and keeps the lease, its state, $/h and spend, with no scrollbar."""
    app = Harness(lambda: [LeasesPane(clock=fixed_clock(), tz=UTC, tag="rehearsal")])
    async with app.run_test(size=(160, 20)) as pilot:
        pane = app.query_one(LeasesPane)
        for event in walk_events():
            pane.handle_event(event)
        await pilot.pause()
        table = pane.table
        assert [str(c.label) for c in table.columns.values()][:6] == [
            "lease", "GPU", "state", "uptime", "$/h", "spend"
        ]
        for width, kept in [
            (66, ["lease", "GPU", "state", "$/h", "spend"]),
            (54, ["lease", "state", "$/h", "spend"]),
            (44, ["lease", "$/h", "spend"]),
        ]:
            await pilot.resize_terminal(width, 20)
            await pilot.pause()
            assert [str(c.label) for c in table.columns.values()] == kept, width
            assert table.get_cell("7003", "spend").plain == "$0.0071"
            assert not table.show_horizontal_scrollbar
            # On screen, whole (not cells cut to their column labels' width).
            rows = [line for line in screen_text(app).splitlines() if "(rehearsal)" in line]
            assert len(rows) == 2 and all("$0." in row for row in rows)
            assert "7003 (rehearsal)" in rows[1] and rows[1].rstrip(" │").endswith("$0.0071")
            pane.tick()  # the second's update skips a dropped column (it crashed the rehearsal)
        await pilot.resize_terminal(160, 20)
        await pilot.pause()
        assert len(table.columns) >= 6
