"""Background searches (a key, the refresh timer, a sold offer) share one exclusive worker
group: a new search replaces one still running, never piles up behind it (issue 23 §5)."""

from __future__ import annotations

from pathlib import Path

from textual.worker import WorkerState

from mvp_tui.engine.events import OffersListed
from tests.tui.test_dashboard_run import dashboard, is_


async def test_a_new_search_replaces_the_one_running(tmp_path: Path) -> None:
    app, seen = dashboard({}, tmp_path)  # the local provider: this machine's offer
    async with app.run_test(size=(160, 48)) as pilot:
        await seen.first(is_(OffersListed))
        await pilot.pause()
        before = [e for e in seen.events if isinstance(e, OffersListed)]
        for _ in range(3):
            app.dashboard.action_search_offers()
        searches = [w for w in app.workers if w.group == "offers"]
        assert [w.is_cancelled for w in searches] == [True, True, False]  # only the last runs
        await seen.first(lambda e: isinstance(e, OffersListed) and all(e is not b for b in before))
        await pilot.pause()
        assert searches[-1].state is WorkerState.SUCCESS  # the board is the last search's
        app._exit_cleared = True
