"""One run, top to bottom: offers → lease walk → node up → prompts → confirmed teardown.

`RunEngine` composes the run's collaborators over one `RunContext` (engine/context.py: ids,
settings, sink, hub, redactor, store, clock, configuration), each owning its own state:

- `Leasing` (run_lease): the SSH identity, volume, walk (one node or a `Cluster`), earlier
  runs' leases and adopting one;
- `NodeLink` (run_bringup): the SSH session or child process, bring-up, the lease watch,
  heartbeats, the endpoint record and the agent's log mark;
- `Serving` (run_serve): the prompt queue and RPC server, the serving node's watch, limits;
- `Teardown` (run_teardown): the run's leases destroyed, confirmed;
- `Attempts` (run_attempts), `AttemptStage` (attempt_stage): between one host and the
  next, stage times;
- `NodeVerdicts` (run_core): what the nodes say about themselves.

The engine owns every resource a run holds and releases it in `aclose`. It reports through
its event sink and the channel hub only; the dashboard and headless mode both drive it (the
run controller, engine/controller.py, through these collaborators).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Mapping

from mvp_tui.config import Config, ConfigError
from mvp_tui.config.loader import served_name
from mvp_tui.config.values import Source
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.engine.attempt_stage import AttemptStage
from mvp_tui.engine.cluster import Cluster, ClusterSettings
from mvp_tui.engine.context import RunLeases
from mvp_tui.engine.events import OffersListed, RunStarted
from mvp_tui.engine.failures import RunFailed
from mvp_tui.engine.ledger import LeaseLedger
from mvp_tui.engine.model_fit import ModelNeed
from mvp_tui.engine.run_attempts import Attempts
from mvp_tui.engine.run_bringup import NodeLink
from mvp_tui.engine.run_core import (
    NODE_CLUSTER_SOURCE,
    NodeVerdicts,
    describe_run,
    local_port_free,
    node_env_for,
    open_context,
)
from mvp_tui.engine.run_lease import Leasing
from mvp_tui.engine.run_serve import Serving
from mvp_tui.engine.run_teardown import Teardown
from mvp_tui.engine.vram_floor import floor_from_need
from mvp_tui.events import EventSink
from mvp_tui.lease.settings import WalkSettings
from mvp_tui.lease.state_probe import probe_state_dir
from mvp_tui.providers.base import Offer, Provider, ProviderError


class RunEngine:
    """Drives one run. Call `search_offers`, `leasing.lease`, `link.bring_up`,
    `serving.start_prompts`, and always the teardown steps (`teardown.destroy_leases`,
    confirmed) then `aclose`.

    It composes the run's collaborators (`ctx`, `leasing`, `link`, `serving`, `teardown`,
    `attempts`) and callers reach them directly; the engine keeps only the run's own checks,
    model and offer search. `hub`: a session's hub (its panes attach once); the engine then
    leaves it open at `aclose(keep_hub=True)`."""

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
        ctx = open_context(
            config, sink, hub=hub, clock=clock, environ=environ, provider=provider,
            settings_override=settings_override, ledger=ledger,
        )
        self.ctx = ctx
        # The run's shared pieces, never rebound (what changes is read through `ctx`).
        self.config, self.ledger, self.hub, self.bridge = config, ctx.ledger, ctx.hub, ctx.bridge
        self.redactor, self.store, self.provider = ctx.redactor, ctx.store, ctx.provider
        self.watchdog, self.node_id = ctx.watchdog, ctx.node_id
        self.verdicts = NodeVerdicts(ctx)
        self.watch, self.verdict_wait, self.stall = (
            self.verdicts.watch, self.verdicts.verdict_wait, self.verdicts.stall
        )
        self.leases = RunLeases()
        self.cluster = Cluster(
            ClusterSettings.from_config(config),
            ctx.node_id,
            self.verdicts.workers,
            phase=ctx.sink.emitter.emit_bootstrap,  # the seed's stage_provision/node_* steps
        )
        self.attempt = AttemptStage(ctx, self.leases)
        self.link = NodeLink(ctx, self.leases, self.verdicts, self.attempt, self.cluster)
        self.serving = Serving(ctx, self.leases, self.link, self.verdicts, self.cluster)
        self.teardown = Teardown(ctx, self.leases)
        self.attempts = Attempts(ctx, self.leases, self.link, self.verdicts, self.attempt)
        self.leasing = Leasing(ctx, self.leases, self.cluster, self.link)
        self._flusher: asyncio.Task[None] | None = None
        # The model's need as last read, with what it was read for (the picker changes it).
        self._need: tuple[tuple[object, int], ModelNeed] | None = None
        # The VRAM floor's line (`vram_floor.py`), logged once per change.
        self.vram_floor_said: str | None = None
        describe_run(ctx)

    # -- the run's own steps ---------------------------------------------------------------
    async def _flush_archive(self) -> None:
        # The archive buffers; a quiet run must still reach the disk about once a second.
        while True:
            await asyncio.sleep(1.0)
            self.hub.flush()

    def started(self) -> None:
        if self.hub.archive is not None and self._flusher is None:
            self._flusher = asyncio.get_running_loop().create_task(self._flush_archive())
        self.ctx.emit(
            RunStarted(
                at=self.ctx.clock(),
                run_id=self.ctx.run_id,
                provider=self.config.provider,
                profile=self.config.profile,
                state_dir=str(self.store.run_dir(self.ctx.run_id)),
            )
        )

    def check_model(self) -> None:
        """A local node reads the model from this machine: a wrong path fails here, before
        any process starts, naming the key and where its value came from."""
        if self.provider.info.ssh:
            return
        path = self.ctx.settings.model.gguf_local_path
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
        (read-only, full, not a directory) stops the run here, before the SSH key or anything
        else reaches the provider (exit 2). The probe is written as records are (atomically,
        fsynced) and as large as a run's records grow, so a disk with room for a few bytes
        but not for the records fails here, not after the key is registered."""
        source = self.config.sources.get("state.dir") or "default"
        probe_state_dir(self.config.state_dir, source)

    def choose_model(self, repo: str, file: str) -> None:
        """Serve hub `repo`'s `file` from the next lease on (the model picker): the node's
        env and the board's need follow. The session allows it only while nothing is leased."""
        # A served name the user never set follows the model (what OpenAI clients ask for).
        named = self.config.sources.get("model.id", Source("default")).layer != "default"
        model = dataclasses.replace(
            self.ctx.settings.model, gguf_local_path=None, gguf_repo=repo, gguf_file=file,
            gguf_revision=None,
            model_id=self.ctx.settings.model.model_id if named else served_name(file),
        )
        self.ctx.use_settings(dataclasses.replace(self.ctx.settings, model=model))
        self.ctx.use_node_env(node_env_for(self.ctx))

    async def model_need(self) -> ModelNeed:
        """The model's VRAM need per node (the board's `fit`), from the local file or the
        hub this run's nodes download from; `ModelNeedError` says why it cannot be read."""
        from mvp_tui.engine.model_need import read_model_need  # httpx: only when asked

        nodes = self.config.settings.runtime.nodes
        need = await read_model_need(self.ctx.settings.model, nodes=nodes, environ=self.ctx.environ)
        # The node's -ngl and its slots follow the fit.
        self.ctx.note_vram_need(need.per_node_mib, need.kv_slot_mib)
        return need

    async def _model_need_once(self) -> ModelNeed:
        """`model_need`, read once per model (every offer search asks for it)."""
        key = (self.ctx.settings.model, self.config.settings.runtime.nodes)
        if self._need is None or self._need[0] != key:
            self._need = (key, await self.model_need())
        return self._need[1]

    async def search_offers(self, limit: int = 64) -> list[Offer]:
        """The provider's offers; a provider that takes the run's VRAM need as its floor
        (RunPod `auto`) gets it first (`vram_floor.py`)."""
        said = await floor_from_need(self.provider, self._model_need_once)
        if said is not None and said != self.vram_floor_said:
            self.vram_floor_said = said
            self.ctx.log(said)
        policy = dataclasses.replace(self.ctx.settings.policy, limit=limit)
        offers = await self.provider.search_offers(policy)
        skipped = len(self.provider.last_skipped)
        self.ctx.emit(
            OffersListed(
                at=self.ctx.clock(), provider=self.config.provider, count=len(offers),
                skipped=skipped,
            )
        )
        return offers

    async def aclose(self, *, keep_hub: bool = False) -> None:
        """Release what the run holds. `keep_hub`: the hub is a session's, which outlives
        this engine (a provider switch): the engine's listeners come off it, it stays open."""
        self.link.stop_ssh_debug_log()
        if self._flusher is not None:
            self._flusher.cancel()
            self._flusher = None
        self.hub.flush()
        if keep_hub:
            self.verdicts.detach()
            self.attempt.detach()
        elif self.hub.archive is not None:
            self.hub.archive.close()
        await self.provider.aclose()


__all__ = ["NODE_CLUSTER_SOURCE", "ProviderError", "RunEngine", "RunFailed", "local_port_free"]
