"""Every golden snapshot whose screen shows both the header and the Leases pane's rows says
one figure for the run's spend: the header's `spent` is the sum of the rows' spend (issue
28: 28 snapshots showed `spent $0.00` beside `deleted ($0.003)` and `$0.007`)."""

from __future__ import annotations

import html
import re
from collections import defaultdict
from pathlib import Path

SNAPSHOTS = Path(__file__).parent / "__snapshots__"
ROW = re.compile(
    r"[▶·] (\S+)\s+.*?(?:deleted|running|pending|not ready|deleting|delete unconfirmed|"
    r"destroyed by node|ended by node)\s+\d+:\d\d:\d\d\s+\$[\d.]+/h\s+\$([\d.]+)"
)
TEXT = re.compile(r'<text class="[^"]*" x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>')


def screen_lines(svg: Path) -> list[str]:
    """The snapshot's text, a line per row of cells (pieces joined by their x)."""
    rows: dict[float, list[tuple[float, str]]] = defaultdict(list)
    for x, y, text in TEXT.findall(svg.read_text()):
        rows[float(y)].append((float(x), html.unescape(text).replace("\xa0", " ")))
    return ["".join(t for _, t in sorted(rows[y])) for y in sorted(rows)]


def test_the_header_and_the_leases_pane_say_one_figure() -> None:
    checked = 0
    for svg in sorted(SNAPSHOTS.rglob("*.svg")):
        lines = screen_lines(svg)
        head = next((re.search(r"spent \$([\d,.]+)", x) for x in lines if "spent $" in x), None)
        spends = {m.group(1): float(m.group(2)) for x in lines if (m := ROW.search(x))}
        if head is None or not spends:
            continue  # no header, or the Leases pane is not on this screen
        checked += 1
        spent = float(head.group(1).replace(",", ""))
        assert abs(spent - sum(spends.values())) < 0.00015, (svg.name, spent, spends)
    assert checked >= 20  # the snapshots with both on screen (today 27)
