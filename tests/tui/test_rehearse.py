"""`mvp-tui rehearse`: the real dashboard against the simulated marketplace shipped with the
app, this machine as the node, the tiny generated model; from a fresh home directory it
reaches tokens and ends with nothing alive, in well under a minute."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mvp_tui.config import ConfigPaths, load_config
from mvp_tui.engine.events import NodeReady, OffersListed
from mvp_tui.exit_codes import ExitCode
from mvp_tui.lease import events as lease
from mvp_tui.prompt.events import PromptDone
from mvp_tui.rehearsal.faults import FAULT_SETS, parse_faults
from mvp_tui.rehearsal.session import build
from mvp_tui.widgets.bootstrap import BootstrapPane
from mvp_tui.widgets.bootstrap_model import StageId, Status
from mvp_tui.widgets.leases import LeasesPane
from mvp_tui.widgets.status_bar import StatusBar
from tests.agent.procs import alive
from tests.prompt.engine import require_engine
from tests.prompt.waiting import WaitingSink
from tests.tui.apps import FIXED_NOW
from tests.tui.test_dashboard_run import is_
from tests.widgets.harness import screen_text


def _fresh_config(home: Path, refresh: str = "60"):  # type: ignore[no-untyped-def]
    """A new user's configuration: an empty home, no config file, no keys."""
    env = {"HOME": str(home), "MVP_STATE_DIR": str(home / ".local" / "state" / "mvp-tui"),
           "MVP_PROMPT_RPC_BIND": "127.0.0.1:0", "MVP_UI_OFFERS_REFRESH_SECS": refresh}
    return load_config(env=env, paths=ConfigPaths(default=home / ".config" / "none.toml"))


@pytest.mark.parametrize("faults", ["", "sold,node-dies,failing-deletes"])
async def test_rehearsal_from_a_fresh_home_reaches_tokens_and_leaves_nothing(
    tmp_path: Path, faults: str
) -> None:
    require_engine()
    began = time.monotonic()
    seen = WaitingSink()
    rehearsal = build(_fresh_config(tmp_path / "home"), parse_faults(faults), tap=seen,
                      clock=lambda: FIXED_NOW)
    app, market = rehearsal.app, rehearsal.market
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await seen.first(is_(OffersListed), within=30)
            await pilot.pause()
            # Labelled everywhere: nobody takes it for a real rental.
            assert "REHEARSAL" in str(app.query_one(StatusBar).render())
            await pilot.press("enter")  # the cheapest offer, then the next ones
            ready = await seen.first(is_(NodeReady), within=50)
            assert isinstance(ready, NodeReady)
            served = [e for e in seen.events if isinstance(e, lease.LeaseRunning)][-1].provider_id
            await pilot.pause()
            leases = app.query_one(LeasesPane)
            assert "(rehearsal)" in screen_text(app)
            # The node is this machine's agent: no SSH step is left pending on the checklist.
            stages = app.query_one(BootstrapPane).model.stages
            assert stages[StageId.SSH].status is Status.SKIPPED
            assert stages[StageId.AGENT].status is Status.DONE
            assert any(lease.state.may_bill for lease in leases.model.leases.values())
            assert app.focused is app.query_one("#prompt-input")
            await pilot.press(*"hello", "enter")
            done = await seen.first(is_(PromptDone), within=30)
            assert isinstance(done, PromptDone) and done.tokens_generated >= 1
            await pilot.press("ctrl+c")  # the prompt box has focus: ctrl+c still asks
            await pilot.pause()
            await pilot.press("enter")  # "Destroy and quit"
            # The served lease's delete (with node-dies an earlier host's delete came first).
            await seen.first(lambda e: isinstance(e, lease.LeaseDeleted)
                             and e.provider_id == served, within=30)
            deadline = time.monotonic() + 30
            while app.return_code is None and time.monotonic() < deadline:
                await pilot.pause(0.05)  # the app exits once its stop is done
        assert app.return_code == 0
        answered = [e.outcome for e in seen.events if isinstance(e, lease.AttemptAnswered)]
        if "sold" in faults:
            assert answered[0] == "unavailable"
        node_pids = [int(p.removeprefix("local-")) for p in rehearsal.engine.provider.node._leases]  # type: ignore[attr-defined]
        assert node_pids and not any(alive(pid) for pid in node_pids)
        assert market.billing() == []  # every instance of the marketplace destroyed
    finally:
        rehearsal.close()
    assert rehearsal.model.is_relative_to(tmp_path / "home")  # the tiny model, made here
    assert time.monotonic() - began < 60


def test_an_unknown_fault_set_is_named_with_the_known_ones(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "MVP_STATE_DIR": str(tmp_path / "state")}
    done = subprocess.run([sys.executable, "-m", "mvp_tui", "rehearse", "--faults", "sold,oops"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == int(ExitCode.USAGE)
    assert "'oops'" in done.stderr
    for name in FAULT_SETS:
        assert name in done.stderr
