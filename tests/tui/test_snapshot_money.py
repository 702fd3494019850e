"""Every golden snapshot whose screen shows both the header and the Leases pane's rows says
one figure for the run's spend: the header's `spent` is the sum of the rows' spend (issue
28: 28 snapshots showed `spent $0.00` beside `deleted ($0.003)` and `$0.007`)."""

from __future__ import annotations

import html
import re
from collections import defaultdict
from pathlib import Path

import pytest

TESTS = Path(__file__).parents[1]  # every test folder's __snapshots__, widgets' included
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


def snapshots() -> list[Path]:
    return sorted(TESTS.rglob("__snapshots__/**/*.svg"))


def money(svg: Path) -> tuple[float, dict[str, float]] | None:
    """The header's `spent` and each Leases row's spend, or None when the screen lacks
    either (no header, or the Leases pane is not on it)."""
    lines = screen_lines(svg)
    head = next((re.search(r"spent \$([\d,.]+)", x) for x in lines if "spent $" in x), None)
    spends = {m.group(1): float(m.group(2)) for x in lines if (m := ROW.search(x))}
    if head is None or not spends:
        return None
    return float(head.group(1).replace(",", "")), spends


def disagrees(spent: float, spends: dict[str, float]) -> bool:
    return abs(spent - sum(spends.values())) >= 0.00015  # each figure is shown to 4 places


# Snapshots that show both, from four test files: if the reader stops finding them (a
# changed layout, a renamed snapshot), the check below would be checking nothing.
BOTH_ON_SCREEN = {
    "test_app_mid_run[160x48-mvp-dark].svg",
    "test_leases_with_a_failed_host_and_a_replacement[100x30].svg",
    "test_bootstrap_with_the_idle_stop_row[160x48].svg",
    "test_node_switch_failed[100x30].svg",
}


def test_the_header_and_the_leases_pane_say_one_figure() -> None:
    checked: list[str] = []
    for svg in snapshots():
        found = money(svg)
        if found is None:
            continue
        checked.append(svg.name)
        spent, spends = found
        assert not disagrees(spent, spends), (svg.name, spent, spends)
    # 20 of the 52 today, all under tests/tui (no tests/widgets snapshot has the header).
    assert set(checked) >= BOTH_ON_SCREEN, sorted(BOTH_ON_SCREEN - set(checked))
    assert len(checked) >= 20


def test_a_header_that_disagrees_with_its_rows_is_caught(tmp_path: Path) -> None:
    """One golden snapshot with its header's figure changed by a hundredth of a cent."""
    (original,) = [p for p in snapshots() if p.name == "test_app_mid_run[160x48-mvp-dark].svg"]
    found = money(original)
    assert found is not None
    spent, spends = found
    assert not disagrees(spent, spends)
    shown, changed = f"spent ${spent:.4f}", f"spent ${spent + 0.0002:.4f}"
    text = original.read_text()
    assert shown in html.unescape(text).replace("\xa0", " "), shown
    doctored = tmp_path / original.name
    doctored.write_text(text.replace(shown.replace(" ", "&#160;"), changed.replace(" ", "&#160;"))
                        .replace(shown, changed))
    found = money(doctored)
    assert found is not None and found[0] == pytest.approx(spent + 0.0002)
    assert disagrees(*found)
