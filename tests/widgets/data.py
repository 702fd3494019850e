"""Fixed data for the pane tests: offers, a recorded lease walk, a generated frame archive."""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Callable
from pathlib import Path

from textual.pilot import Pilot

from mvp_tui.datastream import (
    ChannelHub,
    FrameArchive,
    LogStream,
    OrchestratorEmitter,
    ReplaySource,
    StepStatus,
    node_log_channel,
)
from mvp_tui.datastream.frame import node_stream
from mvp_tui.datastream.records import encode_record, provision_log_record
from mvp_tui.events import EngineEvent
from mvp_tui.lease import events as ev
from mvp_tui.providers.base import Offer
from mvp_tui.providers.gpu_bandwidth import bandwidth_gbps
from mvp_tui.ssh.events import AgentStarted, AttemptOutcome, HostKeyPinned, SshAttempt

T0 = 1_764_504_180.0  # 2025-11-30 12:03:00 UTC: every event time is T0 + seconds
NOW = T0 + 95.0


def fixed_clock(at: float = NOW) -> Callable[[], float]:
    return lambda: at


def offer(
    offer_id: str,
    price: float,
    gpu: str = "RTX 4090",
    *,
    n: int = 1,
    vram_mib: int = 24576,
    reliability: float = 0.99,
    down: float = 900.0,
    where: str = "Texas, US",
) -> Offer:
    return Offer(
        provider="vastai",
        offer_id=offer_id,
        gpu_name=gpu,
        num_gpus=n,
        gpu_ram_mib=vram_mib,
        price_per_hour=price,
        reliability=reliability,
        down_mbps=down,
        up_mbps=down * 0.6,
        location=where,
        mem_bw_gbps=bandwidth_gbps(gpu),  # as RunPod's table gives it (Vast: gpu_mem_bw)
    )


GPUS = ("RTX 4090", "RTX 3090", "A100 SXM4", "H100 PCIE", "RTX A6000", "L40S")
PLACES = ("Texas, US", "Ohio, US", "Quebec, CA", "Bavaria, DE", "Tokyo, JP")


def many_offers(count: int, *, seed: int = 7) -> list[Offer]:
    """`count` varied offers, the same for a given seed."""
    rng = random.Random(seed)
    return [
        offer(
            str(100_000 + i),
            round(rng.uniform(0.1, 4.0), 3),
            rng.choice(GPUS),
            n=rng.choice((1, 1, 2, 4, 8)),
            vram_mib=rng.choice((24576, 49152, 81920)),
            reliability=round(rng.uniform(0.8, 1.0), 4),
            down=round(rng.uniform(50, 5000)),
            where=rng.choice(PLACES),
        )
        for i in range(count)
    ]


def small_offers() -> list[Offer]:
    return [
        offer("1001", 0.300, "RTX 4090", reliability=0.995, down=850, where="Texas, US"),
        offer("1002", 0.350, "RTX 4090", reliability=0.990, down=910, where="Ohio, US"),
        offer(
            "1003",
            0.410,
            "RTX A6000",
            vram_mib=49152,
            reliability=0.980,
            down=500,
            where="Quebec, CA",
        ),
        offer("1004", 0.220, "RTX 3090", reliability=0.950, down=300, where="Bavaria, DE"),
        offer(
            "1005",
            1.900,
            "A100 SXM4",
            vram_mib=81920,
            reliability=0.999,
            down=4000,
            where="Ohio, US",
        ),
        offer(
            "1006",
            2.400,
            "H100 PCIE",
            vram_mib=81920,
            reliability=0.970,
            down=2500,
            where="Tokyo, JP",
        ),
    ]


RUN = "r-7f3a"


def walk_events() -> list[EngineEvent]:
    """A walk: unavailable → next, ambiguous (500) → reconciled: adopted, not ready →
    deleted, then a created lease that runs. Times are T0 + s."""
    return [
        ev.OfferPicked(
            at=T0,
            run_id=RUN,
            offer_id="1001",
            gpu_name="RTX 4090",
            price_per_hour=0.30,
            position=1,
            of=4,
        ),
        ev.AttemptStarted(
            at=T0 + 2,
            run_id=RUN,
            label="mvp-r-7f3a-1",
            offer_id="1001",
            gpu_name="RTX 4090",
            price_per_hour=0.30,
            attempt=1,
        ),
        ev.AttemptAnswered(
            at=T0 + 2.4,
            run_id=RUN,
            label="mvp-r-7f3a-1",
            offer_id="1001",
            outcome="unavailable",
            http_status=404,
            detail="sold before create",
            provider_id=None,
        ),
        ev.AttemptStarted(
            at=T0 + 3,
            run_id=RUN,
            label="mvp-r-7f3a-2",
            offer_id="1002",
            gpu_name="RTX 4090",
            price_per_hour=0.35,
            attempt=2,
        ),
        ev.AttemptAnswered(
            at=T0 + 3.5,
            run_id=RUN,
            label="mvp-r-7f3a-2",
            offer_id="1002",
            outcome="ambiguous",
            http_status=500,
            detail="internal error",
            provider_id=None,
        ),
        ev.ReconcileStarted(at=T0 + 3.6, run_id=RUN, label="mvp-r-7f3a-2", waits_s=(1, 2)),
        ev.Reconciled(
            at=T0 + 5,
            run_id=RUN,
            label="mvp-r-7f3a-2",
            adopted_id="7002",
            destroyed=(),
            unconfirmed=(),
        ),
        ev.LeasePending(
            at=T0 + 6, run_id=RUN, provider_id="7002", raw_state="loading", waited_s=1.0
        ),
        ev.LeaseNotReady(at=T0 + 30, run_id=RUN, provider_id="7002", reason="exited: OCI error"),
        ev.LeaseDeleting(
            at=T0 + 30.1, run_id=RUN, provider_id="7002", reason=ev.DeleteReason.NOT_READY
        ),
        ev.LeaseDeleted(
            at=T0 + 31, run_id=RUN, provider_id="7002", uptime_s=26.0, spend_usd=0.0025
        ),
        ev.AttemptStarted(
            at=T0 + 32,
            run_id=RUN,
            label="mvp-r-7f3a-3",
            offer_id="1003",
            gpu_name="RTX A6000",
            price_per_hour=0.41,
            attempt=3,
        ),
        ev.AttemptAnswered(
            at=T0 + 32.5,
            run_id=RUN,
            label="mvp-r-7f3a-3",
            offer_id="1003",
            outcome="created",
            http_status=200,
            detail="",
            provider_id="7003",
        ),
        ev.LeasePending(
            at=T0 + 34, run_id=RUN, provider_id="7003", raw_state="loading", waited_s=1.5
        ),
        ev.LeaseRunning(
            at=T0 + 73.7,
            run_id=RUN,
            provider_id="7003",
            label="mvp-r-7f3a-3",
            host="1.2.3.4",
            port=22022,
            user="root",
            via="direct",
            after_s=41.2,
            price_per_hour=0.41,
        ),
    ]


def ssh_events() -> list[EngineEvent]:
    key = "7003"
    return [
        SshAttempt(
            at=T0 + 74,
            lease_key=key,
            attempt=1,
            target="1.2.3.4:22022",
            outcome=AttemptOutcome.NOT_LISTENING,
            detail="connection refused",
            next_try_s=1.0,
        ),
        SshAttempt(
            at=T0 + 75,
            lease_key=key,
            attempt=2,
            target="1.2.3.4:22022",
            outcome=AttemptOutcome.TIMED_OUT,
            next_try_s=2.0,
        ),
        HostKeyPinned(at=T0 + 77.5, lease_key=key, fingerprint="SHA256:Qx3Lk9vZ1aB7"),
        SshAttempt(
            at=T0 + 77.6,
            lease_key=key,
            attempt=3,
            target="1.2.3.4:22022",
            outcome=AttemptOutcome.CONNECTED,
        ),
        AgentStarted(at=T0 + 79, lease_key=key, pid=311, remote_dir="/root/.mvp"),
    ]


def agent_record(kind: str, at: float, **fields: object) -> dict[str, object]:
    return {"type": kind, "run_id": 7, "node_id": 1, **fields, "at": at}


def write_archive(path: Path, *, log_lines: int = 40) -> Path:
    """A run's frames as the seed's JSONL: orchestrator phases, node agent phases and a
    download, a weights record, and node log lines (one with markup and an escape)."""
    clock = iter(range(10_000))
    hub = ChannelHub(clock=lambda: float(next(clock)) / 1000)
    with FrameArchive(path, timing=False) as archive:
        hub.archive = archive
        orch = OrchestratorEmitter(hub, run_id=7, node_id=1)
        orch.emit_bootstrap("config", StepStatus.READY, {"provider": "vastai"})
        orch.emit_bootstrap("lease", StepStatus.STARTED, {})
        node = node_stream(7, 1)
        agent = "mvp.node.1.agent"
        frames: list[tuple[str, dict[str, object]]] = [
            (
                agent,
                agent_record("NodeAgentPhase", T0 + 80, phase="model", status="started", detail={}),
            ),
            (
                agent,
                agent_record(
                    "NodeAgentProgress",
                    T0 + 82,
                    phase="model",
                    state="downloading",
                    bytes_done=560_000_000,
                    bytes_total=790_000_000,
                    rate_bps=280_000_000,
                ),
            ),
        ]
        for channel, record in frames:
            hub.publish(channel, encode_record(record), stream=node, source="node_bootstrap_stdio")
        for i in range(log_lines):
            line = f"llama server: loading tensor {i}/{log_lines}"
            if i == 3:
                line = "[bold red]not markup[/] \x1b[31mred?\x1b[0m BADBYTES"
            record = provision_log_record(7, 1, LogStream.STDOUT, line)
            payload = encode_record(record).replace(b"BADBYTES", b"\xff\xfe")  # invalid UTF-8
            hub.publish(node_log_channel(1, LogStream.STDOUT), payload, stream=node)
        hub.publish(
            "mvp.worker.weights",
            encode_record(
                agent_record(
                    "WeightsLoaded",
                    T0 + 90,
                    model_id="tiny-llama-q4",
                    engine="llama.cpp",
                    port=18081,
                    load_ms=2300,
                )
            ),
            stream=node,
        )
    return path


async def replay_into(path: Path, hub: ChannelHub) -> int:
    """Publish the whole archive into `hub` at once (no pacing)."""
    return await ReplaySource(path, speed=math.inf).feed(hub)


async def wait_until(
    pilot: Pilot[object], condition: Callable[[], bool], limit_s: float = 20.0
) -> None:
    """Let the app run until `condition()` holds (no sleeps: one idle turn at a time). The
    limit is only a cap: a loaded 2-core machine took more than 5 s to draw a footer."""

    async def turn() -> None:
        while not condition():
            await pilot.pause()

    await asyncio.wait_for(turn(), limit_s)


async def settle(pilot: Pilot[object], limit_s: float = 20.0) -> None:
    """Let the app run until two idle turns in a row draw the same screen: a pane re-laid out
    on a resize, or a class set after a refresh (a scrollbar shown or hidden), has landed."""

    async def turn() -> None:
        last = None
        while True:
            await pilot.pause()
            shot = pilot.app.export_screenshot()
            if shot == last:
                return
            last = shot

    await asyncio.wait_for(turn(), limit_s)


# -- the node's dead-man's switch ---------------------------------------------------------
RUNNING_AT = T0 + 73.7  # 7003 runs (walk_events)
MAX_HOURS = 2.5
DEADLINE = RUNNING_AT + MAX_HOURS * 3600  # 14:34:13.7 UTC
NO_KEY_REASON = (
    "no CONTAINER_API_KEY in the node environment (read: agent env, /proc/1/environ): this "
    "image does not expose Vast's instance key; use a Vast image that does, or set [limits] "
    "require_node_watchdog = false to rent without the node switch"
)
AGENT_CHANNEL = "mvp.node.1.agent"


def watchdog_phase(
    status: str, at: float, elapsed_ms: int | None = None, **detail: object
) -> dict[str, object]:
    """The agent's `watchdog` phase record, as `mvp_tui/node/switch.py` writes it."""
    record = agent_record("NodeAgentPhase", at, phase="watchdog", status=status, detail=detail)
    if elapsed_ms is not None:
        record["elapsed_ms"] = elapsed_ms
    return record


def watchdog_ready(at: float = T0 + 80.4, **extra: object) -> dict[str, object]:
    detail: dict[str, object] = {
        "provider": "vastai",
        "instance_id": "7003",
        "deadline_at": DEADLINE,
        "idle_teardown_mins": 20.0,
        "idle_armed": True,
        "armed": True,
        "action": "destroy",
        "proof": "read",
        **extra,
    }
    return watchdog_phase("ready", at, 400, **detail)


def watchdog_failed(at: float = T0 + 81.9, reason: str = NO_KEY_REASON) -> dict[str, object]:
    return watchdog_phase(
        "failed",
        at,
        1900,
        provider="vastai",
        instance_id=None,
        deadline_at=DEADLINE,
        idle_teardown_mins=20.0,
        idle_armed=True,
        reason=reason,
        armed=False,
    )


def publish_node(hub: ChannelHub, *records: dict[str, object]) -> None:
    """What a node reports after its lease runs: the orchestrator's config phase, then these
    agent records (a `WeightsLoaded` on the weights channel)."""
    OrchestratorEmitter(hub, run_id=7, node_id=1).emit_bootstrap(
        "config", StepStatus.READY, {"provider": "vastai"}
    )
    node = node_stream(7, 1)
    for record in records:
        channel = AGENT_CHANNEL if record["type"] != "WeightsLoaded" else "mvp.worker.weights"
        hub.publish(channel, encode_record(record), stream=node, source="node_bootstrap_stdio")


def downloading(at: float = T0 + 82) -> list[dict[str, object]]:
    return [
        agent_record("NodeAgentPhase", at - 1.5, phase="model", status="started", detail={}),
        agent_record(
            "NodeAgentProgress",
            at,
            phase="model",
            state="downloading",
            bytes_done=560_000_000,
            bytes_total=790_000_000,
            rate_bps=280_000_000,
        ),
    ]
