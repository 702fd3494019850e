"""The model fetched at boot (issue 20 item 1), as SVG snapshots of the composed dashboard
(fixed size, clock and data): the Bootstrap pane while SSH is still pending shows the model
row running since the instance ran; once the agent arrives it shows the real bytes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC

import pytest

from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.engine.events import StageBudget
from mvp_tui.events import EngineEvent
from mvp_tui.lease import events as ev
from mvp_tui.ssh.events import AgentStarted, AttemptOutcome, SshAttempt
from mvp_tui.tui.app import MvpApp
from mvp_tui.widgets.bootstrap import BootstrapPane
from mvp_tui.widgets.bootstrap_model import StageId, Status
from tests.tui.apps import make_app
from tests.tui.test_attempt_snapshots import SIZE_IDS, SIZES, VASTAI, leased, posting
from tests.widgets.data import RUN, T0, fixed_clock

KEY = "7003"


def fetching_at_boot_ssh_pending() -> list[EngineEvent]:
    """The host runs (its start command began the model's fetch); sshd not answering yet."""
    return [
        *leased(T0 + 53.7, 3, "1003", KEY, 0.41),
        ev.PrefetchStarted(at=T0 + 73.7, run_id=RUN, provider_id=KEY),
        StageBudget(at=T0 + 73.9, run_id=RUN, stage="ssh", budget_s=240.0),
        SshAttempt(at=T0 + 74, lease_key=KEY, attempt=1, target="1.2.3.4:22003",
                   outcome=AttemptOutcome.NOT_LISTENING, detail="connection refused",
                   next_try_s=1.0),
    ]


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_bootstrap_fetching_at_boot_ssh_pending(snap_compare, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    """Bootstrap: `model` runs since the instance ran, while `ssh` still waits for sshd."""
    app = make_app(hub=ChannelHub(clock=lambda: 0.0), wall=fixed_clock(T0 + 95.3), tz=UTC,
                   env=VASTAI)

    def settled(app: MvpApp) -> bool:
        model = app.query_one(BootstrapPane).model
        return (
            model.stages[StageId.SSH].budget_s == 240.0
            and model.stages[StageId.MODEL].status is Status.ACTIVE
        )

    assert snap_compare(app, terminal_size=size,
                        run_before=posting(fetching_at_boot_ssh_pending(), settled))


def _adopting(at: float, done: int, total: int) -> bytes:
    return json.dumps({
        "type": "NodeAgentProgress", "phase": "model", "state": "downloading", "at": at,
        "bytes_done": done, "bytes_total": total, "rate_bps": 52_000_000,
    }).encode()


def test_the_agent_brings_the_boot_fetchs_real_bytes_to_the_row() -> None:
    from mvp_tui.widgets.bootstrap_model import BootstrapModel

    model = BootstrapModel(tz=UTC)
    events: Sequence[EngineEvent] = [
        *fetching_at_boot_ssh_pending(),
        SshAttempt(at=T0 + 96, lease_key=KEY, attempt=2, target="1.2.3.4:22003",
                   outcome=AttemptOutcome.CONNECTED, detail="", next_try_s=None),
        AgentStarted(at=T0 + 97, lease_key=KEY, pid=4242, remote_dir="/root/.mvp/r1",
                     resumed=False),
    ]
    for event in events:
        model.apply(event)
    row = model.stages[StageId.MODEL]
    assert row.status is Status.ACTIVE and row.started_at == T0 + 73.7
    assert "bytes once the agent reports" in row.detail
    model.record("mvp.node.1.agent", _adopting(T0 + 98, 1_200_000_000, 4_000_000_000), T0 + 98)
    assert row.started_at == T0 + 73.7  # still timed from the instance's start
    assert row.detail == "downloading 1.2 GB of 4.0 GB 52.0 MB/s" and row.progress == 0.3
