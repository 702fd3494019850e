"""One recorded event sequence through the composed dashboard, and one figure for the run's
money everywhere it is shown or enforced: the status bar, the Leases pane, the Bootstrap
pane's wait line, the exit receipt and `Limits.breach` (issue 28: before, the status bar
said $0.0466 where the others said $0.0666, and the limit counted like neither).

The sequence: a lease deleted before it ran (not ready), one that ran and was lost while
serving (replaced), and the replacement, which waited 180 s for running."""

from __future__ import annotations

import re

from mvp_tui.engine.events import NodeReplacing
from mvp_tui.engine.ledger import money_text
from mvp_tui.engine.limits import Limits
from mvp_tui.events import EngineEvent
from mvp_tui.lease import events as ev
from mvp_tui.widgets.bootstrap import BootstrapPane
from mvp_tui.widgets.leases import LeasesPane
from mvp_tui.widgets.status_bar import StatusBar
from tests.tui.apps import make_app

T0 = 1_764_504_180.0
NOW = T0 + 600
RUN = "r-7f3a"


def attempt(label: str, pid: str, at: float, price: float) -> list[EngineEvent]:
    return [
        ev.AttemptStarted(at=at - 1, run_id=RUN, label=label, offer_id=f"o{pid}",
                          gpu_name="RTX 3090", price_per_hour=price, attempt=1),
        ev.AttemptAnswered(at=at + 0.05, run_id=RUN, label=label, offer_id=f"o{pid}",
                           outcome="created", http_status=200, detail="", provider_id=pid,
                           created_at=at),
    ]


def running(label: str, pid: str, created: float, after_s: float,
            price: float) -> ev.LeaseRunning:
    return ev.LeaseRunning(at=created + after_s, run_id=RUN, provider_id=pid, label=label,
                           host="127.0.0.1", port=22, user="root", via="direct",
                           after_s=after_s, price_per_hour=price, created_at=created)


def gone(pid: str, created: float, uptime: float, price: float,
         reason: ev.DeleteReason) -> list[EngineEvent]:
    return [
        ev.LeaseDeleting(at=created + uptime - 1, run_id=RUN, provider_id=pid, reason=reason),
        ev.LeaseDeleted(at=created + uptime, run_id=RUN, provider_id=pid, uptime_s=uptime,
                        spend_usd=round(price * uptime / 3600, 6)),
    ]


RECORDED: list[EngineEvent] = [
    *attempt("a1", "7001", T0 + 1, 0.30),
    ev.LeaseNotReady(at=T0 + 30, run_id=RUN, provider_id="7001", reason="no SSH endpoint"),
    *gone("7001", T0 + 1, 30, 0.30, ev.DeleteReason.NOT_READY),  # deleted before running
    *attempt("a2", "7002", T0 + 41, 0.40),
    running("a2", "7002", T0 + 41, 180, 0.40),
    NodeReplacing(at=T0 + 299, run_id=RUN, provider_id="7002", reason="host lost",
                  replacement=1),
    *gone("7002", T0 + 41, 259, 0.40, ev.DeleteReason.HOST_FAILED),  # replaced
    *attempt("a3", "7003", T0 + 302, 0.40),
    running("a3", "7003", T0 + 302, 180, 0.40),  # waited 180 s: billed from its answer
]


async def test_one_figure_in_every_place_that_shows_lease_money() -> None:
    app = make_app(wall=lambda: NOW)
    expected = 0.30 * 30 / 3600 + 0.40 * 259 / 3600 + 0.40 * 298 / 3600
    figure = money_text(expected)
    assert figure == "$0.0644"
    async with app.run_test(size=(160, 48)) as pilot:
        for event in RECORDED:
            app.dashboard.route(event)
        await pilot.pause()
        app.dashboard.update_summary()  # the 1 s timer's work, now
        await pilot.pause()
        bar = app.query_one(StatusBar).render().plain
        assert f"spent {figure}" in bar and "$0.40/h" in bar and "1 lease(s) live" in bar, bar

        pane = app.query_one(LeasesPane)
        cells = {pid: pane.table.get_cell(pid, "spend").plain for pid in ("7001", "7002", "7003")}
        receipt = app.status.ledger.receipt(NOW)
        for pid, cell in cells.items():  # each lease's figure is the receipt's for it
            (line,) = [x for x in receipt if x.startswith(f"lease {pid} ")]
            assert re.search(rf"· {re.escape(cell)}( so far|$)", line), (cell, line)
        assert receipt[-1] == f"run {RUN}: 3 leases · {figure} · 1 may still bill"

        wait_line = app.query_one(BootstrapPane).wait.line(NOW)
        assert wait_line == f"waiting 4:58 · {cells['7003']} (run {figure})"

        breach = Limits(max_spend_usd=0.05).breach(app.status.ledger, NOW, RUN)
        assert breach is not None and money_text(breach[2]) == figure
        assert Limits(max_spend_usd=0.065).breach(app.status.ledger, NOW, RUN) is None


async def test_an_80_column_header_keeps_the_money() -> None:
    """A narrow terminal drops the profile, provider, trend and run id first: the money is
    what the header is for, and at 80 columns it was cut off after "1 lease(s) live ·"."""
    app = make_app(wall=lambda: NOW)
    async with app.run_test(size=(80, 24)) as pilot:
        for event in RECORDED:
            app.dashboard.route(event)
        await pilot.pause()
        app.dashboard.update_summary()
        await pilot.pause()
        bar = app.query_one(StatusBar).render().plain
        assert "1 lease(s) live · $0.40/h" in bar and "spent $0.0644" in bar, bar
        assert len(bar) <= 80 and "local · local" not in bar, bar  # profile, provider gone
