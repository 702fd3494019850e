"""The exit receipt held to the run record and the exit code: each recorded lease has its
line, whose words say what the record says of it and whose uptime and money are the record's
(computed here from its create and delete times and price), the run's total is the sum of its
lines, and the total says "nothing bills" exactly when the exit code is 0 (issue 28: a receipt
said KEPT RUNNING of a lease the record had deleted, and the exit was 0)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from tests.faults.pty_dashboard import ANSI, PtyDashboard

RECEIPT_FILE = "receipt.txt"


def after_screen(term: PtyDashboard) -> str:
    """What the terminal shows once the app has left the alternate screen."""
    output = term.output
    tail = output[output.rfind(b"\x1b[?1049l") :]
    return ANSI.sub(b"", tail).decode(errors="replace").replace("\r", "")


def records(state: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted((state / "runs").glob("*/record.json"))]


def kept_receipt(state: Path) -> str:
    """The receipt the dashboard kept in its run's directory (what a closed terminal lost)."""
    (path,) = sorted((state / "runs").glob(f"*/{RECEIPT_FILE}"))
    return path.read_text()


# The figures of a lease line: "· 0:00:07 · $0.0006" (deleted) or "· 0:00:07 · $0.0006 so far".
FIGURES = re.compile(r" · (\d+):(\d\d):(\d\d) · \$(\d+\.\d{4})")


def clock_s(match: re.Match[str]) -> int:
    hours, minutes, seconds = (int(match.group(i)) for i in (1, 2, 3))
    return hours * 3600 + minutes * 60 + seconds


def assert_figures_match(words: str, lease: dict[str, Any], said_by: float) -> float:
    """The line's uptime and money against the record: a deleted lease's uptime is its
    delete time less its create time (rounded to the second), never time since; an open
    one's ran to a moment between its create and `said_by`. Its money is price times that
    uptime, to the cent's hundredth. The line's dollars, for the total."""
    figures = FIGURES.search(words)
    assert figures is not None, words
    said_s, said_usd = clock_s(figures), float(figures.group(4))
    price, created = float(lease["price_per_hour"]), float(lease["created_at"])
    if lease["state"] == "deleted":
        uptime = float(lease["deleted_at"]) - created
        assert said_s == round(uptime), (words, f"the record's uptime is {uptime:.2f} s")
        assert figures.group(4) == f"{price * uptime / 3600:.4f}", (words, price, uptime)
    else:
        assert f"still bills ${price:.3f}/h" in words, (words, price)
        assert 0 <= said_s <= round(said_by - created), (words, created, said_by)
        low, high = price * (said_s - 0.5) / 3600, price * (said_s + 0.5) / 3600
        assert low - 0.00005 <= said_usd <= high + 0.00005, (words, price, said_s)
    return said_usd


def assert_receipt_matches(text: str, state: Path, code: int) -> None:
    said_by = time.time()  # the receipt was said before now
    leases = [
        (str(rec["run_id"]), lease)
        for rec in records(state)
        for lease in rec["leases"]  # type: ignore[attr-defined]
    ]
    assert leases, f"no lease recorded under {state}"
    dollars: dict[str, float] = {}
    for run_id, lease in leases:
        line = re.search(rf"^lease {re.escape(str(lease['provider_id']))} \(.*$", text, re.M)
        assert line is not None, (lease, text)
        words = line.group(0)
        if lease["state"] == "deleted":
            assert "confirmed by the provider" in words and "still bills" not in words, words
        else:
            assert "still bills" in words and f"`mvp-tui down {run_id}`" in words, words
        dollars[run_id] = dollars.get(run_id, 0.0) + assert_figures_match(words, lease, said_by)
    for rec in records(state):
        total = re.search(rf"^run {re.escape(str(rec['run_id']))}: .*$", text, re.M)
        assert total is not None, text
        nothing = all(x["state"] == "deleted" for x in rec["leases"])  # type: ignore[attr-defined]
        assert total.group(0).endswith("nothing bills") == nothing, total.group(0)
        spent = re.search(r" · \$(\d+\.\d{4})", total.group(0))
        assert spent is not None, total.group(0)
        count = len(rec["leases"])  # type: ignore[arg-type]
        # The total is the sum of the unrounded figures: within half a hundredth per line.
        assert abs(float(spent.group(1)) - dollars[str(rec["run_id"])]) <= 0.00005 * count + 1e-9
    assert (code == 0) == ("may still bill" not in text), (code, text)
