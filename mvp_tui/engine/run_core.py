"""What every phase of a run shares: its settings, ids, sink, hub and bridge, the node's
environment, the frames that move the attempt's stage on, and the run's own checks and
offer search. `RunEngine` (engine/run.py) is this plus its phases, each in its own module,
each building on the ones below it: bring-up, serving, teardown, attempts, leasing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from mvp_tui.config import Config, ConfigError
from mvp_tui.config.loader import served_name
from mvp_tui.config.values import Source
from mvp_tui.datastream.archive import FrameArchive
from mvp_tui.datastream.bridge import NodeBridge
from mvp_tui.datastream.frame import Frame, StreamId, node_stream
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.engine.boot_guard import NodeBootGuard, boot_guard_event
from mvp_tui.engine.cluster import Cluster, ClusterSettings, WorkerWatch
from mvp_tui.engine.events import (
    OffersListed,
    RunStarted,
)
from mvp_tui.engine.failures import (
    AGENT_PHASE_STAGES,
    RunFailed,
    Stage,
)
from mvp_tui.engine.ledger import LeaseLedger, LedgerTap
from mvp_tui.engine.model_fit import ModelNeed
from mvp_tui.engine.node_watch import NodeWatch
from mvp_tui.engine.orch import OrchTap, config_detail, run_number
from mvp_tui.engine.provider_factory import build_provider
from mvp_tui.engine.settings import RunSettings, create_env, node_env
from mvp_tui.engine.stall import StallWatch
from mvp_tui.engine.verdict_wait import VerdictWait
from mvp_tui.engine.watchdog import (
    NodeWatchdog,
    WatchdogSettings,
    idle_stop_notice,
    verdict_event,
    watchdog_record,
)
from mvp_tui.events import EngineEvent, EventSink
from mvp_tui.lease.atomic import write_atomic
from mvp_tui.lease.endpoint_record import (
    EndpointRecord,
    new_api_key,
    new_rpc_token,
)
from mvp_tui.lease.naming import new_run_id
from mvp_tui.lease.records import LeaseRecord, RecordStore
from mvp_tui.lease.settings import WalkSettings
from mvp_tui.node_protocol import (
    NODE_AGENT_PHASE,
    is_agent_channel,
    parse_record,
    record_type,
)
from mvp_tui.prompt.queue import PromptQueue
from mvp_tui.prompt.rpc import PromptRpcServer
from mvp_tui.providers.base import Offer, Provider
from mvp_tui.secrets import Redactor
from mvp_tui.ssh.logtail import LogPositions
from mvp_tui.ssh.public_key import public_fingerprint

if TYPE_CHECKING:  # asyncssh loads only when a node is reached over SSH
    from mvp_tui.ssh.identity import SshIdentity
    from mvp_tui.ssh.session import NodeSession


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


class RunCore:
    """The run's shared state (read once from the configuration into typed settings, one
    per area) and the steps every phase uses."""

    def __init__(
        self,
        config: Config,
        sink: EventSink,
        *,
        hub: ChannelHub | None = None,
        clock: Callable[[], float] = time.time,
        environ: Mapping[str, str] | None = None,
        provider: Provider | None = None,
        settings_override: Callable[[WalkSettings], WalkSettings] | None = None,
        ledger: LeaseLedger | None = None,
    ) -> None:
        self.config = config
        # The one fold of lease money (shared by a session's engines): every event enters
        # it before anything else sees it, so the limits and the UI read the same figures.
        self.ledger = ledger if ledger is not None else LeaseLedger()
        self._clock = clock
        self._environ = dict(os.environ if environ is None else environ)
        self.redactor = Redactor([*config.secret_values(), self._environ.get("HF_TOKEN", "")])
        # The run's key for its OpenAI endpoint: made here, kept in the run's endpoint record
        # (mode 600), sent to the node in its env file; never printed (redacted everywhere).
        self.api_key = new_api_key()
        self.redactor.add(self.api_key)
        # The prompt RPC's token, kept beside the key: a local user without it gets a fault.
        self.rpc_token = new_rpc_token()
        self.redactor.add(self.rpc_token)
        self.endpoint: EndpointRecord | None = None
        # Built before anything holds a resource: a bad value stops here (exit 2).
        self.settings = RunSettings.from_config(config)
        self.run_id = self.settings.runtime.run_id or new_run_id()
        self.node_id = self.settings.runtime.node_id
        archive_path = self.settings.runtime.frame_log
        self.hub = hub or ChannelHub(
            stream=StreamId("mvp-orchestrator", run_number(self.run_id)),
            archive=FrameArchive(archive_path) if archive_path else None,
        )
        self.bridge = NodeBridge(
            self.hub,
            self.node_id,
            node_stream(run_number(self.run_id), self.node_id),
            redactor=self.redactor,
        )
        self._sink = OrchTap(
            LedgerTap(self.ledger, sink, config.provider),
            self.hub,
            run_id=self.run_id,
            node_id=self.node_id,
            redactor=self.redactor,
        )
        self._flusher: asyncio.Task[None] | None = None
        self.watch = NodeWatch(self.redactor, self.bridge.stream)  # the main node's verdict only
        self.hub.listeners.append(self.watch)
        self.hub.listeners.append(self._on_watchdog_frame)
        self.verdict_wait = VerdictWait()  # the switch's verdict within 3 min (seed 003)
        self.hub.listeners.append(self.verdict_wait)
        self.watchdog_verdict: NodeWatchdog | None = None
        self.boot_guard_verdict: NodeBootGuard | None = None
        self._watchdog_failed = asyncio.Event()
        self._idle_stopped = asyncio.Event()  # the node's idle stop fired: the run is done
        self.store = RecordStore(config.state_dir)
        self.provider = provider or build_provider(config, on_line=self._on_node_line)
        self.watchdog = WatchdogSettings.from_config(config, billing=self.provider.info.billing)
        self._port_taken = 0  # [prompt] openai_port, when something else held it
        self._local_port_asked = 0  # the port a local node was asked to serve on
        self.node_env = self._node_env()
        self._describe_run()
        self._settings_override = settings_override
        self._offers: dict[str, Offer] = {}  # the offers of the last walk, by id
        self.lease_record: LeaseRecord | None = None
        self.local_url: str | None = None
        self.prompts: PromptQueue | None = None
        self._rpc: PromptRpcServer | None = None
        self._session: NodeSession | None = None  # SSH nodes only
        self._worker_sessions: list[NodeSession] = []  # a multi-node run's rented workers
        self._ssh_public_key: str | None = None
        self._identity: SshIdentity | None = None  # loaded by prepare_ssh_identity
        self._ssh_debug_stop: Callable[[], None] | None = None  # [ssh] debug, while on
        self._resume: LogPositions | None = None  # re-attach: follow the agent's logs from here
        # Several nodes serving one model (llama.cpp RPC), and the token-progress watchdog.
        # Rented workers report on their own sessions' streams; local ones share one pipe.
        shared = () if self.provider.info.ssh else (self.bridge.stream,)
        self.workers = WorkerWatch(self.redactor, shared)
        self.hub.listeners.append(self.workers)
        self.cluster = Cluster(
            ClusterSettings.from_config(config),
            self.node_id,
            self.workers,
            phase=self._sink.emitter.emit_bootstrap,  # the seed's stage_provision/node_* steps
        )
        self.stall = StallWatch(self.settings.prompt.stall_secs)
        # Attempts: the leases of earlier (failed or lost) attempts, still counted in spend
        # and hours; the stage the current one reached, and when each stage began.
        self.past_leases: list[LeaseRecord] = []
        self.stage = Stage.CREATE
        self.stage_started: dict[Stage, float] = {}
        self._openai_port: int | None = None  # kept across nodes: clients keep their address
        self.hub.listeners.append(self._on_stage_frame)

    def _describe_run(self) -> None:
        """What the run's own records (the seed's phases and events) say about it."""
        image = self.config.node_image()[0]
        if self.config.provider == "docker":
            docker = self.config.settings.docker
            image = (docker.image if docker else None) or image
        self._sink.describe(
            provider=self.config.provider,
            image=image,
            ssh_node=self.provider.info.ssh,
            config=config_detail(
                self.config,
                image=image,
                rpc_bind=self.settings.prompt.rpc_addr,
                ssh_public_fingerprint=public_fingerprint(self.settings.ssh.identity_path)
                if self.provider.info.ssh
                else None,
            ),
            env_keys=tuple(sorted(self.node_env)),
            default_max_tokens=self.settings.prompt.max_tokens,
            on_runtime_ready=self._node_joined,
            warnings=(*self.config.warnings, *self.config.cautions),
        )

    def _node_joined(self) -> None:
        # The orchestrator seed's frame archive files what its node sends once it joined the
        # cluster as `node_cluster`
        # (before that, its bootstrap stdio): the same split here, at the agent's start.
        self.bridge.frame_source = NODE_CLUSTER_SOURCE

    def shutdown_requested(self, source: str) -> None:
        """Record who asked the run to end (the seed's `shutdown` phase; first caller wins)."""
        self._sink.shutdown(source)

    @property
    def waiting_for(self) -> str | None:
        """`node ready` / `weights loaded` while the run waits for one, else None."""
        return self._sink.waiting_for

    def say(self, line: str) -> None:
        """A line this process tells its user on stderr, also on the node's stderr channel."""
        self._sink.stderr(line)

    def _sink_line(self, text: str) -> None:
        """One of the engine's own lines on the node's provider channel."""
        self.bridge.feed_provider_line(self.redactor(text))

    def _on_node_line(self, kind: str, line: bytes) -> None:
        self.bridge.on_line(kind, line)

    def _node_env(self) -> dict[str, str]:
        # A local node gets the deadline too (it also dies with this process, and has no
        # silence limit: it does not bill).
        env = node_env(
            self.settings.runtime,
            self.settings.model,
            provider=self.config.provider,
            run_id=self.run_id,
            environ=self._environ,
        )
        env = {**env, **self.watchdog.node_env(), "MVP_API_KEY": self.api_key}
        return {**env, **self._local_engine_port()}

    def _local_engine_port(self) -> dict[str, str]:
        """A local node serves on [prompt] openai_port itself (no forward to carry it): one
        address for every run here too; taken, the agent picks a free one (and it is said)."""
        wanted = self.settings.prompt.openai_port
        if self.config.provider != "local" or not wanted:
            return {}
        if ClusterSettings.from_config(self.config).multi:  # workers and a main: their own
            return {}
        if not local_port_free(wanted):
            self._port_taken = wanted
            return {}
        self._local_port_asked = wanted  # free now; another run may take it before the node
        return {"MVP_ENGINE_PORT": str(wanted), "MVP_ENGINE_PORT_FALLBACK": "1"}

    def _on_watchdog_frame(self, frame: Frame) -> None:
        notice = idle_stop_notice(frame, self.run_id, self._clock())
        if notice is not None:
            self.emit(notice)
            return
        guard = boot_guard_event(frame, self.run_id, self._clock(), self.redactor)
        if guard is not None:  # held apart: the switch's later verdict must not replace it
            held = self.boot_guard_verdict  # a worker's "armed" never hides a failed one
            if held is None or held.status != "failed":
                self.boot_guard_verdict = guard
            if guard.status == "failed":
                self._watchdog_failed.set()
            self.emit(guard)
            return
        record = watchdog_record(frame)
        if record is None:
            return
        event = verdict_event(record, self.run_id, self._clock(), self.redactor)
        if event is None:
            return
        if event.status == "fired" and event.trigger == "idle_stop":
            self._idle_stopped.set()
        if event.status in ("ready", "failed"):
            self.watchdog_verdict = event
            if event.status == "failed":
                self._watchdog_failed.set()
        self.emit(event)

    def _on_stage_frame(self, frame: Frame) -> None:
        """The agent's phases move the attempt's stage on (model, engine, serving)."""
        if not is_agent_channel(frame.channel):
            return
        record = parse_record(frame.payload)
        if record_type(record) != NODE_AGENT_PHASE or record.get("status") != "started":
            return
        stage = AGENT_PHASE_STAGES.get(str(record.get("phase")))
        if stage is not None:
            self.reach(stage)

    def reach(self, stage: Stage) -> None:
        """The current attempt got to `stage` (never back)."""
        order = list(Stage)
        if order.index(stage) > order.index(self.stage):
            self.stage = stage
        self.stage_started.setdefault(stage, self._clock())

    def stage_secs(self, now: float | None = None) -> dict[str, float]:
        """Seconds the current attempt spent in each stage it reached."""
        end = self._clock() if now is None else now
        starts = sorted(self.stage_started.items(), key=lambda kv: list(Stage).index(kv[0]))
        out: dict[str, float] = {}
        for index, (stage, at) in enumerate(starts):
            until = starts[index + 1][1] if index + 1 < len(starts) else end
            out[stage.value] = round(max(0.0, until - at), 3)
        return out

    async def _flush_archive(self) -> None:
        # The archive buffers; a quiet run must still reach the disk about once a second.
        while True:
            await asyncio.sleep(1.0)
            self.hub.flush()

    def emit(self, event: EngineEvent) -> None:
        self._sink(event)

    def started(self) -> None:
        if self.hub.archive is not None and self._flusher is None:
            self._flusher = asyncio.get_running_loop().create_task(self._flush_archive())
        self.emit(
            RunStarted(
                at=self._clock(),
                run_id=self.run_id,
                provider=self.config.provider,
                profile=self.config.profile,
                state_dir=str(self.store.run_dir(self.run_id)),
            )
        )

    def check_model(self) -> None:
        """A local node reads the model from this machine: a wrong path fails here, before
        any process starts, naming the key and where its value came from."""
        if self.provider.info.ssh:
            return
        path = self.settings.model.gguf_local_path
        if path is None:
            return
        source = self.config.sources.get("model.gguf_local_path")
        if not path.is_file():
            raise ConfigError(
                f"[model] gguf_local_path = {str(path)!r} (from {source}) does not exist or is "
                "not a file; point it at a .gguf model file"
            )
        with path.open("rb") as handle:
            if handle.read(4) != b"GGUF":
                raise ConfigError(
                    f"[model] gguf_local_path = {str(path)!r} (from {source}) is not a GGUF "
                    "file; llama.cpp serves .gguf models only"
                )

    def check_state_dir(self) -> None:
        """Run records are written before every create: a state dir that cannot take them
        stops the run here, before anything is rented (exit 2)."""
        runs = self.store.runs_dir
        try:
            runs.mkdir(parents=True, exist_ok=True, mode=0o700)
            probe = runs / f".write-check-{os.getpid()}"  # per process: runs share the dir
            write_atomic(probe, b"ok\n")
            probe.unlink()
        except OSError as exc:
            source = self.config.sources.get("state.dir") or "default"
            raise ConfigError(
                f"[state] dir = {str(self.config.state_dir)!r} (from {source}) cannot take run "
                f"records ({exc.strerror or exc}: {exc.filename or runs}); every lease is "
                "recorded before it is created, so nothing was rented. Fix its permissions or "
                "free space, or point [state] dir / MVP_STATE_DIR / --state-dir elsewhere"
            ) from None

    def choose_model(self, repo: str, file: str) -> None:
        """Serve hub `repo`'s `file` from the next lease on (the model picker): the node's
        env and the board's need follow. The session allows it only while nothing is leased."""
        # A served name the user never set follows the model (what OpenAI clients ask for).
        named = self.config.sources.get("model.id", Source("default")).layer != "default"
        model = dataclasses.replace(
            self.settings.model, gguf_local_path=None, gguf_repo=repo, gguf_file=file,
            gguf_revision=None,
            model_id=self.settings.model.model_id if named else served_name(file),
        )
        self.settings = dataclasses.replace(self.settings, model=model)
        self.node_env = self._node_env()

    async def model_need(self) -> ModelNeed:
        """The model's VRAM need per node (the board's `fit`), from the local file or the
        hub this run's nodes download from; `ModelNeedError` says why it cannot be read."""
        from mvp_tui.engine.model_need import read_model_need  # httpx: only when asked

        nodes = self.config.settings.runtime.nodes
        return await read_model_need(self.settings.model, nodes=nodes, environ=self._environ)

    async def search_offers(self, limit: int = 64) -> list[Offer]:
        policy = dataclasses.replace(self.settings.policy, limit=limit)
        offers = await self.provider.search_offers(policy)
        skipped = len(self.provider.last_skipped)
        self.emit(
            OffersListed(
                at=self._clock(), provider=self.config.provider, count=len(offers), skipped=skipped
            )
        )
        return offers

    def walk_settings(self) -> WalkSettings:
        env = self.node_env if not self.provider.info.ssh else create_env(self.node_env)
        settings = dataclasses.replace(
            self.settings.walk, env=env, ssh_public_key=self._ssh_public_key
        )
        return self._settings_override(settings) if self._settings_override else settings

    def now(self) -> float:
        return self._clock()

    def log(self, line: str) -> None:
        """One of the engine's own lines on the node's provider channel (redacted)."""
        self._sink_line(line)

    async def aclose(self) -> None:
        if self._ssh_debug_stop is not None:
            self._ssh_debug_stop()
            self._ssh_debug_stop = None
        if self._flusher is not None:
            self._flusher.cancel()
            self._flusher = None
        self.hub.flush()
        if self.hub.archive is not None:
            self.hub.archive.close()
        await self.provider.aclose()

    def _require_lease(self) -> LeaseRecord:
        if self.lease_record is None:
            raise RunFailed("no lease is running: lease an offer first")
        return self.lease_record

    @property
    def state_path(self) -> Path:
        return self.store.record_path(self.run_id)
