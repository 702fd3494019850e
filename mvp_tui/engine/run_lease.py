"""Leasing (`Leasing`): the SSH identity and account key, a provider's network volume,
the walk (one node or a cluster), and earlier runs' leases (reconcile, down, adopt).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mvp_tui.config import Config
from mvp_tui.config.schema import BY_DOTTED
from mvp_tui.engine.cluster import Cluster
from mvp_tui.engine.context import RunContext, RunLeases
from mvp_tui.engine.events import AccountKeyReady
from mvp_tui.engine.failures import RunFailed
from mvp_tui.engine.run_bringup import NodeLink
from mvp_tui.engine.run_core import node_env_for
from mvp_tui.engine.settings import volume_settings
from mvp_tui.lease.endpoint_record import load_endpoint
from mvp_tui.lease.events import LeaseRunning, VolumeMounted
from mvp_tui.lease.restart import DownReport, OpenLease, down, reconcile_open_runs
from mvp_tui.lease.settings import WalkSettings
from mvp_tui.lease.volumes import VolumeRecord, record_volume
from mvp_tui.lease.walk import LeaseWalk, WalkResult
from mvp_tui.providers import registry
from mvp_tui.providers.base import Offer


class Leasing:
    """Leasing: the identity, volume, walk (one node or a cluster) and earlier-run steps."""

    def __init__(
        self, ctx: RunContext, leases: RunLeases, cluster: Cluster, link: NodeLink
    ) -> None:
        self.ctx = ctx
        self.leases = leases
        self.cluster = cluster
        self.link = link

    async def prepare_ssh_identity(self) -> None:
        """Load the SSH key and register its public half with the provider (before create)."""
        if not self.ctx.provider.info.ssh:
            return
        from mvp_tui.ssh.identity import load_identity

        ssh = self.ctx.settings.ssh
        identity = await load_identity(ssh.identity_path, config_key=ssh.identity_key)
        self.ctx.use_identity(identity)
        registered_now = await self.ctx.provider.ensure_ssh_key(identity.public_openssh)
        if registered_now is not None:
            self._account_key_ready(str(identity.path), identity.fingerprint, registered_now)
        await self._prepare_volume()

    def _account_key_ready(self, path: str, fingerprint: str, registered_now: bool) -> None:
        """Say the seed's line: which identity the account holds, by its fingerprint."""
        name = self.ctx.provider.info.name
        kind = registry.find(name)  # the seed's name for it in its account-key line
        seed_name = kind.seed_name if kind and kind.seed_name else name
        line = (
            f"{seed_name} SSH identity {path} fingerprint {fingerprint} "
            "registered for account"
        )
        self.ctx.log(line)
        self.ctx.emit(
            AccountKeyReady(
                at=self.ctx.clock(),
                run_id=self.ctx.run_id,
                provider=name,
                identity=path,
                fingerprint=fingerprint,
                registered_now=registered_now,
                line=line,
            )
        )

    async def _prepare_volume(self) -> None:
        """A provider's network volume for the model cache ([runpod] network_volume), found
        or created before the first create, recorded for `ls` (it bills by the month) and
        said as an event."""
        volume = await self.ctx.provider.prepare_volume()
        settings = volume_settings(self.ctx.config)
        if volume is None or settings is None:
            return
        record = VolumeRecord(
            provider=self.ctx.config.provider, volume_id=volume.id, name=volume.name,
            size_gb=volume.size_gb, data_center=volume.data_center,
            usd_per_gb_month=settings.usd_per_gb_month, last_run=self.ctx.run_id,
        )
        record_volume(self.ctx.config.state_dir, record)
        self.ctx.emit(
            VolumeMounted(
                at=self.ctx.clock(), run_id=self.ctx.run_id, provider=self.ctx.config.provider,
                volume_id=volume.id, name=volume.name, size_gb=volume.size_gb,
                data_center=volume.data_center, usd_per_month=round(record.usd_per_month, 4),
            )
        )

    async def lease(self, offers: Sequence[Offer]) -> WalkResult:
        self.leases.use_offers({o.offer_id: o for o in offers})
        await self._read_local_need()
        if self.cluster.settings.multi:
            ssh = self.ctx.provider.info.ssh
            result = await self.cluster.lease(
                offers, self.ctx.walk_settings(), self, self.link if ssh else None
            )
        else:
            result = await self.walk(offers, self.ctx.walk_settings())
        self.leases.hold(result.lease)
        return result

    async def _read_local_need(self) -> None:
        """A model file on this machine: its fit, read before the lease when the board has
        not (a headless run), so the node asks for every layer where it fits. A hub model's
        is read only when the board asks: no extra hub request here (unknown: `--fit on`)."""
        local = self.ctx.settings.model.gguf_local_path
        if self.ctx.vram_need_mib or local is None or not local.is_file():
            return
        from mvp_tui.engine.model_need import ModelNeedError, read_model_need

        try:
            need = await read_model_need(self.ctx.settings.model,
                                         nodes=self.ctx.config.settings.runtime.nodes,
                                         environ=self.ctx.environ)
        except (ModelNeedError, OSError):
            return  # unknown: the node asks `--fit on`
        self.ctx.note_vram_need(need.per_node_mib, need.kv_slot_mib)

    async def walk(self, offers: Sequence[Offer], settings: WalkSettings) -> WalkResult:
        walk = LeaseWalk(
            self.ctx.provider,
            self.ctx.store,
            self.ctx.sink,
            settings,
            self.ctx.clock,
            run_id=self.ctx.run_id,
            config=self._redacted_config(),
            redact=self.ctx.redactor,
        )
        return await walk.run(offers)

    def _redacted_config(self) -> dict[str, object]:
        return recorded_config(self.ctx.config)

    async def earlier_leases(self) -> list[OpenLease]:
        """Leases of earlier runs of this provider that may still exist (the provider is
        asked; those it confirms gone are closed in their records)."""
        found = await reconcile_open_runs(
            self.ctx.provider, self.ctx.store, self.ctx.clock, self.ctx.walk_settings(),
            self.ctx.sink,
        )
        return [o for o in found if o.exists is not False and o.run_id != self.ctx.run_id]

    async def down_earlier(self, run_ids: Sequence[str]) -> DownReport:
        """Tear down, confirmed, every lease of these earlier runs."""
        reports = [
            await down(self.ctx.provider, self.ctx.store, run_id, self.ctx.sink,
                       self.ctx.walk_settings(), self.ctx.clock)
            for run_id in dict.fromkeys(run_ids)
        ]
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
        if self.leases.lease_record is not None:
            raise RunFailed("this run already holds a lease; tear it down before re-attaching")
        nodes = {x.node_id for x in self.ctx.store.load(earlier.run_id).open_leases()}
        if len(nodes) > 1:  # its workers' sessions would not be re-made
            raise RunFailed(
                f"run {earlier.run_id} holds leases of {len(nodes)} nodes: a multi-node run "
                f"cannot be re-attached; end it with `mvp-tui down {earlier.run_id}`"
            )
        self.ctx.adopt_run(earlier.run_id)
        # The agent on the node checks the key it was started with: the earlier run's.
        endpoint = load_endpoint(self.ctx.store, earlier.run_id)
        if endpoint is not None:
            # the tools' RPC token too
            self.ctx.use_keys(endpoint.api_key, endpoint.rpc_token or self.ctx.rpc_token)
        self.ctx.use_node_env(node_env_for(self.ctx))
        self.leases.hold(earlier.lease)
        lease, ssh = earlier.lease, earlier.lease.ssh
        self.link.adopt(endpoint, lease)
        # Announced like a fresh lease, dated from when it first ran, so spend and the
        # quit guard count it from the start.
        self.ctx.emit(
            LeaseRunning(
                at=lease.running_at or self.ctx.clock(),
                run_id=self.ctx.run_id,
                provider_id=lease.provider_id or "",
                label=lease.label,
                host=ssh.host if ssh else "",
                port=ssh.port if ssh else 0,
                user=ssh.user if ssh else "",
                via=ssh.via if ssh else "none",
                after_s=0.0,
                price_per_hour=lease.price_per_hour,
                created_at=lease.created_at,
            )
        )


def recorded_config(config: Config) -> dict[str, object]:
    """The config as the run record keeps it: a set value of every key its spec declares
    `secret` as `<redacted>` (config/sections/), paths as text."""
    kept = {
        key: ("<redacted>" if _secret(key) and value else _plain(value))
        for key, value in config.values.items()
    }
    # The deadline the node was given, not the key as written (unset means 12 h on a
    # rented provider): `mvp-tui ls` reads it from here.
    kept["limits.max_hours"] = config.max_hours or 0.0
    return kept


def _secret(key: str) -> bool:
    spec = BY_DOTTED.get(key)
    return spec is not None and spec.secret


def _plain(value: object) -> object:
    if isinstance(value, Path):
        return str(value)
    return value
