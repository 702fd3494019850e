"""One run, top to bottom: offers → lease walk → node up → prompts → confirmed teardown.

`RunEngine` owns every resource a run holds (provider client, SSH session, prompt queue,
RPC server, datastream archive) and releases them in `aclose`. It reports through its
event sink and the channel hub only; the dashboard and headless mode both drive it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mvp_tui.config import Config, ConfigError
from mvp_tui.datastream.archive import FrameArchive
from mvp_tui.datastream.bridge import FRAME_SOURCE, NodeBridge
from mvp_tui.datastream.frame import Frame, StreamId, node_stream
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.engine.boot_guard import NodeBootGuard, boot_guard_event
from mvp_tui.engine.cluster import Cluster, ClusterSettings, WorkerWatch
from mvp_tui.engine.events import (
    AttemptAbandoned,
    EndpointReady,
    NodeFailed,
    NodeReady,
    OffersListed,
    ReadySummary,
    RunStarted,
    StageBudget,
    WalkOrderSaid,
)
from mvp_tui.engine.failures import (
    AGENT_PHASE_STAGES,
    AttemptFailed,
    AttemptFailure,
    FailureScope,
    NodeStoppedItself,
    RunFailed,
    Stage,
    boot_budget_s,
    ssh_failure,
)
from mvp_tui.engine.limits import LimitReached, watch_limits
from mvp_tui.engine.model_fit import ModelNeed
from mvp_tui.engine.node_watch import NodeWatch
from mvp_tui.engine.orch import OrchTap, config_detail, run_number
from mvp_tui.engine.provider_factory import build_provider
from mvp_tui.engine.ready_summary import stage_parts, summary_text
from mvp_tui.engine.settings import RunSettings, create_env, node_env, volume_settings
from mvp_tui.engine.stall import StallDetected, StallWatch
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
    load_endpoint,
    new_api_key,
    save_endpoint,
)
from mvp_tui.lease.events import DeleteReason, LeaseRunning, VolumeMounted
from mvp_tui.lease.host_journal import HostJournal, HostOutcome, host_key
from mvp_tui.lease.naming import new_run_id
from mvp_tui.lease.record_pins import RecordPins
from mvp_tui.lease.records import LeaseRecord, RecordStore
from mvp_tui.lease.restart import DownReport, LeaseRef, OpenLease, down, reconcile_open_runs
from mvp_tui.lease.settings import WalkSettings
from mvp_tui.lease.spend import lease_spend_usd
from mvp_tui.lease.teardown import teardown_lease
from mvp_tui.lease.volumes import VolumeRecord, record_volume
from mvp_tui.lease.walk import LeaseWalk, WalkResult
from mvp_tui.node_protocol import (
    NODE_AGENT_PHASE,
    WEIGHTS_CHANNEL,
    is_agent_channel,
    parse_record,
    record_type,
)
from mvp_tui.prompt.queue import PromptQueue
from mvp_tui.prompt.rpc import PromptRpcServer, parse_rpc_addr
from mvp_tui.providers.base import LeaseState, Offer, Provider, ProviderError
from mvp_tui.providers.prefetch import wants_prefetch
from mvp_tui.secrets import Redactor
from mvp_tui.ssh.errors import PINNED_KEY_FIX, SshError
from mvp_tui.ssh.events import AgentExited, AttemptOutcome
from mvp_tui.ssh.logtail import LogPositions
from mvp_tui.ssh.settings import SshSettings
from mvp_tui.untrusted import one_line_ascii

if TYPE_CHECKING:  # asyncssh loads only when a node is reached over SSH
    from mvp_tui.ssh.session import NodeSession


NODE_CLUSTER_SOURCE = "node_cluster"
_NOT_YET = AttemptOutcome.HOST_KEY_NOT_YET


class RunEngine:
    """Drives one run. Call `search_offers`, `lease`, `bring_up`, `start_prompts`, and
    always `shutdown` (tears down what was leased, confirmed) then `aclose`.

    The configuration is read once, here, into typed settings (one per area); the run reads
    only those."""

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
    ) -> None:
        self.config = config
        self._clock = clock
        self._environ = dict(os.environ if environ is None else environ)
        self.redactor = Redactor([*config.secret_values(), self._environ.get("HF_TOKEN", "")])
        # The run's key for its OpenAI endpoint: made here, kept in the run's endpoint record
        # (mode 600), sent to the node in its env file; never printed (redacted everywhere).
        self.api_key = new_api_key()
        self.redactor.add(self.api_key)
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
            sink, self.hub, run_id=self.run_id, node_id=self.node_id, redactor=self.redactor
        )
        self._flusher: asyncio.Task[None] | None = None
        self.watch = NodeWatch(self.redactor, self.bridge.stream)  # the main node's verdict only
        self.hub.listeners.append(self.watch)
        self.hub.listeners.append(self._on_watchdog_frame)
        self.watchdog_verdict: NodeWatchdog | None = None
        self.boot_guard_verdict: NodeBootGuard | None = None
        self._watchdog_failed = asyncio.Event()
        self._idle_stopped = asyncio.Event()  # the node's idle stop fired: the run is done
        self.store = RecordStore(config.state_dir)
        self.provider = provider or build_provider(config, on_line=self._on_node_line)
        self.watchdog = WatchdogSettings.from_config(config, billing=self.provider.info.billing)
        self._port_taken = 0  # [prompt] openai_port, when something else held it
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
        self.stall = StallWatch(config.get_float("prompt.stall_secs"))
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
            image = self.config.get_str("docker.image") or image
        self._sink.describe(
            provider=self.config.provider,
            image=image,
            ssh_node=self.provider.info.ssh,
            config=config_detail(self.config, image=image, rpc_bind=self.settings.prompt.rpc_addr),
            env_keys=tuple(sorted(self.node_env)),
            default_max_tokens=self.settings.prompt.max_tokens,
            on_runtime_ready=self._node_joined,
        )

    def _node_joined(self) -> None:
        # The orchestrator seed's frame archive files what its node sends once it joined the
        # cluster as `node_cluster`
        # (before that, its bootstrap stdio): the same split here, at the agent's start.
        self.bridge.frame_source = NODE_CLUSTER_SOURCE

    def shutdown_requested(self, source: str) -> None:
        """Record who asked the run to end (the seed's `shutdown` phase; first caller wins)."""
        self._sink.shutdown(source)

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
        return {"MVP_ENGINE_PORT": str(wanted)}

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

    # -- events --------------------------------------------------------------------------------
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

    # -- offers --------------------------------------------------------------------------------
    async def model_need(self) -> ModelNeed:
        """The model's VRAM need per node (the board's `fit`), from the local file or the
        hub this run's nodes download from; `ModelNeedError` says why it cannot be read."""
        from mvp_tui.engine.model_need import read_model_need  # httpx: only when asked

        nodes = self.config.get_int("runtime.nodes") or 1
        return await read_model_need(self.settings.model, nodes=nodes, environ=self._environ)

    async def search_offers(self, limit: int = 64) -> list[Offer]:
        policy = dataclasses.replace(self.settings.policy, limit=limit)
        offers = await self.provider.search_offers(policy)
        skipped = len(getattr(self.provider, "last_skipped", []) or [])
        self.emit(
            OffersListed(
                at=self._clock(), provider=self.config.provider, count=len(offers), skipped=skipped
            )
        )
        return offers

    # -- lease ---------------------------------------------------------------------------------
    def walk_settings(self) -> WalkSettings:
        env = self.node_env if not self.provider.info.ssh else create_env(self.node_env)
        settings = dataclasses.replace(
            self.settings.walk, env=env, ssh_public_key=self._ssh_public_key
        )
        return self._settings_override(settings) if self._settings_override else settings

    async def prepare_ssh_identity(self) -> None:
        """Load the SSH key and register its public half with the provider (before create)."""
        if not self.provider.info.ssh:
            return
        from mvp_tui.ssh.identity import load_identity

        identity = await load_identity(self.settings.ssh.identity_path)
        self._identity = identity
        self._ssh_public_key = identity.public_openssh
        ensure = getattr(self.provider, "ensure_ssh_key", None)
        if ensure is not None:
            await ensure(identity.public_openssh)
        await self._prepare_volume()

    async def _prepare_volume(self) -> None:
        """A provider's network volume for the model cache ([runpod] network_volume), found
        or created before the first create, recorded for `ls` (it bills by the month) and
        said as an event."""
        prepare = getattr(self.provider, "prepare_volume", None)
        volume = await prepare() if prepare is not None else None
        settings = volume_settings(self.config)
        if volume is None or settings is None:
            return
        record = VolumeRecord(
            provider=self.config.provider, volume_id=volume.id, name=volume.name,
            size_gb=volume.size_gb, data_center=volume.data_center,
            usd_per_gb_month=settings.usd_per_gb_month, last_run=self.run_id,
        )  # fmt: skip
        record_volume(self.config.state_dir, record)
        self.emit(
            VolumeMounted(
                at=self._clock(), run_id=self.run_id, provider=self.config.provider,
                volume_id=volume.id, name=volume.name, size_gb=volume.size_gb,
                data_center=volume.data_center, usd_per_month=round(record.usd_per_month, 4),
            )
        )  # fmt: skip

    async def lease(self, offers: Sequence[Offer]) -> WalkResult:
        self._offers = {o.offer_id: o for o in offers}
        if self.cluster.settings.multi:
            ssh = self.provider.info.ssh
            result = await self.cluster.lease(
                offers, self.walk_settings(), self._walk, self._start_worker if ssh else None
            )
        else:
            result = await self._walk(offers, self.walk_settings())
        self.lease_record = result.lease
        return result

    async def _walk(self, offers: Sequence[Offer], settings: WalkSettings) -> WalkResult:
        walk = LeaseWalk(
            self.provider,
            self.store,
            self._sink,
            settings,
            self._clock,
            run_id=self.run_id,
            config=self._redacted_config(),
            redact=self.redactor,
        )
        return await walk.run(offers)

    def _redacted_config(self) -> dict[str, object]:
        secret = {k for k in self.config.values if k.endswith("api_key")}
        return {
            key: ("<redacted>" if key in secret and value else _plain(value))
            for key, value in self.config.values.items()
        }

    # -- after a restart ------------------------------------------------------------------------
    async def earlier_leases(self) -> list[OpenLease]:
        """Leases of earlier runs of this provider that may still exist (the provider is
        asked; those it confirms gone are closed in their records)."""
        found = await reconcile_open_runs(
            self.provider, self.store, self._clock, self.walk_settings(), self._sink
        )
        return [o for o in found if o.exists is not False and o.run_id != self.run_id]

    async def down_earlier(self, run_ids: Sequence[str]) -> DownReport:
        """Tear down, confirmed, every lease of these earlier runs."""
        reports = [
            await down(self.provider, self.store, run_id, self._sink, self.walk_settings(),
                       self._clock)
            for run_id in dict.fromkeys(run_ids)
        ]  # fmt: skip
        return DownReport(
            tuple(ref for r in reports for ref in r.confirmed),
            tuple(ref for r in reports for ref in r.unconfirmed),
            tuple(x for r in reports for x in r.skipped_runs),
            tuple(x for r in reports for x in r.errors),
            tuple(x for r in reports for x in r.secrets_left),
        )

    def adopt(self, earlier: OpenLease) -> None:
        """Continue an earlier run's running lease: this engine takes over its run id and
        record, so bring-up re-attaches to the agent already on the node (host key pinned
        in that record) instead of renting anew."""
        if self.lease_record is not None:
            raise RunFailed("this run already holds a lease; tear it down before re-attaching")
        nodes = {x.node_id for x in self.store.load(earlier.run_id).open_leases()}
        if len(nodes) > 1:  # its workers' sessions would not be re-made
            raise RunFailed(
                f"run {earlier.run_id} holds leases of {len(nodes)} nodes: a multi-node run "
                f"cannot be re-attached; end it with `mvp-tui down {earlier.run_id}`"
            )
        self.run_id = earlier.run_id
        # The agent on the node checks the key it was started with: the earlier run's.
        self.endpoint = load_endpoint(self.store, earlier.run_id)
        if self.endpoint is not None:
            self.api_key = self.endpoint.api_key
            self.redactor.add(self.api_key)
        self.node_env = self._node_env()
        self.lease_record = earlier.lease
        lease, ssh = earlier.lease, earlier.lease.ssh
        # Resume the agent's logs where the earlier run stopped reading them; the engine
        # verdict it had seen is replayed, as the lines before that point are not re-read.
        self._resume = LogPositions(*(lease.log_positions or (0, 0)))
        if lease.log_positions is not None and lease.ready_record is not None:
            self.hub.publish(
                WEIGHTS_CHANNEL, lease.ready_record.encode(), stream=self.bridge.stream
            )
        # Announced like a fresh lease, dated from when it first ran, so spend and the
        # quit guard count it from the start.
        self.emit(
            LeaseRunning(
                at=lease.running_at or self._clock(),
                run_id=self.run_id,
                provider_id=lease.provider_id or "",
                label=lease.label,
                host=ssh.host if ssh else "",
                port=ssh.port if ssh else 0,
                user=ssh.user if ssh else "",
                via=ssh.via if ssh else "none",
                after_s=0.0,
                price_per_hour=lease.price_per_hour,
            )
        )

    # -- the node ------------------------------------------------------------------------------
    async def bring_up(self, timeout_s: float | None = None) -> NodeReady:
        """Start the node agent (over SSH for rented nodes) and wait for its engine, while
        the provider is watched: an instance that exits ends the attempt within a poll or
        two. Every failure is an `AttemptFailed` saying where and whether another host
        could do better."""
        lease = self._require_lease()
        timeout = timeout_s if timeout_s is not None else self.settings.ssh.ready_timeout
        self.reach(Stage.SSH if self.provider.info.ssh else Stage.AGENT)
        # The whole bring-up's cap, shown on the last row (the SSH row gets its own budget).
        self.emit(StageBudget(at=self._clock(), run_id=self.run_id, stage=Stage.ENGINE.value,
                              budget_s=round(timeout, 1)))  # fmt: skip
        try:
            async with asyncio.timeout(timeout):
                await _unless(self._start_node(lease), self.watch_lease())
        except TimeoutError:
            unreached = self.stage is Stage.SSH  # its sshd never let us in
            kind = "ssh_unreachable" if unreached else "not_ready"
            reason = f"the node's engine was not ready within {timeout:g} s (it got to: "
            reason += f"{self.stage.value})"
            fix = "raise [ssh] ready_timeout_secs, or read the node's channels for why"
            session = self._session
            if unreached and session is not None and session.last_outcome is _NOT_YET:
                kind = "host_key_not_pinned"  # it answered, never with the key pinned for it
                reason = (
                    f"the node never presented the host key pinned for it before create "
                    f"within {timeout:g} s: its start command did not install it before sshd "
                    "served (nothing was sent to it)"
                )
                fix = PINNED_KEY_FIX
            raise self._attempt_failed(
                AttemptFailure(self.stage, FailureScope.HOST, kind, reason, fix)
            ) from None
        except SshError as exc:
            raise self._attempt_failed(ssh_failure(exc, self.stage)) from None
        if self.watch.fatal is not None:
            raise self._attempt_failed(self._fatal_failure())
        loaded = self.watch.loaded
        assert loaded is not None
        try:
            self.local_url = await self._local_url(loaded.base_url, loaded.port)
        except SshError as exc:
            raise self._attempt_failed(ssh_failure(exc, Stage.ENGINE)) from None
        self.reach(Stage.SERVING)
        self._journal(None)
        self._keep_endpoint(serving=True)
        ready = NodeReady(
            at=self._clock(),
            run_id=self.run_id,
            model_id=loaded.model_id,
            engine=loaded.engine,
            local_url=self.local_url,
            load_ms=loaded.load_ms,
        )
        self.emit(ready)
        self.emit(self._ready_summary(ready.at))
        endpoint = self.endpoint
        if endpoint is not None:
            self.emit(
                EndpointReady(
                    at=self._clock(),
                    run_id=self.run_id,
                    base_url=endpoint.base_url,
                    model=endpoint.model,
                    auth=endpoint.auth,
                    idle_stop_mins=endpoint.idle_stop_mins,
                    port_taken=self._port_taken,
                )
            )
        return ready

    def _keep_endpoint(self, *, serving: bool) -> None:
        """The run's endpoint record: its key before the agent starts, its address once the
        node serves. A record that cannot be written is said, not fatal (prompts still work;
        only a re-attach and `mvp-tui endpoint` need it)."""
        loaded = self.watch.loaded if serving else None
        endpoint = self.endpoint or EndpointRecord(
            api_key=self.api_key, idle_stop_mins=self.watchdog.idle_stop_mins
        )  # the idle stop asked for, until the node says what it armed
        endpoint.api_key = self.api_key
        if loaded is not None:
            endpoint.base_url = self.local_url or ""
            endpoint.model = loaded.model_id or "model"
            endpoint.auth = loaded.auth
            endpoint.idle_stop_mins = loaded.idle_stop_mins
        endpoint.serving = serving
        self.endpoint = endpoint
        try:
            save_endpoint(self.store, self.run_id, endpoint)
        except (OSError, ValueError) as exc:
            self._sink_line(f"the run's endpoint record could not be written: {exc}")

    async def _start_node(self, lease: LeaseRecord) -> None:
        self._keep_endpoint(serving=False)  # the key is on disk before any agent checks it
        if self.provider.info.ssh:
            await self._start_remote_agent(lease)
            self.reach(Stage.AGENT)
            await self._until_ready_or_session_ends()
        else:
            await self._until_ready_or_exit()

    async def watch_lease(self) -> None:
        """Returns only by raising `AttemptFailed` when the provider says the lease's
        instance exited, stopped or is gone (polled at the provider's poll interval); waits
        for ever on a provider that does not bill (a local child is watched as a process)."""
        lease = self.lease_record
        if lease is None or not lease.provider_id or not self.provider.info.billing:
            await asyncio.Event().wait()
            return
        walk = self.walk_settings()  # its sleep too (tests and benches time it)
        while True:
            await walk.sleep(walk.poll_interval_s)
            try:
                status = await self.provider.get(lease.provider_id)
            except ProviderError:
                continue  # transient: the next poll asks again
            if status.state in (LeaseState.DEAD, LeaseState.STOPPED, LeaseState.GONE):
                raw = one_line_ascii(status.raw_state or status.state.value, 40)
                detail = one_line_ascii(status.detail, 200, redact=self.redactor)
                raise self._attempt_failed(
                    AttemptFailure(
                        self.stage,
                        FailureScope.HOST,
                        "instance_exited",
                        f"the provider says lease {lease.provider_id} is {raw}"
                        + (f": {detail}" if detail else ""),
                        "nothing to fix here: the host failed; another offer is tried",
                    )
                )

    def _fatal_failure(self) -> AttemptFailure:
        fatal = self.watch.fatal
        assert fatal is not None
        scope = FailureScope.RUN if fatal.scope == "run" else FailureScope.HOST
        stage = AGENT_PHASE_STAGES.get(fatal.phase, self.stage)
        return AttemptFailure(stage, scope, f"node_{fatal.phase or 'failed'}", fatal.reason,
                              fatal.fix)  # fmt: skip

    def _attempt_failed(self, failure: AttemptFailure) -> AttemptFailed:
        failure = dataclasses.replace(
            failure, reason=self.redactor(failure.reason), fix=self.redactor(failure.fix)
        )
        self.emit(
            NodeFailed(at=self._clock(), run_id=self.run_id, reason=failure.reason,
                       fix=failure.fix)
        )  # fmt: skip
        return AttemptFailed(failure)

    async def _until_ready_or_exit(self) -> None:
        """A local node: its engine reports, or its agent process ends first (the seed's
        `Exited` before ready), which fails the bring-up at once instead of at the timeout."""
        ready = asyncio.ensure_future(self.watch.ready.wait())
        exited = asyncio.ensure_future(self._agent_exit())
        try:
            await asyncio.wait({ready, exited}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (ready, exited):
                task.cancel()
            await asyncio.gather(ready, exited, return_exceptions=True)
        if not self.watch.ready.is_set() and exited.done() and not exited.cancelled():
            raise self._node_failed(
                f"the node's agent exited (code {exited.result()}) before it was ready",
                "read the node's stderr channel for why",
            )

    async def _agent_exit(self) -> int | None:
        """Returns when a local node's agent process has ended on its own, after emitting
        `AgentExited` (the seed's `Exited` observation); waits forever when the provider
        cannot tell (rented nodes: the SSH session watches their agent)."""
        wait_exited = getattr(self.provider, "wait_exited", None)
        lease = self.lease_record
        # A re-attached lease was not started by this process: its provider cannot watch it.
        adopted = self._resume is not None
        if (
            self.provider.info.ssh
            or wait_exited is None
            or adopted
            or not lease
            or not lease.provider_id
        ):
            await asyncio.Event().wait()
        assert lease is not None and lease.provider_id and wait_exited is not None
        code: int | None = await wait_exited(lease.provider_id)
        self.emit(
            AgentExited(
                at=self._clock(),
                lease_key=lease.provider_id,
                exit_code=code,
                before_ready=not self.watch.ready.is_set(),
            )
        )
        return code

    async def _until_ready_or_session_ends(self) -> None:
        """The SSH retry loop gives up (host key changed, auth, timeout) or the engine
        reports: whichever comes first."""
        session = self._session
        assert session is not None
        waits: list[asyncio.Future[object]] = [
            asyncio.ensure_future(self.watch.ready.wait()),
            asyncio.ensure_future(session.wait()),
        ]
        if self.watchdog.required:
            waits.append(asyncio.ensure_future(self._watchdog_failed.wait()))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()
            await asyncio.gather(*waits, return_exceptions=True)
        self.check_watchdog()
        if not self.watch.ready.is_set():
            failure = session.failure
            raise (
                failure
                if failure is not None
                else SshError(
                    f"the SSH session to lease {session.lease_key} ended before the node was ready"
                )
            )

    def check_watchdog(self) -> None:
        """A node whose switch (or boot guard) cannot destroy its own instance is not run when
        the switch is required: the lease is torn down, and the message says why and how to
        opt out."""
        verdict, guard = self.watchdog_verdict, self.boot_guard_verdict
        failed = [
            (what, f"the node's {what} cannot protect this lease: {v.reason}")
            for what, v in (("boot guard", guard), ("dead-man's switch", verdict))
            if v is not None and v.status == "failed"
        ]
        if self.watchdog.required and failed:
            what, reason = failed[0]
            raise self._attempt_failed(
                AttemptFailure(
                    Stage.AGENT,
                    FailureScope.HOST,
                    "guard_failed" if what == "boot guard" else "switch_failed",
                    reason,
                    "fix the node image or its instance key, or set [limits] "
                    "require_node_watchdog = false (env MVP_REQUIRE_NODE_WATCHDOG=false) to "
                    "rent without it",
                )
            )

    async def keep_node_attached(self) -> None:
        """Heartbeats to the node's switch while this run is attached (at least four per
        silence window); runs until cancelled. Nothing to do without a silence limit."""
        every = self.watchdog.heartbeat_every_s
        if every is None or not self.provider.info.ssh:
            await asyncio.Event().wait()
            return
        while True:
            await asyncio.sleep(every)  # a timer, not a wait for something
            session = self._session
            if session is not None:
                await session.send_control("heartbeat")
            for worker in self._worker_sessions:  # each worker's switch hears the run too
                await worker.send_control("heartbeat")

    async def _start_remote_agent(self, lease: LeaseRecord) -> None:
        from mvp_tui.providers.local import AGENT_PATH

        session = self._new_session(lease, self.watch.ready)
        self._session = session
        remote_dir = self._remote_dir(lease)
        env = {**self.node_env, **self.watchdog.node_env(lease.running_at or self._clock())}
        if self.cluster.settings.multi:  # the main node of several: --rpc over tunnels
            secrets = self.cluster.tunnel_secrets(self._pins())
            self.redactor.add(secrets.get("MVP_RPC_TUNNEL_KEY"))  # never echoed back either
            env.update(self.cluster.main_env(), **secrets)
        await session.start_agent(AGENT_PATH, env, remote_dir, resume=self._resume)
        command = self.settings.runtime.bootstrap_command
        if command and self._resume is None:  # once per node: not again on a re-attach
            await self._run_bootstrap_command(session, command)

    def _remote_dir(self, lease: LeaseRecord) -> str:
        """The agent's directory on the node: the run's, and for a host that replaced
        another (same node id, an earlier lease that ran) its own, so a re-attach finds it
        from the record and no old agent's logs are read as the new one's."""
        base = f"{self.settings.runtime.node_dir.rstrip('/')}/{self.run_id}"
        with contextlib.suppress(Exception):  # no record yet: the first host
            leases = self.store.load(self.run_id).leases
            index = next(i for i, x in enumerate(leases) if x.label == lease.label)
            hosts = sum(1 for x in leases[:index] if x.node_id == lease.node_id and x.running_at)
            return base if hosts == 0 else f"{base}-host{hosts + 1}"
        return base

    async def _start_worker(
        self, lease: LeaseRecord, role_env: Mapping[str, str], ready: asyncio.Event
    ) -> None:
        """A worker node of a multi-node run: its own session, agent and directory."""
        from mvp_tui.providers.local import AGENT_PATH

        node = role_env.get("MVP_LOGICAL_NODE_ID", "")
        # Its own bridge: its frames carry its stream, and it writes no other node's channels.
        bridge = NodeBridge(self.hub, int(node), node_stream(run_number(self.run_id), int(node)),
                            redactor=self.redactor, own_channels_only=True)  # fmt: skip
        session = self._new_session(lease, ready, bridge)
        self._worker_sessions.append(session)
        remote_dir = f"{self.settings.runtime.node_dir.rstrip('/')}/{self.run_id}-node{node}"
        env = {**self.node_env, **role_env}
        env.update(self.watchdog.node_env(lease.running_at or self._clock()))
        await session.start_agent(AGENT_PATH, env, remote_dir)

    def _pins(self) -> RecordPins:
        return RecordPins(self.store, self.run_id)

    def _new_session(
        self, lease: LeaseRecord, ready: asyncio.Event, bridge: NodeBridge | None = None
    ) -> NodeSession:
        from mvp_tui.ssh.session import NodeSession

        if lease.ssh is None or lease.provider_id is None:
            raise self._node_failed("the lease has no SSH endpoint", "")
        return NodeSession(
            lease.ssh,
            self._identity,
            self._pins(),
            lease.provider_id,
            self._ssh_settings(lease),
            self._sink,
            self._on_node_line if bridge is None else bridge.on_line,
            (bridge or self.bridge).feed_provider_line,
            ready=ready,
            redactor=self.redactor,
            # Pinned before create (Vast, RunPod): until it answers, another key is "not yet".
            awaiting_pin=lease.host_key is not None and self._resume is None,
        )

    def _ssh_settings(self, lease: LeaseRecord) -> SshSettings:
        """[ssh] for this lease: the wait for a first answer from its sshd is budgeted by the
        image's size and the offer's download bandwidth ([ssh] ready_timeout_secs caps it)."""
        ssh = self.settings.ssh
        offer = self._offers.get(lease.offer_id or "")
        budget = boot_budget_s(
            ssh.ready_timeout,
            self.config.get_float("image.size_gb") or 0.0,
            offer.down_mbps if offer is not None else 0.0,
        )
        self.emit(
            StageBudget(at=self._clock(), run_id=self.run_id, stage=Stage.SSH.value,
                        budget_s=round(budget, 1))
        )  # fmt: skip
        return dataclasses.replace(ssh, reach_timeout=budget)

    async def _run_bootstrap_command(self, session: NodeSession, command: str) -> None:
        """`[vastai] bootstrap_command`, after the agent is set up and started (the Vast seed ran
        it as the node's bootstrap; here the agent is that, and the command is the user's
        extra step). A failure fails the bring-up, which tears the lease down."""
        self._sink_line("running [vastai] bootstrap_command on the node")
        code = await session.run_in_run_dir(command, self.settings.ssh.ready_timeout)
        if code != 0:
            raise self._attempt_failed(
                AttemptFailure(
                    Stage.AGENT,
                    FailureScope.RUN,
                    "bootstrap_command",
                    "[vastai] bootstrap_command "
                    + ("did not finish" if code is None else f"exited with status {code}"),
                    "fix the command (its output is on the node's provider channel), or unset "
                    "[vastai] bootstrap_command",
                )
            )
        self._sink_line("[vastai] bootstrap_command finished (status 0)")

    async def _local_url(self, node_base_url: str, port: int) -> str:
        if not self.provider.info.ssh:
            return node_base_url
        assert self._session is not None
        # 0: any free port; a replaced node takes the port its predecessor had, so clients
        # pointed at it keep working.
        # A re-attach keeps the earlier run's address.
        earlier = self.endpoint.port if self.endpoint is not None else None
        wanted = self._openai_port or earlier or self.settings.prompt.openai_port
        if wanted and self._openai_port is None and not local_port_free(wanted):
            self._port_taken = wanted  # said with the endpoint; another port serves
            wanted = 0
        local_port = await self._session.forward(port, wanted)
        self._openai_port = local_port
        return f"http://127.0.0.1:{local_port}"

    def _node_failed(self, reason: str, fix: str) -> RunFailed:
        reason, fix = self.redactor(reason), self.redactor(fix)
        self.emit(NodeFailed(at=self._clock(), run_id=self.run_id, reason=reason, fix=fix))
        return RunFailed(reason, fix)

    async def guard_limits(self) -> None:
        """Returns only by raising `RunFailed` when `[limits] max_spend_usd` or `max_hours`
        is reached (the caller tears down); waits forever when neither is set."""
        limits = self.settings.limits
        if not limits.any:
            await asyncio.Event().wait()
        lease, (limit, value, reached) = await watch_limits(
            limits,
            lambda: self.lease_record,
            self._clock,
            # A multi-node run's workers bill too, and so did every earlier attempt's host.
            others=lambda: [*self.cluster.worker_leases, *self.past_leases],
        )
        self.emit(
            LimitReached(
                at=self._clock(),
                run_id=self.run_id,
                provider_id=lease.provider_id or "",
                limit=limit,
                value=value,
                reached=round(reached, 6),
            )
        )
        unit = "USD" if limit == "max_spend_usd" else "hours"
        raise RunFailed(
            f"[limits] {limit} = {value:g} reached ({reached:.4g} {unit}): tearing down; "
            f"raise [limits] {limit} to run longer"
        )

    async def watch_node(self) -> None:
        """Returns only by raising `AttemptFailed` (stage serving) when the node fails after
        it was ready: its engine reports a fatal error, its agent exits, the SSH session gives
        up, or the provider says the instance exited or is gone."""
        try:
            await _unless(self._watch_serving_node(), self.watch_lease())
        except NodeStoppedItself:
            raise
        except AttemptFailed:
            if self._idle_stopped.is_set():  # its instance went as the node said it would
                raise self._stopped_itself() from None
            raise
        except RunFailed as failed:  # already announced (NodeFailed)
            if self._idle_stopped.is_set():
                raise self._stopped_itself() from None
            fatal = self.watch.fatal
            scope = FailureScope.RUN if fatal is not None and fatal.scope == "run" else None
            raise AttemptFailed(
                AttemptFailure(Stage.SERVING, scope or FailureScope.HOST, "node_lost",
                               failed.message, failed.fix)
            ) from None  # fmt: skip

    async def _watch_serving_node(self) -> None:
        session = self._session
        waits: list[asyncio.Future[Any]] = [asyncio.ensure_future(self.watch.failed.wait())]
        if session is not None:
            waits.append(asyncio.ensure_future(session.wait()))
        exited = asyncio.ensure_future(self._agent_exit())
        waits.append(exited)
        waits += [asyncio.ensure_future(w.wait()) for w in self._worker_sessions]
        stall: asyncio.Future[object] = asyncio.ensure_future(self._stall_watch())
        waits.append(stall)
        waits.append(asyncio.ensure_future(self._idle_stopped.wait()))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()
            await asyncio.gather(*waits, return_exceptions=True)
        if self._idle_stopped.is_set():
            raise self._stopped_itself()
        stalled = stall.exception() if stall.done() and not stall.cancelled() else None
        if isinstance(stalled, StallDetected) and not self.watch.failed.is_set():
            raise self._node_failed(
                self.cluster.describe_stall(str(stalled)),
                "read the nodes' channels; raise [prompt] stall_secs for a slow model",
            )
        fatal = self.watch.fatal
        if fatal is None and exited.done() and not exited.cancelled():
            raise self._node_failed(
                f"the node's agent exited on its own (code {exited.result()})",
                "read the node's stderr channel for why",
            )
        lost = next((w for w in self._worker_sessions if w.stop_reason is not None), None)
        if fatal is None and lost is not None:
            why = lost.failure.message if lost.failure is not None else str(lost.stop_reason)
            raise self._node_failed(
                f"the SSH session to worker lease {lost.lease_key} ended: {why}",
                "read the worker's channels for why",
            )
        if fatal is None and session is not None and session.failure is not None:
            failure = session.failure
            raise self._node_failed(failure.message, failure.fix)
        if fatal is None and session is not None:
            raise self._node_failed(
                f"the SSH session to lease {session.lease_key} ended ({session.stop_reason})",
                "read the node's channels for why",
            )
        raise self._node_failed(
            fatal.reason if fatal else "the node failed", fatal.fix if fatal else ""
        )

    def _stopped_itself(self) -> NodeStoppedItself:
        mins = self.endpoint.idle_stop_mins if self.endpoint is not None else None
        window = f"{mins:g} min" if mins else "its window"
        message = (
            f"the node's idle stop: no request reached its model for {window}, so it "
            "destroys its own lease"
        )
        self._sink_line(message)
        return NodeStoppedItself(message, "raise [limits] idle_stop_mins, or 0 turns it off")

    async def after_prompts(self, grace_s: float = 15.0) -> None:
        """Raises `RunFailed` when a prompt's stream broke because the engine went away (a
        node died mid-answer): with the node's own verdict when it comes within `grace_s`."""
        lost = self.stall.engine_lost
        if lost is None:
            return
        try:
            async with asyncio.timeout(grace_s):
                await self.watch.failed.wait()
        except TimeoutError:
            raise self._node_failed(
                f"prompt {lost.prompt_id} was cut off ({lost.error}) and the node said nothing",
                "read the node's channels for why",
            ) from None
        fatal = self.watch.fatal
        assert fatal is not None
        raise self._node_failed(fatal.reason, fatal.fix)

    async def _stall_watch(self) -> object:
        await self.stall.watch()
        return None

    # -- attempts: one offer from create to serving, again on the next when a host fails --------
    def begin_attempt(self) -> None:
        """Forget the last attempt's node (its verdicts, its session, its URL) before the walk
        leases the next; what was leased stays in `past_leases` (spend and hours count it)."""
        self.watch.reset()
        self.watchdog_verdict = None
        self.boot_guard_verdict = None
        self._watchdog_failed.clear()
        self.local_url = None
        self.stall.engine_lost = None
        self.bridge.frame_source = FRAME_SOURCE  # the next node's bootstrap stdio first
        self.stage, self.stage_started = Stage.CREATE, {Stage.CREATE: self._clock()}

    async def discard_attempt(self, failure: AttemptFailure) -> bool:
        """End the failed attempt's node: its session closed (agent stopped, bounded), its
        lease destroyed, confirmed; recorded with its stage and reason. True when confirmed
        gone (False: it may bill, and no other lease may be made)."""
        lease = self.lease_record
        self.emit(
            AttemptAbandoned(
                at=self._clock(),
                run_id=self.run_id,
                provider_id=(lease.provider_id or "") if lease else "",
                offer_id=(lease.offer_id or "") if lease else "",
                stage=failure.stage.value,
                scope=failure.scope.value,
                failure_kind=failure.kind,
                reason=failure.reason,
                fix=failure.fix,
                stage_secs=tuple(self.stage_secs().items()),
            )
        )
        self._journal(failure)
        with contextlib.suppress(Exception):  # never let a close stop the destroy
            await self.close_session(shutdown_agent=True)
        if lease is None or lease.provider_id is None:
            return True
        record = self.store.load(self.run_id)
        kept = record.lease_by_id(lease.provider_id) or lease
        # The reason stays in the run record with the lease (teardown saves it).
        kept.failure = f"failed at {failure.stage.value} ({failure.kind}): {failure.reason}"[:600]
        ok = await teardown_lease(
            self.provider, self.store, record, kept, self._sink, self.walk_settings(),
            reason=DeleteReason.HOST_FAILED, clock=self._clock,
        )  # fmt: skip
        self.past_leases.append(kept)
        self.lease_record = None
        return ok

    def _journal(self, failure: AttemptFailure | None) -> None:
        """The attempt's outcome into the host journal (host memory for later runs)."""
        lease = self.lease_record
        offer = self._offers.get(lease.offer_id) if lease is not None else None
        if lease is None or offer is None:
            return
        now = self._clock()
        outcome = HostOutcome(
            at=now,
            run_id=self.run_id,
            provider=offer.provider,
            host=host_key(offer),
            offer_id=offer.offer_id,
            gpu_name=offer.gpu_name,
            stage=failure.stage.value if failure is not None else Stage.SERVING.value,
            ok=failure is None,
            reason=failure.reason if failure is not None else "",
            stage_secs=self.stage_secs(now),
            cost_usd=round(lease_spend_usd(lease, now), 6),
            blames_host=failure is None or failure.scope is FailureScope.HOST,
            image=self.config.node_image()[0],  # the board's ~ready: this host has it cached
        )
        try:
            HostJournal(self.config.state_dir, redact=self.redactor).append(outcome)
        except OSError as exc:  # host memory helps later runs; this one goes on
            self._sink_line(f"the host journal could not be written: {exc}")

    # -- prompts -------------------------------------------------------------------------------
    async def start_prompts(self, *, rpc: bool = True) -> PromptQueue:
        """The prompt queue (and RPC server) on the serving node; a replaced node takes over
        the same queue and RPC address, its waiting prompts resumed."""
        if self.local_url is None or self.watch.loaded is None:
            raise RunFailed("the node is not ready: bring it up before prompting")
        lease = self.lease_record
        price = lease.price_per_hour if lease is not None and lease.price_per_hour else None
        if self.prompts is not None:
            self.prompts.price_per_hour = price
            self.prompts.resume()
            return self.prompts
        redactor = self.redactor
        from mvp_tui.prompt.client import PromptClient  # httpx loads when first prompted

        def client() -> PromptClient:  # the node of the moment: a replacement moves it
            loaded = self.watch.loaded
            model = (loaded.model_id if loaded else "") or "model"
            return PromptClient(
                self.local_url or "", model, api_key=self.api_key or None, redactor=redactor
            )

        self.prompts = PromptQueue(client, self.stall.tap(self._sink), price)
        if rpc:
            addr = parse_rpc_addr(
                self.settings.prompt.rpc_addr, allow_remote=self.settings.prompt.rpc_allow_remote
            )
            self._rpc = PromptRpcServer(
                self.prompts,
                addr,
                default_max_tokens=self.settings.prompt.max_tokens,
                sink=self._sink,
            )
            await self._rpc.start()
        return self.prompts

    def pause_prompts(self) -> None:
        """The node is gone: prompts wait (the one streaming ends with its fault)."""
        if self.prompts is not None:
            self.prompts.pause()

    def announce_order(self, offers: Sequence[Offer], reason: str) -> None:
        """Say the order the walk will try the offers in (bootstrap channel, Leases pane)."""
        names = tuple(f"{o.provider}:{o.offer_id}" for o in offers)
        self.emit(WalkOrderSaid(at=self._clock(), run_id=self.run_id, offers=names, reason=reason))
        self._sink_line(
            "the walk tries, in order: " + (", ".join(names) or "(none left)") + f" ({reason})"
        )

    def _ready_summary(self, now: float) -> ReadySummary:
        """Stage times of the attempt that served; the money of every host tried so far."""
        secs = self.stage_secs(now)
        leases = [*self.past_leases, *([self.lease_record] if self.lease_record else [])]
        spent = sum(lease_spend_usd(lease, now) for lease in leases)
        began = min((at for at in self.stage_started.values()), default=now)
        first = min((x.created_at for x in leases if x.created_at is not None), default=began)
        parts = stage_parts(secs)
        total = max(0.0, now - min(first, began))
        # The start command fetched the model during the boot and the SSH wait.
        fetched_at_boot = self.provider.info.ssh and wants_prefetch(self.node_env)
        overlapped = frozenset({"model"}) if fetched_at_boot else frozenset()
        return ReadySummary(at=now, run_id=self.run_id, seconds=round(total, 3), stages=parts,
                            spent_usd=round(spent, 6),
                            text=summary_text(total, parts, spent, overlapped))  # fmt: skip

    def limit_reached(self) -> tuple[str, str] | None:
        """(reason, fix) when a spend or hours limit is reached by the leases so far."""
        leases = [*self.past_leases, *([self.lease_record] if self.lease_record else [])]
        if not leases:
            return None
        breach = self.settings.limits.breach(leases[-1], self._clock(), leases[:-1])
        if breach is None:
            return None
        limit, value, reached = breach
        return (
            f"[limits] {limit} = {value:g} reached ({reached:.4g}) by the hosts tried so far",
            f"raise [limits] {limit} to try more hosts",
        )

    # -- teardown: the steps the run controller runs, each on its own ----------------------------
    async def close_rpc(self) -> None:
        rpc, self._rpc = self._rpc, None
        if rpc is not None:
            await rpc.aclose()

    async def close_prompts(self) -> None:
        prompts, self.prompts = self.prompts, None
        if prompts is not None:
            await prompts.aclose()

    async def close_session(self, shutdown_agent: bool = True) -> None:
        """End the SSH session; with `shutdown_agent` the agent and engine are stopped too
        (bounded: the lease is destroyed next, which ends them anyway)."""
        if self.endpoint is not None and self.endpoint.serving:
            self._keep_endpoint(serving=False)  # the forward ends with the session
        workers, self._worker_sessions = self._worker_sessions, []
        for worker in workers:  # a rented multi-node run's workers: stopped with the run
            if not shutdown_agent:  # kept: its silence switch stands down, as the main's
                await worker.send_control("detach")
            limit = worker.settings.connect_timeout + 2 * worker.settings.shutdown_grace + 5
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(worker.close(shutdown_agent=shutdown_agent), limit)
        session, self._session = self._session, None
        if session is None:
            return
        if not shutdown_agent:
            # Left running on purpose: the node's silence switch stands down (its deadline
            # stays), or it would destroy the lease the user chose to keep.
            if not await session.send_control("detach"):
                self._sink_line(f"could not tell lease {session.lease_key}'s node to detach")
            await session.close(shutdown_agent=False)
            self._mark_agent_log(session.positions)
            return
        limit = session.settings.connect_timeout + 2 * session.settings.shutdown_grace + 5
        try:
            await asyncio.wait_for(session.close(shutdown_agent=True), limit)
        except TimeoutError:
            self._sink_line(f"ssh close to lease {session.lease_key} gave up after {limit:g} s")

    async def postpone_idle_stop(self) -> bool:
        """A key in the dashboard: the node's idle stop counts it as use (rented nodes; a
        local one does not bill). True once the node was told."""
        session = self._session
        return session is not None and await session.send_control("use")

    def _mark_agent_log(self, positions: LogPositions) -> None:
        """Record where this run stopped reading the agent left running (with the engine
        verdict it saw), for a later re-attach to resume there."""
        lease = self.lease_record
        if lease is None or lease.provider_id is None:
            return
        # The main node's verdict, not a worker's (every node writes this channel).
        frames = self.hub.tail(WEIGHTS_CHANNEL).frames
        verdict = [f for f in frames if f.stream == self.bridge.stream]
        ready = verdict[-1].payload.decode("utf-8", "replace") if verdict else None
        self.store.mark_agent_log(
            self.run_id, lease.provider_id, (positions.stdout, positions.stderr), ready
        )
        lease.log_positions, lease.ready_record = (positions.stdout, positions.stderr), ready

    async def destroy_leases(self) -> DownReport:
        """Destroy, confirmed, every lease this run's record holds open (including creates
        a cancelled walk left unclear: the provider is listed by the run's labels)."""
        if not self.store.record_path(self.run_id).exists():
            self.lease_record = None  # nothing was ever about to be created
            return DownReport((), (), (), ())
        report = await down(
            self.provider, self.store, self.run_id, self._sink, self.walk_settings(), self._clock
        )
        if report.ok:
            self.lease_record = None
        return report

    def open_leases(self) -> list[LeaseRef]:
        """This run's leases that may still bill, from its record."""
        if not self.store.record_path(self.run_id).exists():
            return []
        record = self.store.load(self.run_id)
        return [LeaseRef(self.run_id, x.provider_id, x.label) for x in record.open_leases()]

    def now(self) -> float:
        return self._clock()

    def log(self, line: str) -> None:
        """One of the engine's own lines on the node's provider channel (redacted)."""
        self._sink_line(line)

    async def aclose(self) -> None:
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


async def _unless(work: Awaitable[None], guard: Awaitable[None]) -> None:
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


def _plain(value: object) -> object:
    if isinstance(value, Path):
        return str(value)
    return value


__all__ = ["ProviderError", "RunEngine", "RunFailed"]
