"""A run's context made (`open_context`: settings, ids, keys, hub, bridge, sink, provider,
the node's environment) and said (`describe_run`), and what its nodes say about themselves
(`NodeVerdicts`): the pieces every collaborator of `RunEngine` (engine/run.py) is given.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from mvp_tui.config import Config
from mvp_tui.datastream.archive import FrameArchive
from mvp_tui.datastream.bridge import NodeBridge
from mvp_tui.datastream.frame import Frame, StreamId, node_stream
from mvp_tui.datastream.hub import ChannelHub, FrameListener
from mvp_tui.engine.boot_guard import boot_guard_event
from mvp_tui.engine.cluster import ClusterSettings, WorkerWatch
from mvp_tui.engine.context import RunContext
from mvp_tui.engine.events import NodeBootGuard, NodeWatchdog
from mvp_tui.engine.ledger import LeaseLedger, LedgerTap
from mvp_tui.engine.node_watch import NodeWatch
from mvp_tui.engine.orch import OrchTap, config_detail, run_number
from mvp_tui.engine.provider_factory import build_provider
from mvp_tui.engine.settings import RunSettings, node_env
from mvp_tui.engine.stall import StallWatch
from mvp_tui.engine.verdict_wait import VerdictWait
from mvp_tui.engine.watchdog import (
    WatchdogSettings,
    idle_stop_notice,
    verdict_event,
    watchdog_record,
)
from mvp_tui.engine.watchdog import no_verdict as silent
from mvp_tui.events import EventSink
from mvp_tui.lease.endpoint_record import (
    new_api_key,
    new_rpc_token,
)
from mvp_tui.lease.naming import new_run_id
from mvp_tui.lease.records import RecordStore
from mvp_tui.lease.settings import WalkSettings
from mvp_tui.node_protocol import AgentEnv
from mvp_tui.providers.base import Provider
from mvp_tui.secrets import Redactor
from mvp_tui.ssh.public_key import public_fingerprint

if TYPE_CHECKING:  # asyncssh loads only when a node is reached over SSH
    pass


NODE_CLUSTER_SOURCE = "node_cluster"


async def unless(work: Awaitable[None], guard: Awaitable[None]) -> None:
    """`work` to its end, unless `guard` (which returns only by raising) raises first."""
    main, watch = asyncio.ensure_future(work), asyncio.ensure_future(guard)
    try:
        await asyncio.wait({main, watch}, return_when=asyncio.FIRST_COMPLETED)
        if watch.done():
            watch.result()  # raises the guard's failure
        main.result()
    finally:
        for task in (main, watch):
            task.cancel()
        await asyncio.gather(main, watch, return_exceptions=True)


def local_port_free(port: int) -> bool:
    """Whether 127.0.0.1:port can be bound now (a moment later it may not: the forward
    then fails with the port named)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the forward binds
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def open_context(
    config: Config,
    sink: EventSink,
    *,
    hub: ChannelHub | None = None,
    clock: Callable[[], float] = time.time,
    environ: Mapping[str, str] | None = None,
    provider: Provider | None = None,
    settings_override: Callable[[WalkSettings], WalkSettings] | None = None,
    ledger: LeaseLedger | None = None,
) -> RunContext:
    """The run's shared facts, read once from the configuration into typed settings, one
    per area (a bad value stops here, before anything holds a resource: exit 2)."""
    # The one fold of lease money (shared by a session's engines): every event enters
    # it before anything else sees it, so the limits and the UI read the same figures.
    ledger = ledger if ledger is not None else LeaseLedger()
    environ = dict(os.environ if environ is None else environ)
    redactor = Redactor([*config.secret_values(), environ.get("HF_TOKEN", "")])
    # The run's key for its OpenAI endpoint: made here, kept in the run's endpoint record
    # (mode 600), sent to the node in its launcher run.sh; never printed (redacted everywhere).
    api_key = new_api_key()
    redactor.add(api_key)
    # The prompt RPC's token, kept beside the key: a local user without it gets a fault.
    rpc_token = new_rpc_token()
    redactor.add(rpc_token)
    # Built before anything holds a resource: a bad value stops here (exit 2).
    settings = RunSettings.from_config(config)
    run_id = settings.runtime.run_id or new_run_id()
    node_id = settings.runtime.node_id
    archive_path = settings.runtime.frame_log
    hub = hub or ChannelHub(
        stream=StreamId("mvp-orchestrator", run_number(run_id)),
        archive=FrameArchive(archive_path) if archive_path else None,
    )
    bridge = NodeBridge(
        hub,
        node_id,
        node_stream(run_number(run_id), node_id),
        redactor=redactor,
    )
    tap = OrchTap(
        LedgerTap(ledger, sink, config.provider),
        hub,
        run_id=run_id,
        node_id=node_id,
        redactor=redactor,
    )
    store = RecordStore(config.state_dir)
    provider = provider or build_provider(config, on_line=bridge.on_line)
    watchdog = WatchdogSettings.from_config(config, billing=provider.info.billing)
    ctx = RunContext(
        config=config, settings=settings, run_id=run_id, node_id=node_id, hub=hub,
        bridge=bridge, redactor=redactor, store=store, clock=clock, environ=environ,
        provider=provider, ledger=ledger, sink=tap, watchdog=watchdog, api_key=api_key,
        rpc_token=rpc_token, settings_override=settings_override,
    )
    ctx.use_node_env(node_env_for(ctx))
    return ctx


def describe_run(ctx: RunContext) -> None:
    """What the run's own records (the seed's phases and events) say about it."""
    image = ctx.config.node_image()[0]
    own_key = ctx.config.kind.own_image_key  # a container's own image ([docker] image)
    own = ctx.config.values.get(own_key) if own_key else None
    image = own if isinstance(own, str) and own else image

    def node_joined() -> None:
        # The orchestrator seed's frame archive files what its node sends once it joined
        # the cluster as `node_cluster`
        # (before that, its bootstrap stdio): the same split here, at the agent's start.
        ctx.bridge.frame_source = NODE_CLUSTER_SOURCE

    ctx.sink.describe(
        provider=ctx.config.provider,
        image=image,
        ssh_node=ctx.provider.info.ssh,
        config=config_detail(
            ctx.config,
            image=image,
            rpc_bind=ctx.settings.prompt.rpc_addr,
            ssh_public_fingerprint=public_fingerprint(ctx.settings.ssh.identity_path)
            if ctx.provider.info.ssh
            else None,
        ),
        env_keys=tuple(sorted(ctx.node_env)),
        default_max_tokens=ctx.settings.prompt.max_tokens,
        on_runtime_ready=node_joined,
        warnings=(*ctx.config.warnings, *ctx.config.cautions),
    )


def node_env_for(ctx: RunContext) -> dict[str, str]:
    # A local node gets the deadline too (it also dies with this process, and has no
    # silence limit: it does not bill).
    env = node_env(
        ctx.settings.runtime,
        ctx.settings.model,
        provider=ctx.config.provider,
        run_id=ctx.run_id,
        environ=ctx.environ,
        vram_need_mib=ctx.vram_need_mib,
        kv_slot_mib=ctx.kv_slot_mib,
    )
    env = {**env, **ctx.watchdog.node_env(), **AgentEnv(api_key=ctx.api_key).to_env(("api_key",))}
    return {**env, **_local_engine_port(ctx)}


def _local_engine_port(ctx: RunContext) -> dict[str, str]:
    """A local node serves on [prompt] openai_port itself (no forward to carry it): one
    address for every run here too; taken, the agent picks a free one (and it is said)."""
    wanted = ctx.settings.prompt.openai_port
    if not ctx.config.kind.child_process or not wanted:
        return {}
    if ClusterSettings.from_config(ctx.config).multi:  # workers and a main: their own
        return {}
    if not local_port_free(wanted):
        ctx.note_port_taken(wanted)
        return {}
    ctx.note_port_asked(wanted)  # free now; another run may take it before the node
    return AgentEnv(engine_port=wanted, engine_port_fallback=True).to_env()


class NodeVerdicts:
    """What the nodes of the current attempt said about themselves: the main node's engine
    verdict (`watch`), its switch's and boot guard's verdicts, the idle stop, the workers'
    readiness and the token-progress watchdog. Hub listeners, reset per attempt."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.watch = NodeWatch(ctx.redactor, ctx.bridge.stream)  # the main node's verdict only
        self.verdict_wait = VerdictWait()  # the switch's verdict within 3 min (seed 003)
        self.watchdog_verdict: NodeWatchdog | None = None
        self.boot_guard_verdict: NodeBootGuard | None = None
        self.watchdog_failed = asyncio.Event()
        self.idle_stopped = asyncio.Event()  # the node's idle stop fired: the run is done
        # Several nodes serving one model (llama.cpp RPC), and the token-progress watchdog.
        # Rented workers report on their own sessions' streams; local ones share one pipe.
        shared = () if ctx.provider.info.ssh else (ctx.bridge.stream,)
        self.workers = WorkerWatch(ctx.redactor, shared)
        self.stall = StallWatch(ctx.settings.prompt.stall_secs)
        self._listeners: tuple[FrameListener, ...] = (
            self.watch, self._on_watchdog_frame, self.verdict_wait, self.workers
        )
        ctx.hub.listeners.extend(self._listeners)

    def detach(self) -> None:
        """Off the hub (a session's hub outlives a retired engine)."""
        for listener in self._listeners:
            with contextlib.suppress(ValueError):
                self.ctx.hub.listeners.remove(listener)

    def reset(self) -> None:
        """Forget the last attempt's node's verdicts."""
        self.watch.reset()
        self.watchdog_verdict = None
        self.boot_guard_verdict = None
        self.watchdog_failed.clear()
        self.verdict_wait.reset()
        self.stall.engine_lost = None

    def no_verdict(self, reason: str) -> NodeWatchdog:
        """The switch said nothing in time: that is its verdict."""
        self.watchdog_verdict = silent(self.ctx.run_id, self.ctx.clock(), reason)
        return self.watchdog_verdict

    def _on_watchdog_frame(self, frame: Frame) -> None:
        ctx = self.ctx
        notice = idle_stop_notice(frame, ctx.run_id, ctx.clock())
        if notice is not None:
            ctx.emit(notice)
            return
        guard = boot_guard_event(frame, ctx.run_id, ctx.clock(), ctx.redactor)
        if guard is not None:  # held apart: the switch's later verdict must not replace it
            held = self.boot_guard_verdict  # a worker's "armed" never hides a failed one
            if held is None or held.status != "failed":
                self.boot_guard_verdict = guard
            if guard.status == "failed":
                self.watchdog_failed.set()
            ctx.emit(guard)
            return
        record = watchdog_record(frame)
        if record is None:
            return
        event = verdict_event(record, ctx.run_id, ctx.clock(), ctx.redactor)
        if event is None:
            return
        if event.status == "fired" and event.trigger == "idle_stop":
            self.idle_stopped.set()
        if event.status in ("ready", "failed"):
            self.watchdog_verdict = event
            if event.status == "failed":
                self.watchdog_failed.set()
        ctx.emit(event)
