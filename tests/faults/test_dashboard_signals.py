"""The dashboard process ended from outside while a Vast lease is live: SIGTERM, and the
terminal closed (SIGHUP). Nobody can be asked, so the lease is destroyed, confirmed, and the
process exits 0 — never a lease left behind."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.vastai_server import FakeVast
from tests.faults.pty_dashboard import PtyDashboard
from tests.faults.receipts import after_screen, assert_receipt_matches, kept_receipt
from tests.faults.test_dashboard_exits import (  # noqa: F401  (fixtures)
    closed_port,
    fake,
    open_in_record,
    vast_env,
)

RIGHT = b"\x1b[C"
DOWN = b"\x1b[B"


@pytest.fixture
def dash(fake: FakeVast, tmp_path: Path) -> Iterator[PtyDashboard]:  # noqa: F811
    app = PtyDashboard(vast_env(fake, tmp_path))
    try:
        yield app
    finally:
        app.kill()


async def until_billing(server: FakeVast, count: int, within: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while len(server.billing()) != count:
        assert loop.time() < deadline, f"the fake never had {count} billing instance(s)"
        await asyncio.sleep(0.05)


async def lease_by_keys(dash: PtyDashboard, fake: FakeVast, billing: int = 1) -> None:  # noqa: F811
    """Lease the RTX 3090 by keys; until the fake bills `billing` instances."""
    await asyncio.to_thread(dash.wait_for, "RTX 3090")
    # The board also lists this machine first ($0): Down to the Vast offer.
    dash.press(DOWN)
    dash.press(b"\r")  # Enter on the RTX 3090: the confirm opens on Cancel
    await asyncio.to_thread(dash.wait_for, "Lease on vastai")  # the confirm
    dash.press(RIGHT)  # Cancel → Lease
    dash.press(b"\r")
    await until_billing(fake, billing)


@pytest.mark.parametrize("how", ["sigterm", "terminal closed"])
async def test_dashboard_killed_from_outside_destroys(
    how: str,
    dash: PtyDashboard,
    fake: FakeVast,  # noqa: F811
    tmp_path: Path,
) -> None:
    await lease_by_keys(dash, fake)
    if how == "sigterm":
        dash.proc.send_signal(signal.SIGTERM)
    else:
        dash.close_terminal()
        # A hang-up also brings SIGCONT (the kernel's, as tmux's kill-server does); Textual
        # would re-enter application mode on it and block on the dead terminal for ever.
        dash.proc.send_signal(signal.SIGCONT)
    code = await asyncio.to_thread(dash.wait, 90)
    assert fake.billing() == []
    assert open_in_record(tmp_path) == []
    assert code == 0
    # The receipt, kept in the run's directory (a closed terminal shows nothing), says what
    # the record says; on a live terminal it is said too, the same words.
    kept = kept_receipt(tmp_path / "state")
    assert_receipt_matches(kept, tmp_path / "state", code)
    if how == "sigterm":
        assert b"Traceback" not in dash.output
        for line in kept.splitlines():
            assert line in after_screen(dash), line
