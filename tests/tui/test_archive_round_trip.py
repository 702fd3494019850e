"""An archive holds what the panes showed (issue 31 §4).

One run's events, with every engine event type in it, go through the live path (the
engine's tap, `OrchTap`, into the dashboard's port) and through archive → replay
(`mvp.orch.events` read back by `tui/replay_events.py`); the panes' models come out equal:
leases and attempts, the bootstrap checklist, the channels, the prompt. The one difference
is by design: the answer's text is never archived.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC
from pathlib import Path
from typing import Any

from mvp_tui.config import ConfigPaths, load_config
from mvp_tui.datastream.archive import FrameArchive, read_archive
from mvp_tui.datastream.channels import MVP_ORCH_BOOTSTRAP
from mvp_tui.datastream.frame import StreamId
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.engine import events as eng
from mvp_tui.engine.event_records import EVENT_MODULES, event_types
from mvp_tui.engine.orch import OrchTap
from mvp_tui.engine.ui_port import BOOTSTRAP_EVENTS
from mvp_tui.events import EngineEvent
from mvp_tui.lease import events as lease
from mvp_tui.prompt import events as prompt
from mvp_tui.secrets import Redactor
from mvp_tui.ssh import events as ssh
from mvp_tui.tui.app import MvpApp
from mvp_tui.tui.feeds import ReplayFeed
from mvp_tui.tui.replay_control import ReplayControl
from mvp_tui.tui.replay_events import ArchiveEvents
from mvp_tui.widgets.bootstrap_model import BootstrapModel
from mvp_tui.widgets.leases import LeasesPane
from mvp_tui.widgets.prompt import PromptPane
from tests.tui.apps import FIXED_NOW, make_app
from tests.widgets.data import NOW, RUN, T0, ssh_events, walk_events

KEY = "7003"  # the lease that serves (walk_events' last)


def one_run() -> list[EngineEvent]:
    """A run in the order an engine tells it: the walk, the node, prompts, a lost node and
    the teardown, with each engine event type at least once."""
    t = T0
    return [
        eng.RunStarted(at=t, run_id=RUN, provider="vastai", profile="deploy", state_dir="/s"),
        eng.SessionChanged(at=t + 0.1, run_id=RUN, provider="vastai", billing=True, ssh=True,
                           limits={"max_spend_usd": 5.0, "max_hours": 12.0,
                                   "max_price_per_hour": 0.8}),
        eng.OffersListed(at=t + 0.5, provider="vastai", count=4, skipped=1),
        eng.WalkOrderSaid(at=t + 0.6, run_id=RUN, offers=("vastai:1001", "vastai:1002")),
        lease.WalkReordered(at=t + 0.7, run_id=RUN, offers=("1001", "1002"), reason="memory"),
        lease.OfferSkipped(at=t + 0.8, run_id=RUN, offer_id="1000", price_per_hour=9.0,
                           reason="over the price cap"),
        *walk_events(),
        lease.SecretStored(at=t + 60, run_id=RUN, label="mvp-r-7f3a-3", name="mvp_hk"),
        lease.VolumeMounted(at=t + 61, run_id=RUN, provider="vastai", volume_id="v1",
                            name="mvp-cache", size_gb=50, data_center="US", usd_per_month=5.0),
        lease.PrefetchStarted(at=t + 62, run_id=RUN, provider_id=KEY),
        lease.Sweep(at=t + 63, run_id=RUN, prefix="mvp-r-7f3a", found=("7001", KEY),
                    destroyed=("7001",), unconfirmed=(), listed=True),
        eng.StageBudget(at=t + 64, run_id=RUN, stage="ssh", budget_s=300.0),
        eng.AccountKeyReady(at=t + 65, run_id=RUN, provider="vastai", identity="~/.ssh/id",
                            fingerprint="SHA256:acct", registered_now=True, line="key ok"),
        *ssh_events(),
        ssh.BootstrapReady(at=t + 80, lease_key=KEY, attempts=3),
        ssh.PortForwarded(at=t + 80.5, lease_key=KEY, local_port=18081, remote_port=8080),
        eng.NodeWatchdog(at=t + 81, run_id=RUN, status="ready", armed=True,
                              deadline_at=t + 3600, idle_teardown_mins=30.0),
        eng.NodeBootGuard(at=t + 81.5, run_id=RUN, status="ready", grace_s=600),
        eng.NodeReady(at=t + 82, run_id=RUN, model_id="tiny", engine="llama.cpp",
                      local_url="http://127.0.0.1:18081", load_ms=800),
        eng.ReadySummary(at=t + 82.1, run_id=RUN, seconds=80.0,
                         stages=(("image", 20.0), ("ssh", 30.0)), spent_usd=0.01,
                         text="ready in 80 s"),
        eng.EndpointReady(at=t + 82.2, run_id=RUN, base_url="http://127.0.0.1:18081",
                          model="tiny", auth="key", idle_stop_mins=30.0),
        eng.RunStateChanged(at=t + 82.3, run_id=RUN, state="serving"),
        eng.IdleStopNotice(at=t + 82.4, run_id=RUN, state="armed", idle_stop_mins=30.0),
        prompt.PromptRpcListening(at=t + 82.5, host="127.0.0.1", port=7777),
        prompt.PromptRpcFailed(at=t + 82.6, addr="127.0.0.1:7778", error="address in use"),
        prompt.PromptQueued(at=t + 83, prompt_id=1, text_chars=5, max_tokens=16, position=0),
        prompt.PromptStarted(at=t + 83.1, prompt_id=1),
        *[prompt.TextDelta(at=t + 83.2 + i / 10, prompt_id=1, text="tok ") for i in range(3)],
        prompt.PromptDone(at=t + 84, prompt_id=1, final_text="tok tok tok", tokens_generated=3,
                          elapsed_ms=900, ttft_ms=100, tokens_per_s=3.3, cost_usd=0.0001),
        prompt.PromptQueued(at=t + 85, prompt_id=2, text_chars=9, max_tokens=16, position=0,
                            source=prompt.PromptSource.RPC, request_id=42),
        prompt.PromptStarted(at=t + 85.1, prompt_id=2),
        prompt.PromptFault(at=t + 85.5, prompt_id=2, fault_kind=prompt.FaultKind.ENGINE_REJECTED,
                           error="context too long", http_status=400, partial_text="par"),
        prompt.PromptQueued(at=t + 86, prompt_id=3, text_chars=2, max_tokens=16, position=0),
        prompt.PromptCancelled(at=t + 86.5, prompt_id=3, was_active=False),
        eng.LimitReached(at=t + 87, run_id=RUN, provider_id=KEY, limit="max_spend_usd",
                            value=0.02, reached=0.02),
        ssh.SessionStopped(at=t + 88, lease_key=KEY, reason=ssh.StopReason.AGENT_EXITED,
                           detail="the agent ended"),
        ssh.AgentExited(at=t + 88.1, lease_key=KEY, exit_code=1, before_ready=False),
        eng.NodeFailed(at=t + 88.2, run_id=RUN, reason="the engine ended", fix="look at its log"),
        eng.AttemptAbandoned(at=t + 88.3, run_id=RUN, provider_id=KEY, offer_id="1003",
                             stage="serving", scope="host", failure_kind="engine",
                             reason="the engine ended", stage_secs=(("serving", 5.0),)),
        eng.NodeReplacing(at=t + 88.4, run_id=RUN, provider_id=KEY, reason="node lost",
                          replacement=2),
        lease.WalkFailed(at=t + 89, run_id=RUN, failure=lease.WalkFailure.EXHAUSTED,
                         reason="no offer left", attempts=4),
        eng.RunStateChanged(at=t + 89.5, run_id=RUN, state="tearing down"),
        ssh.SessionClosed(at=t + 90, lease_key=KEY, agent=ssh.AgentStop.NOT_RUNNING),
        lease.LeaseDeleting(at=t + 90.5, run_id=RUN, provider_id=KEY,
                            reason=lease.DeleteReason.REQUESTED),
        lease.LeaseDeleteUnconfirmed(at=t + 91, run_id=RUN, provider_id=KEY,
                                     reason="destroy timed out"),
        lease.LeaseDeleted(at=t + 92, run_id=RUN, provider_id=KEY, uptime_s=40.0,
                           spend_usd=0.004, billed_usd=0.005),
        lease.SecretDeleted(at=t + 92.5, run_id=RUN, label="mvp-r-7f3a-3", name="mvp_hk"),
        lease.SecretLeftOver(at=t + 92.6, run_id=RUN, label="mvp-r-7f3a-2", name="mvp_hk2",
                             secret_id="s2", reason="delete refused", fix="delete it by hand"),
        lease.AccountChecked(at=t + 93, run_id=RUN, provider="vastai", prefix="mvp",
                             listed=True, destroyed=(), unconfirmed=(), other_runs=(),
                             kept=(), nothing_bills=True),
        eng.RunFinished(at=t + 94, run_id=RUN, exit_code=0),
    ]


def test_the_run_has_every_engine_event_type() -> None:
    """A new event type must join the run (and so the round trip), wherever it is defined."""
    live: set[type[EngineEvent]] = set()
    todo = list(EngineEvent.__subclasses__())
    while todo:
        kind = todo.pop()
        todo += kind.__subclasses__()
        module = __import__(kind.__module__, fromlist=["_"])
        if getattr(module, kind.__name__, None) is kind:  # not a class dataclass replaced
            live.add(kind)
    assert live == set(event_types().values()), "define events in EVENT_MODULES"
    assert {m.__name__ for m in EVENT_MODULES} >= {
        "mvp_tui.lease.events", "mvp_tui.ssh.events", "mvp_tui.engine.events",
        "mvp_tui.prompt.events",
    }
    missing = sorted(k.__name__ for k in live - {type(e) for e in one_run()})
    assert missing == [], f"add to one_run(): {missing}"


def _state(value: Any) -> Any:
    """A model's state as plain values (dataclasses field by field, other objects by vars)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _state(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.name != "ledger"}  # the ledger is compared on its own
    if isinstance(value, dict):
        return {k: _state(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)) or type(value).__name__ == "deque":
        return [_state(v) for v in value]
    return value


def _bootstrap(events: list[EngineEvent], hub: ChannelHub) -> dict[str, Any]:
    """The Bootstrap pane's model from the events the port hands it, then the hub's phase
    records. (The pane folds both as they come, so its rows depend on which came first:
    its timer against the events; here the order is fixed, the same for both paths.)"""
    model = BootstrapModel(tz=UTC)
    for event in events:
        if type(event) in BOOTSTRAP_EVENTS:
            model.apply(event)
    for frame in hub.tail(MVP_ORCH_BOOTSTRAP).frames:
        model.record(MVP_ORCH_BOOTSTRAP, frame.payload, NOW)
    return {k: _state(v) for k, v in vars(model).items() if k != "tz"}


def _models(app: MvpApp, events: list[EngineEvent]) -> dict[str, Any]:
    leases = app.query_one(LeasesPane).model
    pane = app.query_one(PromptPane)
    assert app.hub is not None
    return {
        "leases": _state(leases.leases),
        "history": leases.full_text(),
        "attempts": _state(leases._attempts),
        "ledger": {k: _state(v) for k, v in vars(app.status.ledger).items() if not callable(v)},
        "bootstrap": _bootstrap(events, app.hub),
        "channels": {s.channel: s.count for s in app.hub.snapshot().channels},
        "prompt": {
            "ready": pane.ready, "model": pane.model_name, "endpoint": pane.openai_endpoint,
            "note": pane.endpoint_note, "rpc": pane.rpc_endpoint, "live": _state(pane.live),
            "waiting": sorted(pane.waiting), "rates": list(pane.rates),
            # The questions and figures (the answer's text is not archived: a replay says so).
            "turns": [(t.question, t.figures, t.fault) for t in pane.view.turns],
        },
    }


async def _live(archive_path: Path) -> dict[str, Any]:
    clock = iter(range(100_000))
    hub = ChannelHub(clock=lambda: float(next(clock)) / 1000, stream=StreamId("mvp-orch", 1))
    with FrameArchive(archive_path, timing=False) as archive:
        hub.archive = archive
        app = make_app(hub=hub, wall=lambda: NOW)
        async with app.run_test(size=(160, 48)) as pilot:
            tap = OrchTap(app.dashboard.route, hub, run_id=RUN, node_id=1, redactor=Redactor([]))
            events = one_run()
            for event in events:
                tap(event)
            await pilot.pause(0.5)
            return _models(app, events)


async def _replayed(archive_path: Path) -> dict[str, Any]:
    config = load_config(env={}, paths=ConfigPaths(default=Path("/nonexistent/c.toml")))
    total = sum(1 for _ in read_archive(archive_path))
    control = ReplayControl(archive_path, total, speed=1e6)
    app = MvpApp(config, hub=control.hub, replay=control, clock=lambda: FIXED_NOW,
                 wall=lambda: NOW)
    async with app.run_test(size=(160, 48)) as pilot:
        await control.source.idle.wait()
        assert isinstance(app.feed, ReplayFeed)
        app.feed.poll(app.dashboard)  # its 4 Hz poll, now
        await pilot.pause(0.5)
        _, events = ArchiveEvents().poll(control.hub)  # what the adapter gave the port
        return _models(app, events)


async def test_the_panes_show_the_same_run_live_and_replayed(tmp_path: Path) -> None:
    live = await _live(tmp_path / "run.jsonl")
    replayed = await _replayed(tmp_path / "run.jsonl")
    # By design: the answer's text stays out of the archive (its size and timings do not).
    assert live.keys() == replayed.keys()
    for name in live:
        assert replayed[name] == live[name], name
    assert live["prompt"]["ready"] and "tiny" in live["prompt"]["model"]
    assert "7003" in live["leases"] and live["bootstrap"]["stages"]
