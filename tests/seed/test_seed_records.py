"""The orchestrator's own records in the seed's shapes, unit by unit: prompt records carry
the RPC client's own request_id (else the queue's), `prompt_bytes`, `node_prompt_send`
started then ready, and a cancelled prompt ends with the added status `cancelled` (never an
error); provisioning events carry the provider. Contract: 002_…txt `OrchDatastream`."""

from __future__ import annotations

import json

from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.engine.events import RunStarted
from mvp_tui.engine.orch import OrchTap
from mvp_tui.events import EngineEvent
from mvp_tui.lease.events import AttemptStarted, LeaseRunning
from mvp_tui.prompt.events import PromptCancelled, PromptQueued, PromptSource, PromptStarted
from mvp_tui.secrets import Redactor
from mvp_tui.ssh.events import AgentExited

ATTEMPT = AttemptStarted(
    run_id="41", label="mvp-41-2-1", offer_id="local", gpu_name="CPU", price_per_hour=0.0, attempt=1
)
RUNNING = LeaseRunning(
    run_id="41",
    provider_id="local-9",
    label="mvp-41-2-1",
    host="",
    port=0,
    user="",
    via="none",
    after_s=0.0,
    price_per_hour=0.0,
)


def tap() -> tuple[OrchTap, ChannelHub, list[EngineEvent]]:
    hub = ChannelHub()
    seen: list[EngineEvent] = []
    orch = OrchTap(seen.append, hub, run_id="41", node_id=2, redactor=Redactor())
    orch.describe(
        provider="local",
        image="mvp-node:latest",
        ssh_node=False,
        config={"model_id": "m"},
        env_keys=("MVP_RUN_ID",),
        default_max_tokens=64,
    )
    return orch, hub, seen


def payloads(hub: ChannelHub, channel: str) -> list[dict]:
    return [json.loads(frame.payload) for frame in hub.tail(channel).frames]


def test_an_rpc_prompt_is_recorded_under_the_clients_request_id() -> None:
    orch, hub, seen = tap()
    orch(
        PromptQueued(
            prompt_id=1,
            text_chars=2,
            text_bytes=3,
            max_tokens=8,
            position=0,
            source=PromptSource.RPC,
            request_id=777,
        )
    )
    orch(PromptStarted(prompt_id=1))
    orch(PromptCancelled(prompt_id=1, was_active=True))
    records = payloads(hub, "mvp.orch.prompt")
    assert [r["request_id"] for r in records] == [777] * 4
    assert [(r["phase"], r["status"]) for r in records] == [
        ("prompt_work", "observed"),
        ("node_prompt_send", "started"),
        ("node_prompt_send", "ready"),
        ("prompt_complete", "cancelled"),
    ]
    assert records[0]["detail"]["prompt_bytes"] == 3 and records[0]["detail"]["max_tokens"] == 8
    assert all((r["run_id"], r["node_id"]) == (41, 2) for r in records)
    assert len(seen) == 3  # every event still reaches the sink


def test_a_pane_prompt_keeps_the_queues_id() -> None:
    orch, hub, _ = tap()
    orch(PromptQueued(prompt_id=5, text_chars=1, text_bytes=1, max_tokens=8, position=0))
    assert payloads(hub, "mvp.orch.prompt")[0]["request_id"] == 5


def test_provisioning_events_carry_the_provider_and_the_seeds_texts() -> None:
    orch, hub, _ = tap()
    orch(RunStarted(run_id="41", provider="local", profile="local", state_dir="/x"))
    orch(ATTEMPT)
    orch(RUNNING)
    orch(AgentExited(lease_key="local-9", exit_code=-9, before_ready=False))
    events = [p["event"] for p in payloads(hub, "mvp.provisioning.events")]
    assert [e["kind"] for e in events] == ["ProvisionStart", "NodeLive", "NodeStopped"]
    assert {e["provider"] for e in events} == {"local"}
    assert events[0]["message"] == "starting local image mvp-node:latest"
    assert events[2]["message"] == "node process exited with code -9"
    phases = [(p["phase"], p["status"]) for p in payloads(hub, "mvp.orch.bootstrap")]
    assert phases == [
        ("config", "ready"),
        ("node_provisioner", "ready"),
        ("node_spec", "ready"),
        ("provider_start", "started"),
        ("provider_start", "ready"),
        ("node_runtime_ready", "started"),
        ("node_runtime_ready", "ready"),
        ("weights_loaded", "started"),
    ]


def test_a_replayed_seed_archive_drives_the_bootstrap_checklist() -> None:
    # A replay has frames only: the one adapter (tui/replay_events.py) rebuilds the engine
    # facts from the seed's phase names and they drive the fixed rows, as events do live;
    # the phases no event tells make the extra rows, and the phases that restate a row or
    # the Prompt pane stay on the channel, off the checklist.
    from mvp_tui.engine.events import NodeReady, OffersListed, RunFinished
    from mvp_tui.engine.ui_port import BOOTSTRAP_EVENTS
    from mvp_tui.lease.events import DeleteReason, LeaseDeleted, LeaseDeleting
    from mvp_tui.prompt.events import PromptRpcListening
    from mvp_tui.ssh.events import HostKeyPinned
    from mvp_tui.tui.replay_events import ArchiveEvents
    from mvp_tui.widgets.bootstrap_model import BootstrapModel, StageId, Status

    orch, hub, _ = tap()
    for event in (
        RunStarted(run_id="41", provider="local", profile="local", state_dir="/x"),
        OffersListed(provider="local", count=1),
        ATTEMPT,
        RUNNING,
        HostKeyPinned(lease_key="local-9", fingerprint="SHA256:abc"),
        NodeReady(run_id="41", model_id="m", engine="llama.cpp", local_url="http://x"),
        PromptRpcListening(host="127.0.0.1", port=1),
        LeaseDeleting(run_id="41", provider_id="local-9", reason=DeleteReason.REQUESTED),
        LeaseDeleted(run_id="41", provider_id="local-9", uptime_s=1.0, spend_usd=0.0),
        RunFinished(run_id="41", exit_code=0),
    ):
        orch(event)
    model = BootstrapModel()
    _, events = ArchiveEvents().poll(hub)
    for event in events:
        if type(event) in BOOTSTRAP_EVENTS:  # what the port hands the Bootstrap pane
            model.apply(event)
    for frame in hub.tail("mvp.orch.bootstrap").frames:
        model.record(frame.channel, frame.payload, 0.0)
    # The engine row is a node fact (the agent's weights frame): not in the orch archive.
    for row in (StageId.LEASE, StageId.HOST_KEY):
        assert model.stages[row].status is Status.DONE, row
    assert list(model.extra) == ["config", "offers", "provider_stop", "orch_exit"]


def test_each_host_of_a_walk_gets_its_runtime_ready_and_only_the_run_a_provision_failed() -> (
    None
):
    from mvp_tui.engine.events import AttemptAbandoned, NodeFailed, RunStateChanged
    from mvp_tui.ssh.events import AgentStarted

    orch, hub, _ = tap()
    orch.describe(provider="vastai", image="img", ssh_node=True, config={"model_id": "m"},
                  env_keys=(), default_max_tokens=64)

    def host(n: int) -> None:
        orch(ATTEMPT)
        orch(RUNNING)
        assert orch.waiting_for == "node ready"
        orch(AgentStarted(lease_key=f"vastai:{n}", pid=100 + n, remote_dir="/r"))
        assert orch.waiting_for == "weights loaded"
        orch(NodeFailed(run_id="41", reason=f"host {n} failed", fix=""))

    def abandoned(scope: str) -> AttemptAbandoned:
        return AttemptAbandoned(run_id="41", provider_id="p", offer_id="o", stage="agent",
                                scope=scope, failure_kind="k", reason="r")

    orch(RunStarted(run_id="41", provider="vastai", profile="deploy", state_dir="/x"))
    host(1)
    orch(abandoned("host"))
    assert orch.waiting_for == "node ready", "a stop now waits for the next host, not weights"
    host(2)
    kinds = [p["event"]["kind"] for p in payloads(hub, "mvp.provisioning.events")]
    assert "ProvisionFailed" not in kinds, "the walk went on past host 1: not the run's failure"
    orch(abandoned("run"))
    orch(RunStateChanged(run_id="41", state="tearing down"))
    events = [p["event"] for p in payloads(hub, "mvp.provisioning.events")]
    assert [e["message"] for e in events if e["kind"] == "ProvisionFailed"] == ["host 2 failed"]
    ready = [p for p in payloads(hub, "mvp.orch.bootstrap")
             if (p["phase"], p["status"]) == ("node_runtime_ready", "ready")]
    assert [p["detail"]["agent_pid"] for p in ready] == [101, 102]


def test_the_tap_keeps_no_rpc_id_once_its_prompt_ended() -> None:
    """Issue 40 §4: a day of RPC prompts must not grow the tap's map by one id each."""
    orch, hub, _ = tap()
    for n in range(1, 201):
        orch(PromptQueued(prompt_id=n, text_chars=2, text_bytes=2, max_tokens=8, position=0,
                          source=PromptSource.RPC, request_id=1000 + n))
        orch(PromptStarted(prompt_id=n))
        orch(PromptCancelled(prompt_id=n, was_active=True))
    assert payloads(hub, "mvp.orch.prompt")[-1]["request_id"] == 1200  # still the client's
    assert orch._request_ids == {}
