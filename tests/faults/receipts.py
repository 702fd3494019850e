"""The exit receipt held to the run record and the exit code: each recorded lease has its
line, whose words say what the record says of it, and the total says "nothing bills" exactly
when the exit code is 0 (issue 28: a receipt said KEPT RUNNING of a lease the record had
deleted, and the exit was 0)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.faults.pty_dashboard import PtyDashboard

RECEIPT_FILE = "receipt.txt"
ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]")


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


def assert_receipt_matches(text: str, state: Path, code: int) -> None:
    leases = [
        (str(rec["run_id"]), lease)
        for rec in records(state)
        for lease in rec["leases"]  # type: ignore[attr-defined]
    ]
    assert leases, f"no lease recorded under {state}"
    for run_id, lease in leases:
        line = re.search(rf"^lease {re.escape(str(lease['provider_id']))} \(.*$", text, re.M)
        assert line is not None, (lease, text)
        words = line.group(0)
        if lease["state"] == "deleted":
            assert "confirmed by the provider" in words and "still bills" not in words, words
        else:
            assert "still bills" in words and f"`mvp-tui down {run_id}`" in words, words
    for rec in records(state):
        total = re.search(rf"^run {re.escape(str(rec['run_id']))}: .*$", text, re.M)
        assert total is not None, text
        nothing = all(x["state"] == "deleted" for x in rec["leases"])  # type: ignore[attr-defined]
        assert total.group(0).endswith("nothing bills") == nothing, total.group(0)
    assert (code == 0) == ("may still bill" not in text), (code, text)
