"""After the dashboard, the shell says what happened to each lease and to the money: the real
`mvp-tui` in a pty with a live Vast lease (fake Vast over real HTTP), quit by keys. The words
are the record's and agree with the exit code (issue 28: "KEPT RUNNING" was printed of a
lease the record had deleted, with exit 0, when the last lease message was still in flight).

Each lease line's uptime and money are the record's (tests/faults/receipts.py): the
destroy-and-quit case makes the account listing after the delete answer late, so a receipt
whose uptime ran on past the confirmed delete (to "now") reads a second or more too long.

`MVP_RECEIPT_REPEAT=N` runs the destroy-and-quit case N times for each of its two keys (2N
runs; N=25 under `-n 2` on a loaded machine gave the 50 that showed the in-flight race gone);
CI runs it once per key."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import pytest

from mvp_tui.rehearsal.vast_replies import Fault
from mvp_tui.rehearsal.vastai_server import FakeVast
from tests.faults.pty_dashboard import PtyDashboard
from tests.faults.receipts import after_screen, assert_receipt_matches, kept_receipt
from tests.faults.test_dashboard_exits import (  # noqa: F401  (fixtures)
    closed_port,
    fake,
    vast_env,
)
from tests.faults.test_dashboard_signals import lease_by_keys

LEFT = b"\x1b[D"
REPEAT = int(os.environ.get("MVP_RECEIPT_REPEAT", "1"))
ACCOUNT_LISTING_LATE_S = 1.5


async def quit_with(term: PtyDashboard, *, keep: bool, key: bytes = b"\x03") -> int:
    term.press(key)  # ctrl+c (or q) asks first; focus starts on "Destroy and quit"
    await asyncio.to_thread(term.wait_for, "Enter: Destroy and quit")  # the hint: focus is set
    if keep:
        term.press(LEFT)
        await asyncio.to_thread(term.wait_for, "Enter: Keep running")
    term.press(b"\r")
    return await asyncio.to_thread(term.wait, 90)


@pytest.mark.parametrize("round_", range(REPEAT))
@pytest.mark.parametrize("key", [b"\x03", b"q"], ids=["ctrl+c", "q"])
async def test_destroy_and_quit_prints_the_receipt(
    fake: FakeVast, tmp_path: Path, key: bytes, round_: int  # noqa: F811
) -> None:
    term = PtyDashboard(vast_env(fake, tmp_path))
    try:
        await lease_by_keys(term, fake)
        (instance,) = [i["id"] for i in fake.billing()]
        # The account check after the confirmed delete is answered 1.5 s late: the receipt
        # is said at least that long after the record's delete time.
        scripted_at = len(fake.requests)
        fake.script("list", Fault(late=True, delay_s=ACCOUNT_LISTING_LATE_S))
        code = await quit_with(term, keep=False, key=key)
    finally:
        term.kill()
    assert code == 0
    since = [(r.method, r.path.rstrip("/")) for r in fake.requests[scripted_at:]]
    listing = ("GET", "/api/v1/instances")
    assert listing in since, "the account was never listed: the late answer delayed nothing"
    assert ("DELETE", f"/api/v0/instances/{instance}") in since[: since.index(listing)], since
    text = after_screen(term)
    line = re.search(rf"lease {instance} \(vastai, RTX 3090\): destroyed, confirmed by the "
                     r"provider · 0:\d\d:\d\d · \$(\d+\.\d{4})", text)
    assert line is not None, text
    total = re.search(r"run (r-\w+): 1 lease · \$(\d+\.\d{4}) · nothing bills", text)
    assert total is not None, text
    assert total.group(2) == line.group(1)
    assert_receipt_matches(text, tmp_path / "state", code)
    kept = kept_receipt(tmp_path / "state").splitlines()
    assert kept[:2] == [line.group(0), total.group(0)]
    assert kept[2].startswith("account checked (vastai): nothing of run ")  # provably zero
    assert all(x in text for x in kept)  # the screen said the same words


async def test_keep_running_prints_what_still_bills(fake: FakeVast, tmp_path: Path) -> None:  # noqa: F811
    term = PtyDashboard(vast_env(fake, tmp_path))
    try:
        await lease_by_keys(term, fake)
        # Settled (the Leases pane shows it running): a walk still in flight would destroy it.
        await asyncio.to_thread(term.wait_for, "running after")
        (instance,) = [i["id"] for i in fake.billing()]
        code = await quit_with(term, keep=True)
    finally:
        term.kill()
    text = after_screen(term)
    assert code == 3, text
    line = re.search(rf"lease {instance} \(vastai, RTX 3090\): KEPT RUNNING, still bills "
                     r"\$0\.3\d\d/h · 0:\d\d:\d\d · \$\d+\.\d{4} so far; end it with "
                     r"`mvp-tui down (r-\w+)`", text)
    assert line is not None, text
    assert f"run {line.group(1)}: 1 lease" in text and "1 may still bill" in text
    assert text.count(f"mvp-tui down {line.group(1)}") == 1  # said once, not twice
    # The kept lease's own end: the node's 12 h deadline (no [limits] max_hours set).
    assert re.search(rf"lease {instance}: its node ends \d{{4}}-\d\d-\d\d \d\d:\d\d on its own "
                     r"\(\[limits\] max_hours = 12\)", text), text
    assert [i["id"] for i in fake.billing()] == [instance]
    assert_receipt_matches(text, tmp_path / "state", code)
