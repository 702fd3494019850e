"""tok/s over the last prompts under the answer, and the session's $/h in the header, as
sparklines."""

from __future__ import annotations

from mvp_tui.prompt.events import PromptDone, PromptQueued, PromptStarted
from mvp_tui.widgets.prompt import PromptPane
from mvp_tui.widgets.sparkline import sparkline
from mvp_tui.widgets.status_bar import RunSummary, StatusBar
from tests.tui.apps import FIXED_NOW
from tests.widgets.harness import Harness


def test_sparkline_scales_between_min_and_max() -> None:
    assert sparkline([]) == ""
    assert sparkline([1, 2, 3, 4, 5, 6, 7, 8]) == "▁▂▃▄▅▆▇█"
    assert sparkline([5, 5, 5]) == "▄▄▄"
    assert sparkline(list(range(30)), width=4) == "▁▃▆█"  # only the last ones


async def test_prompt_stats_show_cost_and_a_tok_s_sparkline() -> None:
    app = Harness(lambda: [PromptPane()])
    async with app.run_test(size=(120, 20)) as pilot:
        pane = app.query_one(PromptPane)
        pane.set_ready("tiny")
        for n, rate in enumerate([100.0, 400.0, 250.0], start=1):
            pane.handle_event(PromptQueued(at=n, prompt_id=n, text_chars=3, max_tokens=8,
                                           position=0))
            pane.handle_event(PromptStarted(at=n, prompt_id=n))
            pane.handle_event(PromptDone(at=n + 0.5, prompt_id=n, final_text="x",
                                         tokens_generated=8, elapsed_ms=500, ttft_ms=20,
                                         tokens_per_s=rate, cost_usd=0.0001 * n))
        await pilot.pause()
        stats = pane.view.text().splitlines()[-1]
        assert "$0.0003" in stats  # lease $/h × the prompt's wall time
        assert "tok/s ▁█▅" in stats


async def test_header_shows_the_session_rate_trend() -> None:
    app = Harness(lambda: [StatusBar(lambda: FIXED_NOW)])
    async with app.run_test(size=(160, 3)) as pilot:
        bar = app.query_one(StatusBar)
        bar.summary = RunSummary(run_id="r-1", price_per_hour=0.45, rate_trend="▁█")
        await pilot.pause()
        assert "$0.45/h ▁█ · spent" in str(bar.render())


async def test_the_dashboard_plots_its_rate_as_leases_come_and_go() -> None:
    from mvp_tui.lease.events import LeaseDeleted, LeaseRunning
    from mvp_tui.lease.events import LeaseRunning as Running
    from tests.tui.apps import make_app

    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        def running(pid: str, price: float) -> Running:
            return LeaseRunning(at=1.0, run_id="r", provider_id=pid, label=pid, host="",
                                port=0, user="", via="none", after_s=0.0,
                                price_per_hour=price)

        app.dashboard.route(running("a", 0.30))
        await pilot.pause()
        app.dashboard.route(running("b", 0.60))
        await pilot.pause()
        app.dashboard.route(LeaseDeleted(at=2.0, run_id="r", provider_id="a",
                                                    uptime_s=1.0, spend_usd=0.0))
        await pilot.pause()
        assert app.query_one(StatusBar).summary.rate_trend == "▁▃█▆"  # 0, .3, .9, .6 of 7 steps
        app._exit_cleared = True
