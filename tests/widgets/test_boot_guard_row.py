"""The Bootstrap pane's "boot guard" row: the guard's verdict as the agent read it when it
started (its `boot_guard` phase), under the switch's row; absent until the agent says."""

from __future__ import annotations

import json

import pytest

from mvp_tui.node_protocol import BOOT_GUARD_PHASE, NODE_AGENT_PHASE
from mvp_tui.widgets.bootstrap_model import BootstrapModel, StageId, Status
from tests.widgets.data import AGENT_CHANNEL, T0, agent_record, watchdog_ready


def guard(status: str, **detail: object) -> bytes:
    record = agent_record(NODE_AGENT_PHASE, T0 + 80, phase=BOOT_GUARD_PHASE, status=status,
                          detail=detail, elapsed_ms=3)
    return json.dumps(record).encode()


def test_no_row_until_the_agent_reports_the_guard() -> None:
    model = BootstrapModel()
    assert model.guard is None and all(row.name != "boot guard" for row in model.rows())


@pytest.mark.parametrize(
    ("status", "detail", "shown", "text", "compact"),
    [
        ("ready", {"state": "armed", "armed": True, "tool": "curl", "grace_s": 1200},
         Status.DONE, "armed (curl, 20 min); stood down: agent attached", "stood down"),
        ("ready", {"state": "off"}, Status.SKIPPED, "off: [limits] boot_grace_mins = 0", "off"),
        ("ready", {"state": "none"}, Status.SKIPPED,
         "none ran on this node (its start command armed none)", "none ran"),
        ("ready", {"state": "not_needed"}, Status.SKIPPED,
         "not needed: this node does not bill", "not needed"),
    ],
)
def test_the_verdict_becomes_the_row_under_the_switch(
    status: str, detail: dict[str, object], shown: Status, text: str, compact: str
) -> None:
    model = BootstrapModel()
    assert model.record(AGENT_CHANNEL, json.dumps(watchdog_ready()).encode(), T0)
    assert model.record(AGENT_CHANNEL, guard(status, **detail), T0 + 80)
    row = model.guard
    assert row is not None and (row.status, row.detail, row.compact) == (shown, text, compact)
    rows = model.rows()
    assert rows[rows.index(model.stages[StageId.WATCHDOG]) + 1] is row
    assert not model.failed


def test_a_guard_that_cannot_run_fails_the_row_with_its_reason() -> None:
    model = BootstrapModel()
    reason = "the boot guard cannot run: this image has neither python3 nor curl\x1b[31m"
    assert model.record(AGENT_CHANNEL, guard("failed", state="failed", reason=reason), T0)
    row = model.guard
    assert row is not None and row.status is Status.FAILED and model.failed
    assert row.detail.startswith("the boot guard cannot run: this image has neither")
    assert "\x1b" not in row.detail and "\x1b" not in row.full


def test_an_unknown_state_is_not_shown() -> None:
    model = BootstrapModel()
    assert not model.record(AGENT_CHANNEL, guard("ready", state="bogus"), T0)
