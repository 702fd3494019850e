"""In a multi-node run each rented node speaks through its own session, bridge and stream:
a worker cannot declare the main node ready (with a port of its choosing) or failed, report
for another worker, or write another node's channels."""

from __future__ import annotations

from mvp_tui.datastream.bridge import NodeBridge
from mvp_tui.datastream.frame import node_stream
from mvp_tui.datastream.frame_line import encode_frame_line
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.engine.cluster import WorkerWatch
from mvp_tui.engine.node_watch import NodeWatch
from mvp_tui.node_protocol import (
    RPC_SERVER_READY,
    WEIGHTS_CHANNEL,
    WEIGHTS_LOADED,
    WORKER_FATAL,
    agent_channel,
)

RUN = 7
MAIN, WORKER, OTHER = 1, 2, 3


def _bridges(hub: ChannelHub) -> tuple[NodeBridge, NodeBridge]:
    main = NodeBridge(hub, MAIN, node_stream(RUN, MAIN))
    worker = NodeBridge(hub, WORKER, node_stream(RUN, WORKER), own_channels_only=True)
    return main, worker


def _line(channel: str, payload: dict[str, object]) -> bytes:
    return encode_frame_line(channel, payload).encode()


def test_a_workers_weights_loaded_or_fatal_is_not_the_main_nodes_verdict() -> None:
    hub = ChannelHub()
    main, worker = _bridges(hub)
    watch = NodeWatch(stream=main.stream)
    hub.listeners.append(watch)
    fake = {"type": WEIGHTS_LOADED, "node_id": MAIN, "base_url": "http://127.0.0.1:22",
            "port": 22, "model_id": "m", "engine": "llama-server"}
    worker.feed_line("stdout", _line(WEIGHTS_CHANNEL, fake))
    assert not watch.ready.is_set() and watch.loaded is None
    real = {**fake, "base_url": "http://127.0.0.1:8080", "port": 8080}
    main.feed_line("stdout", _line(WEIGHTS_CHANNEL, real))
    assert watch.ready.is_set() and watch.loaded is not None and watch.loaded.port == 8080


def test_a_workers_failure_fails_the_run_as_its_own_not_the_main_nodes() -> None:
    hub = ChannelHub()
    main, worker = _bridges(hub)
    watch = NodeWatch(stream=main.stream)
    hub.listeners.append(watch)
    fatal = {"type": WORKER_FATAL, "node_id": MAIN, "reason": "main node: out of memory"}
    worker.feed_line("stdout", _line(WEIGHTS_CHANNEL, fatal))
    assert watch.failed.is_set() and watch.fatal is not None
    assert watch.fatal.reason == f"worker node {WORKER}: main node: out of memory"
    main.feed_line("stdout", _line(WEIGHTS_CHANNEL, {**fatal, "reason": "cuda error"}))
    assert watch.fatal.reason == "cuda error"  # the main's own, as it said it


def test_a_node_reports_only_for_itself() -> None:
    hub = ChannelHub()
    main, worker = _bridges(hub)
    workers = WorkerWatch(str)
    hub.listeners.append(workers)
    ready = {"type": RPC_SERVER_READY, "endpoint": "127.0.0.1:50052", "port": 50052}
    worker.feed_line("stdout", _line(WEIGHTS_CHANNEL, {**ready, "node_id": OTHER}))
    main.feed_line("stdout", _line(WEIGHTS_CHANNEL, {**ready, "node_id": WORKER}))
    worker.feed_line("stdout", _line(WEIGHTS_CHANNEL, {"type": WORKER_FATAL, "node_id": OTHER}))
    assert workers.ready == {} and workers.fatal == {}
    worker.feed_line("stdout", _line(WEIGHTS_CHANNEL, {**ready, "node_id": WORKER}))
    assert list(workers.ready) == [WORKER]


def test_agents_sharing_one_pipe_report_by_the_node_they_name() -> None:
    hub = ChannelHub()
    shared = NodeBridge(hub, MAIN, node_stream(RUN, MAIN))  # a local run: one pipe for all
    workers = WorkerWatch(str, shared=(shared.stream,))
    hub.listeners.append(workers)
    ready = {"type": RPC_SERVER_READY, "endpoint": "127.0.0.1:50052", "port": 50052}
    shared.feed_line("stdout", _line(WEIGHTS_CHANNEL, {**ready, "node_id": WORKER}))
    assert list(workers.ready) == [WORKER]


def test_a_worker_cannot_write_another_nodes_channels() -> None:
    hub = ChannelHub()
    _, worker = _bridges(hub)
    phase = {"type": "NodeAgentPhase", "phase": "watchdog", "status": "failed"}
    frame = worker.feed_line("stdout", _line(agent_channel(MAIN), phase))
    assert frame.channel != agent_channel(MAIN) and worker.rejected == 1
    assert "belongs to another node" in (worker.last_rejection or "")
    own = worker.feed_line("stdout", _line(agent_channel(WORKER), phase))
    assert own.channel == agent_channel(WORKER) and own.stream == node_stream(RUN, WORKER)


async def test_a_workers_failure_keeps_its_fix_for_the_runs_error() -> None:
    # `--nodes 2` on local without the RPC binaries: the user reads how to build them.
    import pytest

    from mvp_tui.engine.cluster import ClusterFailed
    from mvp_tui.node.roles import RPC_BIN_FIX

    hub = ChannelHub()
    shared = NodeBridge(hub, MAIN, node_stream(RUN, MAIN))
    workers = WorkerWatch(str, shared=(shared.stream,))
    hub.listeners.append(workers)
    fatal = {"type": WORKER_FATAL, "node_id": WORKER, "reason": "ggml-rpc-server is not in PATH",
             "fix": RPC_BIN_FIX}
    shared.feed_line("stdout", _line(WEIGHTS_CHANNEL, fatal))
    with pytest.raises(ClusterFailed) as failed:
        await workers.until_ready(WORKER)
    assert "scripts/llama-rpc-build.sh" in failed.value.fix
    assert "scripts/llama-rpc-build.sh" in str(failed.value)
