"""What every collaborator of a run shares: its ids and keys, settings, sink, hub and bridge,
redactor, record store, clock and configuration (`RunContext`), and the leases it holds
(`RunLeases`). Each collaborator (engine/run_*.py) gets these and owns its own state;
`RunEngine` (engine/run.py) composes them.

`RunContext` is frozen: the few facts a run rebinds (its id and keys when it adopts an
earlier run, its settings and node env when a model is chosen, the SSH identity once
loaded, a taken port) change only through its own methods.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from mvp_tui.config import Config
from mvp_tui.datastream.bridge import NodeBridge
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.engine.failures import RunFailed
from mvp_tui.engine.ledger import LeaseLedger
from mvp_tui.engine.orch import OrchTap
from mvp_tui.engine.settings import RunSettings, create_env
from mvp_tui.engine.watchdog import WatchdogSettings
from mvp_tui.events import EngineEvent
from mvp_tui.lease.record_pins import RecordPins
from mvp_tui.lease.records import LeaseRecord, RecordStore
from mvp_tui.lease.settings import WalkSettings
from mvp_tui.node_protocol import AgentEnv
from mvp_tui.providers.base import Offer, Provider
from mvp_tui.secrets import Redactor

if TYPE_CHECKING:  # asyncssh loads only when a node is reached over SSH
    from mvp_tui.ssh.identity import SshIdentity


@dataclass(frozen=True, eq=False)
class RunContext:
    """One run's shared facts, passed to each of its collaborators."""

    config: Config
    settings: RunSettings
    run_id: str
    node_id: int
    hub: ChannelHub
    bridge: NodeBridge
    redactor: Redactor
    store: RecordStore
    clock: Callable[[], float]
    environ: Mapping[str, str]
    provider: Provider
    ledger: LeaseLedger
    sink: OrchTap  # every event goes through it: the ledger, then the hub, then the UI
    watchdog: WatchdogSettings
    # The run's key for its OpenAI endpoint and the prompt RPC's token (redacted everywhere).
    api_key: str
    rpc_token: str
    node_env: dict[str, str] = field(default_factory=dict)
    settings_override: Callable[[WalkSettings], WalkSettings] | None = None
    identity: SshIdentity | None = None  # loaded by prepare_ssh_identity
    ssh_public_key: str | None = None
    port_taken: int = 0  # [prompt] openai_port, when something else held it
    local_port_asked: int = 0  # the port a local node was asked to serve on
    vram_need_mib: int = 0  # the fit's need per node, once read (0: unknown)
    kv_slot_mib: int = 0  # one slot's KV cache per node, once read (0: unknown)

    def _rebind(self, **changes: object) -> None:
        for name, value in changes.items():
            object.__setattr__(self, name, value)

    # -- what collaborators call ----------------------------------------------------------
    def emit(self, event: EngineEvent) -> None:
        self.sink(event)

    def now(self) -> float:
        return self.clock()

    def log(self, text: str) -> None:
        """One of the engine's own lines on the node's provider channel (redacted)."""
        self.bridge.feed_provider_line(self.redactor(text))

    def on_node_line(self, kind: str, line: bytes) -> None:
        self.bridge.on_line(kind, line)

    def pins(self) -> RecordPins:
        return RecordPins(self.store, self.run_id)

    @property
    def state_path(self) -> Path:
        return self.store.record_path(self.run_id)

    def walk_settings(self) -> WalkSettings:
        env = self.node_env if not self.provider.info.ssh else create_env(self.node_env)
        settings = dataclasses.replace(
            self.settings.walk, env=env, ssh_public_key=self.ssh_public_key
        )
        return self.settings_override(settings) if self.settings_override else settings

    # -- the facts a run rebinds ----------------------------------------------------------
    def use_settings(self, settings: RunSettings) -> None:
        self._rebind(settings=settings)

    def use_node_env(self, env: Mapping[str, str]) -> None:
        self._rebind(node_env=dict(env))

    def use_identity(self, identity: SshIdentity) -> None:
        self._rebind(identity=identity, ssh_public_key=identity.public_openssh)

    def adopt_run(self, run_id: str) -> None:
        """An earlier run's id (a re-attach continues its record)."""
        self._rebind(run_id=run_id)

    def use_keys(self, api_key: str, rpc_token: str) -> None:
        """The endpoint key and RPC token of an adopted run (its agent checks them)."""
        self.redactor.add(api_key)
        self.redactor.add(rpc_token)
        self._rebind(api_key=api_key, rpc_token=rpc_token)

    def note_vram_need(self, mib: int, kv_slot_mib: int = 0) -> None:
        """The fit's need per node, read: the node gets it (every layer on a GPU that holds
        it, `--fit on` on one that does not: mvp_tui/node/offload.py), and one slot's KV cache
        (the node adds slots while its memory holds them: mvp_tui/node/slots.py)."""
        need = AgentEnv(vram_need_mib=mib, kv_slot_mib=kv_slot_mib).to_env(
            ("vram_need_mib", "kv_slot_mib"))
        self._rebind(vram_need_mib=mib, kv_slot_mib=kv_slot_mib,
                     node_env={**self.node_env, **need})

    def note_port_taken(self, port: int) -> None:
        self._rebind(port_taken=port)

    def note_port_asked(self, port: int) -> None:
        self._rebind(local_port_asked=port)


@dataclass(eq=False)
class RunLeases:
    """The leases of a run: the offers of its last walk, the lease of the current attempt,
    and those of earlier (failed or lost) attempts, still counted in spend and hours."""

    offers: dict[str, Offer] = field(default_factory=dict)  # by id
    lease_record: LeaseRecord | None = None
    past: list[LeaseRecord] = field(default_factory=list)

    def use_offers(self, offers: dict[str, Offer]) -> None:
        self.offers = offers

    def hold(self, lease: LeaseRecord | None) -> None:
        self.lease_record = lease

    def retire(self, kept: LeaseRecord | None) -> None:
        """The current attempt's lease is done with (destroyed, or being): kept in `past`."""
        if kept is not None:
            self.past.append(kept)
        self.lease_record = None

    def require(self) -> LeaseRecord:
        if self.lease_record is None:
            raise RunFailed("no lease is running: lease an offer first")
        return self.lease_record

    def offer_of(self, lease: LeaseRecord | None) -> Offer | None:
        return self.offers.get(lease.offer_id or "") if lease is not None else None
