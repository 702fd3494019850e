"""One model over several nodes, on llama.cpp's RPC backend.

A run with `[runtime] nodes` = N > 1 leases N nodes through the same walk: the N−1 workers
first (each runs `ggml-rpc-server` on its loopback under the node agent's worker role), then
the main node, whose `llama-server` gets `--rpc` with the workers' endpoints. The main's agent
reports ready only once its log shows model buffers on every worker; a worker that fails
(before or after) fails the run, and the teardown covers every lease of the run's record.

The layer split: with `[runtime] node_stages` (each node's seed `stage_index:
layer_end_exclusive`, main node first) the main keeps the first stage's layers and the
workers hold theirs in stage order (`-ngl` and `--tensor-split`); without it, the workers
hold all repeating layers, split by their free memory (llama.cpp's default).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

from mvp_tui.config import Config, ConfigError
from mvp_tui.datastream.frame import Frame, StreamId
from mvp_tui.errors import UserError
from mvp_tui.lease.records import LeaseRecord
from mvp_tui.lease.settings import WalkSettings
from mvp_tui.lease.walk import WalkResult
from mvp_tui.node_protocol import (
    RPC_SERVER_READY,
    WEIGHTS_CHANNEL,
    WORKER_FATAL,
    AgentEnv,
    RoleEnv,
    parse_record,
    record_type,
)
from mvp_tui.providers.base import Offer
from mvp_tui.untrusted import clean_line

if TYPE_CHECKING:  # asyncssh loads only when a rented node needs the tunnel key
    import asyncssh

STAGES_KEY = "[runtime] node_stages"

class Walker(Protocol):
    """Walks offers to a running lease (the run's `Leasing`)."""

    async def walk(self, offers: Sequence[Offer], settings: WalkSettings) -> WalkResult: ...


class WorkerStarter(Protocol):
    """Starts a rented worker's agent over SSH (its role env; the event set once it
    listens): the run's `NodeLink`."""

    async def start_worker(
        self, lease: LeaseRecord, role_env: Mapping[str, str], ready: asyncio.Event
    ) -> None: ...


# Writes one of the seed's bootstrap steps on `mvp.orch.bootstrap`: (phase, status, detail).
Phase = Callable[[str, str, Mapping[str, object]], object]


class Pins(Protocol):
    def get(self, lease_key: str) -> str | None: ...


class ClusterFailed(UserError):
    """A worker could not be leased or brought up; names the worker (a user's error: its
    text is the run's reason, as it is)."""


@dataclass(frozen=True, slots=True)
class Stage:
    """One node's pipeline stage: layers [previous stage's end, layer_end_exclusive)."""

    stage_index: int
    layer_end_exclusive: int


@dataclass(frozen=True, slots=True)
class Split:
    """What the main node's llama-server gets: `-ngl`, `--tensor-split` (empty: by memory),
    and the order of the workers in `--rpc` (positions in the run's worker list)."""

    gpu_layers: int
    tensor_split: str
    worker_order: tuple[int, ...]


def parse_stages(raw: Sequence[str], nodes: int, source: str) -> tuple[Stage, ...]:
    """`["0:6", "1:8"]` → stages, checked: one per node, distinct indexes, ends rising with
    the index, the main node (first) holding the first stage."""
    if not raw or nodes == 1:
        return ()
    where = f"{STAGES_KEY} = {list(raw)!r} (from {source})"
    if len(raw) != nodes:
        raise ConfigError(
            f"{where} gives {len(raw)} stages for [runtime] nodes = {nodes}; fix: one "
            "stage_index:layer_end_exclusive per node, main node first"
        )
    stages = []
    for item in raw:
        index, sep, end = item.partition(":")
        if not sep or not index.strip().isdigit() or not end.strip().isdigit():
            raise ConfigError(
                f'{where}: {item!r} is not stage_index:layer_end_exclusive; fix: e.g. "0:6"'
            )
        stages.append(Stage(int(index), int(end)))
    ordered = sorted(stages, key=lambda s: s.stage_index)
    if len({s.stage_index for s in stages}) != nodes:
        raise ConfigError(f"{where}: two nodes have the same stage_index; fix: one stage each")
    ends = [s.layer_end_exclusive for s in ordered]
    if ends[0] < 0 or any(b <= a for a, b in itertools.pairwise(ends)):
        raise ConfigError(
            f"{where}: layer_end_exclusive must rise with stage_index; fix: each stage ends "
            "after the one before it"
        )
    if ordered[0] != stages[0]:
        raise ConfigError(
            f"{where}: the main node (first) must serve the first stage: llama.cpp keeps the "
            "layers that are not offloaded on the main node, and they are the first ones"
        )
    return tuple(stages)


def rpc_split(stages: Sequence[Stage], workers: int) -> Split:
    """The llama-server flags that place each stage's layers on its node.

    llama.cpp keeps layers [0, n_layer + 1 − ngl) on the main node and spreads the rest,
    in order, over its devices (the RPC workers, in `--rpc` order) by the tensor-split
    proportions; the output layer (index n_layer) goes with the last stage."""
    if not stages:
        return Split(99, "", tuple(range(workers)))
    main, rest = stages[0], list(enumerate(stages[1:]))
    rest.sort(key=lambda item: item[1].stage_index)
    n_layer = max(s.layer_end_exclusive for s in stages)
    counts, start = [], main.layer_end_exclusive
    for _, stage in rest:
        counts.append(stage.layer_end_exclusive - start)
        start = stage.layer_end_exclusive
    counts[-1] += 1  # the output layer
    return Split(
        gpu_layers=n_layer + 1 - main.layer_end_exclusive,
        tensor_split=",".join(str(c) for c in counts),
        worker_order=tuple(position for position, _ in rest),
    )


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    """[runtime] nodes and node_stages, and how long a worker may take to come up."""

    # field -> the key it is copied from (tests/foundation/test_settings_from_sections.py)
    KEYS: ClassVar[Mapping[str, str]] = {
        "nodes": "runtime.nodes",
        "ready_timeout": "ssh.ready_timeout_secs",
    }

    nodes: int
    stages: tuple[Stage, ...]
    ready_timeout: float

    @property
    def multi(self) -> bool:
        return self.nodes > 1

    @classmethod
    def from_config(cls, config: Config) -> ClusterSettings:
        runtime = config.settings.runtime
        source = config.sources.get("runtime.node_stages") or "default"
        return cls(
            nodes=runtime.nodes,
            stages=parse_stages(list(runtime.node_stages), runtime.nodes, str(source)),
            ready_timeout=config.settings.ssh.ready_timeout_secs,
        )


@dataclass(frozen=True, slots=True)
class WorkerReady:
    node_id: int
    endpoint: str  # host:port as the worker sees it (loopback)
    engine_pid: int | None


class WorkerWatch:
    """A hub listener: each worker's `RpcServerReady` or `WorkerFatal`, by node id.

    A record counts for the node whose stream carried it (each rented node has its own
    session and stream), so no node can report for another; frames on a `shared` stream
    (one pipe for the agents of this machine) count for the node they name."""

    def __init__(self, redact: Callable[[str], str], shared: tuple[StreamId, ...] = ()) -> None:
        self._redact = redact
        self._shared = shared
        self.ready: dict[int, WorkerReady] = {}
        self.fatal: dict[int, str] = {}
        self.fatal_fix: dict[int, str] = {}  # what the worker says to do about it
        self.changed = asyncio.Event()
        self.listening: dict[int, asyncio.Event] = {}  # per worker, for its SSH session

    def ready_event(self, node_id: int) -> asyncio.Event:
        return self.listening.setdefault(node_id, asyncio.Event())

    def __call__(self, frame: Frame) -> None:
        if frame.channel != WEIGHTS_CHANNEL:
            return
        record = parse_record(frame.payload)
        if not isinstance(record.get("node_id"), int):
            return
        node, kind = record["node_id"], record_type(record)
        if frame.stream not in self._shared and frame.stream.node != str(node):
            return  # one node speaking for another
        if kind == RPC_SERVER_READY:
            pid = record.get("engine_pid")
            endpoint = clean_line(str(record.get("endpoint") or ""), 100, redact=self._redact)
            self.ready[node] = WorkerReady(node, endpoint, pid if isinstance(pid, int) else None)
            self.ready_event(node).set()
        elif kind == WORKER_FATAL:
            self.fatal[node] = clean_line(
                str(record.get("reason") or "failed"), 600, redact=self._redact
            )
            self.fatal_fix[node] = clean_line(str(record.get("fix") or ""), 600,
                                              redact=self._redact)
        else:
            return
        self.changed.set()

    async def until_ready(self, node_id: int) -> WorkerReady:
        while True:
            self.changed.clear()
            if node_id in self.fatal:
                raise ClusterFailed(
                    f"worker node {node_id} failed: {self.fatal[node_id]}",
                    fix=self.fatal_fix.get(node_id, ""),
                )
            if node_id in self.ready:
                return self.ready[node_id]
            await self.changed.wait()

    def frozen(self) -> list[str]:
        """Workers on this machine whose RPC server is stopped (SIGSTOP): named in a stall."""
        names = []
        for worker in self.ready.values():
            if worker.engine_pid is not None and _stopped(worker.engine_pid):
                names.append(f"worker node {worker.node_id} (RPC {worker.endpoint}) is stopped")
        return names


def _stopped(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :][:1] in (b"T", b"t")


class Cluster:
    """Leases a multi-node run's workers, then its main node, through the walk."""

    def __init__(
        self,
        settings: ClusterSettings,
        main_node_id: int,
        watch: WorkerWatch,
        phase: Phase | None = None,
    ) -> None:
        self.settings = settings
        self._phase = phase or (lambda *_: None)
        self.main_node_id = main_node_id
        self.watch = watch
        self.workers: list[WorkerReady] = []
        self.worker_leases: list[LeaseRecord] = []
        self._tunnel_key: asyncssh.SSHKey | None = None  # rented nodes: one key per run

    @property
    def worker_ids(self) -> list[int]:
        return [self.main_node_id + k for k in range(1, self.settings.nodes)]

    async def lease(
        self,
        offers: Sequence[Offer],
        base: WalkSettings,
        leasing: Walker,
        start_node: WorkerStarter | None = None,
    ) -> WalkResult:
        """Every worker leased and listening, then the main node leased with `--rpc` over
        them, each through `leasing`'s walk: the main's result (its lease is the run's
        serving one). `start_node` starts a rented worker's agent over SSH (a local node's
        agent starts with its lease)."""
        stages = self.settings.stages
        for position, node_id in enumerate(self.worker_ids):
            pubkey = self.tunnel_public_key() if start_node is not None else ""
            role = {
                **RoleEnv(role="worker", tunnel_pubkey=pubkey).to_env(("role",)),
                **AgentEnv(node_id=node_id).to_env(("node_id",)),
                **_stage_env(stages, position + 1),
            }
            self._phase("stage_provision", "started", {"node_id": node_id, "role": "worker"})
            worker = replace(base, node_id=node_id, env={**base.env, **role})
            result = await leasing.walk(offers, worker)
            if not result.ok or result.lease is None:
                reason = f"worker node {node_id} could not be leased: {result.reason}"
                self._phase("stage_provision", "failed", {"node_id": node_id, "reason": reason})
                raise ClusterFailed(reason)
            self.worker_leases.append(result.lease)
            self._phase(
                "stage_provision",
                "ready",
                {"node_id": node_id, "provider_id": result.lease.provider_id},
            )
            self.workers.append(await self._join(node_id, result.lease, role, start_node))
        main = self.main_role()
        route: dict[str, object] = {
            "rpc": ",".join(main.rpc_servers),
            "gpu_layers": main.gpu_layers,
        }
        self._phase("node_route", "ready", {**route, "tensor_split": main.tensor_split})
        return await leasing.walk(offers, replace(base, env={**base.env, **self.main_env()}))

    async def _join(
        self,
        node_id: int,
        lease: LeaseRecord,
        role: Mapping[str, str],
        start_node: WorkerStarter | None,
    ) -> WorkerReady:
        """The worker's agent started (rented) and its RPC server listening."""
        self._phase("node_join", "started", {"node_id": node_id})
        try:
            async with asyncio.timeout(self.settings.ready_timeout):
                if start_node is not None:
                    await start_node.start_worker(lease, role, self.watch.ready_event(node_id))
                ready = await self.watch.until_ready(node_id)
        except TimeoutError:
            reason = (
                f"worker node {node_id}'s RPC server did not listen within "
                f"{self.settings.ready_timeout:g} s; raise [ssh] ready_timeout_secs"
            )
            self._phase("node_join", "failed", {"node_id": node_id, "reason": reason})
            raise ClusterFailed(reason) from None
        except ClusterFailed as failed:
            self._phase("node_join", "failed", {"node_id": node_id, "reason": str(failed)})
            raise
        self._phase("node_join", "ready", {"node_id": node_id, "endpoint": ready.endpoint})
        return ready

    def main_role(self) -> RoleEnv:
        """The main node's role: `--rpc` over the workers, in the split's order."""
        split = rpc_split(self.settings.stages, len(self.workers))
        ordered = [self.workers[i] for i in split.worker_order]
        tunnels: tuple[str, ...] = ()
        if self._tunnel_key is not None:  # rented: each worker's RPC port through its sshd
            by_node = {x.node_id: x for x in self.worker_leases}
            tunnels = tuple(_ssh_target(by_node[w.node_id]) for w in ordered)
        return RoleEnv(
            role="main",
            rpc_servers=tuple(w.endpoint for w in ordered),
            rpc_nodes=tuple(str(w.node_id) for w in ordered),
            gpu_layers=split.gpu_layers,
            tensor_split=split.tensor_split or "",
            tunnels=tunnels,
        )

    def main_env(self) -> dict[str, str]:
        always = ("role", "rpc_servers", "rpc_nodes", "gpu_layers")
        return {**self.main_role().to_env(always), **_stage_env(self.settings.stages, 0)}

    def tunnel_public_key(self) -> str:
        """The run's tunnel key (made on first use; its private half stays in memory and
        reaches only the main node's agent, never a record or a log)."""
        if self._tunnel_key is None:
            import asyncssh

            self._tunnel_key = asyncssh.generate_private_key("ssh-ed25519", comment="mvp-rpc")
        return self._tunnel_key.export_public_key().decode().strip()

    def tunnel_secrets(self, pins: Pins) -> dict[str, str]:
        """What the main node's agent needs to open the tunnels: the private key and the
        workers' pinned host keys as known_hosts lines."""
        if self._tunnel_key is None:
            return {}
        known = []
        for lease in self.worker_leases:
            key = pins.get(lease.provider_id or "")
            if lease.ssh is not None and key:
                ssh = lease.ssh
                host = ssh.host if ssh.port == 22 else f"[{ssh.host}]:{ssh.port}"
                known.append(f"{host} {key.strip()}")
        secrets = RoleEnv(
            tunnel_key=self._tunnel_key.export_private_key().decode(),
            known_hosts="\n".join(known),
        )
        return secrets.to_env(("tunnel_key", "known_hosts"))

    def describe_stall(self, base: str) -> str:
        frozen = self.watch.frozen()
        return f"{base}: {'; '.join(frozen)}" if frozen else base


def _ssh_target(lease: LeaseRecord) -> str:
    if lease.ssh is None:
        raise ClusterFailed(f"worker lease {lease.provider_id} has no SSH endpoint")
    return f"{lease.ssh.user}@{lease.ssh.host}:{lease.ssh.port}"


def _stage_env(stages: Sequence[Stage], position: int) -> Mapping[str, str]:
    if not stages:
        return {}
    stage = stages[position]
    env = AgentEnv(stage_index=stage.stage_index, layer_end_exclusive=stage.layer_end_exclusive)
    return env.to_env(("stage_index", "layer_end_exclusive"))
