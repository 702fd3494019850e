"""The fault matrix's results table, printed at the end of the pytest run.

Hooks imported into tests/conftest.py (so they run in the xdist controller, which receives
every worker's reports): one line per case under tests/faults/ with its outcome and, where
the case recorded them (`record_property`), the exit code and the instances left alive.
"""

from __future__ import annotations

from typing import Any

import pytest

FAULTS = "tests/faults/"
_cases: dict[str, dict[str, Any]] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not report.nodeid.startswith(FAULTS):
        return
    case = _cases.setdefault(report.nodeid, {"outcome": "passed"})
    case.update(dict(report.user_properties))
    if report.failed:
        case["outcome"] = "failed" if report.when == "call" else f"error ({report.when})"
    elif report.skipped and case["outcome"] == "passed":
        case["outcome"] = "skipped"


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or not _cases:
        return
    rows = [
        (
            nodeid.removeprefix(FAULTS),
            case["outcome"],
            _text(case.get("exit_code")),
            _text(case.get("instances_left")),
        )
        for nodeid, case in sorted(_cases.items())
    ]
    width = max(len(r[0]) for r in rows)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row[1].split()[0]] = counts.get(row[1].split()[0], 0) + 1
    write = terminalreporter.write_line
    terminalreporter.section("fault matrix")
    write(f"{'case':<{width}}  {'outcome':<16} {'exit':>6}  {'left':>4}")
    for name, outcome, code, left in rows:
        write(f"{name:<{width}}  {outcome:<16} {code:>6}  {left:>4}")
    write(", ".join(f"{n} {k}" for k, n in sorted(counts.items())) + f" of {len(rows)} cases")


def _text(value: object) -> str:
    return "-" if value is None else str(value)
