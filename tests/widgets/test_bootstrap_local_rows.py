"""A node without SSH (local, Docker): its lease starts the agent itself, so the SSH rows say
they do not apply instead of waiting forever as pending."""

from __future__ import annotations

from mvp_tui.lease import events as ev
from mvp_tui.widgets.bootstrap import layout_rows
from mvp_tui.widgets.bootstrap_model import BootstrapModel, StageId, Status
from tests.widgets.data import RUN, T0


def running(host: str) -> ev.LeaseRunning:
    return ev.LeaseRunning(at=T0 + 1, run_id=RUN, provider_id="local-42", label="mvp-r-1-1",
                           host=host, port=22 if host else 0, user="root" if host else "",
                           via="direct" if host else "none", after_s=0.5,
                           price_per_hour=0.0)


def test_a_local_lease_skips_the_ssh_rows_and_has_its_agent() -> None:
    model = BootstrapModel()
    model.apply(running(""))
    stages = model.stages
    assert stages[StageId.SSH].status is Status.SKIPPED
    assert stages[StageId.HOST_KEY].status is Status.SKIPPED
    assert stages[StageId.SSH].detail == "not over SSH"
    assert stages[StageId.AGENT].status is Status.DONE
    assert stages[StageId.MODEL].status is Status.PENDING  # the node's own steps still to come
    # Skipped rows count as finished when the done steps fold into one line.
    rows = model.rows()
    assert layout_rows(rows, 60, 4).folded


def test_an_ssh_lease_keeps_its_ssh_rows_pending() -> None:
    model = BootstrapModel()
    model.apply(running("203.0.113.9"))
    assert model.stages[StageId.SSH].status is Status.PENDING
    assert model.stages[StageId.AGENT].status is Status.PENDING
