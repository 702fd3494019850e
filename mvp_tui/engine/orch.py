"""The engine's own channels: each step of the run as the seed's `mvp.orch.bootstrap` phases
(started / ready / failed), provisioning events, prompt records on `mvp.orch.prompt`, and
the events the panes read, typed, on `mvp.orch.events` (`engine/event_records.py`: what a
replay reads back).

`OrchTap` sits between the engine and its sink: every event still goes to the sink, and the
ones that mark a step of the run are also written as frames, so the Channels pane and the
archive show the run's checklist without a second source of truth.

Phases, in the seed's names and order (docs/seed-compatibility.md): `config`,
`node_provisioner`, `node_spec`, `provider_start`, `node_runtime_ready`, `weights_loaded`,
`prompt_rpc`, `prompt_loop`, `serve_prompts`, `shutdown`, `provider_stop`, `orch_exit`. The
app's own steps are added phases: `offers`, `ssh`, `host_key`, `watchdog`.
"""

from __future__ import annotations

import contextlib
import re
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mvp_tui.config import Config
from mvp_tui.config.schema import KEYS
from mvp_tui.datastream.channels import LogStream
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.datastream.records import OrchestratorEmitter, ProvisionEventKind
from mvp_tui.engine.event_records import event_record
from mvp_tui.engine.events import (
    AttemptAbandoned,
    NodeFailed,
    NodeReady,
    NodeWatchdog,
    OffersListed,
    RunFinished,
    RunStarted,
    RunStateChanged,
)
from mvp_tui.engine.ui_port import UI_EVENTS
from mvp_tui.events import EngineEvent, EventSink
from mvp_tui.lease import events as lease
from mvp_tui.node_protocol import WEIGHTS_CHANNEL
from mvp_tui.prompt.channel import orch_prompt_records
from mvp_tui.prompt.events import (
    PromptQueued,
    PromptRpcFailed,
    PromptRpcListening,
    is_end,
)
from mvp_tui.providers import registry
from mvp_tui.providers.docker.spec import cached_model_target
from mvp_tui.secrets import Redactor
from mvp_tui.ssh import events as ssh

_GENERATED = re.compile(r"^r-([0-9a-f]{8})$")
# Keys whose value is the user's own text or a path: the orchestrator seed's config record
# shows only that one is set.
_HAS_ONLY = {"onstart", "bootstrap_command", "ssh_identity"}
# The seed's `serve_prompts` detail says how often its prompt loop polls; here prompts and
# their tokens are pushed (asyncio), nothing polls: 0.
PROMPT_POLL_INTERVAL_MS = 0
# Destroys that end the run (the seed's `provider_stop`), not the walk replacing a candidate.
_TEARDOWN = {lease.DeleteReason.REQUESTED, lease.DeleteReason.INTERRUPTED}


def run_number(run_id: str) -> int:
    """The run as the seed's numeric run id (stream lifetimes and record fields are u64):
    a seed config's number as it is, the hex of a generated id, else a stable CRC."""
    if run_id.isascii() and run_id.isdigit():
        return int(run_id)
    match = _GENERATED.match(run_id)
    return int(match.group(1), 16) if match else zlib.crc32(run_id.encode())


def provider_config_detail(config: Config) -> dict[str, Any]:
    """The selected provider's keys as the seed's `provider_config`: secrets and the user's
    scripts as `has_<key>` only, paths as text; Docker's GPUs and cached model under the
    seed's names (`docker_gpus`, `cached_model`), the cached model without its host path."""
    detail: dict[str, Any] = {}
    for spec in KEYS:
        if spec.scope != config.provider or spec.dotted not in config.values:
            continue
        value = config.values[spec.dotted]
        if spec.name in config.kind.seed_key_names:
            detail[config.kind.seed_key_names[spec.name]] = (
                _cached_model_detail(value) if spec.name == "cached_model_host_path" else value
            )
        elif spec.secret or spec.name in _HAS_ONLY:
            detail[f"has_{spec.name}"] = value is not None
        else:
            detail[spec.name] = (
                value
                if isinstance(value, (str, int, float, bool))
                else (None if value is None else str(value))
            )
    return detail


def _cached_model_detail(value: object) -> dict[str, Any] | None:
    """The seed's `CachedModelConfig::datastream_detail`: that a host file is mounted, its
    name and where the node sees it; the host path itself stays off the channel."""
    if value is None:
        return None
    target = cached_model_target(Path(str(value)))
    return {
        "host_path_present": True,
        "file": target.rsplit("/", 1)[-1],
        "container_path": target,
    }


def config_detail(
    config: Config, *, image: str, rpc_bind: str, ssh_public_fingerprint: str | None = None
) -> dict[str, Any]:
    """The seed's `config` phase detail (its field names), for this run's configuration;
    an SSH node's provider_config names its identity's fingerprint (the seed's
    `ssh_public_fingerprint`)."""
    provider_config = provider_config_detail(config)
    if ssh_public_fingerprint is not None:
        provider_config["ssh_public_fingerprint"] = ssh_public_fingerprint
    return {
        "config_profile": config.profile,
        "image": image,
        "provider": config.provider,
        "rpc_bind": rpc_bind,
        "model_id": config.settings.model.id,
        "stage_index": config.settings.runtime.stage_index,
        "layer_end_exclusive": config.settings.runtime.layer_end_exclusive,
        "relay_mode": config.settings.relay.mode,  # accepted, not built: SSH instead
        "provider_config": provider_config,
    }


class OrchTap:
    """An EventSink that forwards every event and writes run steps onto the hub."""

    def __init__(
        self,
        sink: EventSink,
        hub: ChannelHub,
        *,
        run_id: str,
        node_id: int,
        redactor: Redactor,
    ) -> None:
        self._sink = sink
        self._node_id = node_id
        self._number = run_number(run_id)
        self.emitter = OrchestratorEmitter(
            hub, run_id=self._number, node_id=node_id, redactor=redactor
        )
        self._provider = ""
        self._image = ""
        self._ssh_node = False
        self._config: dict[str, Any] = {}
        self._env_keys: tuple[str, ...] = ()
        self._max_tokens: int | None = None
        self._warnings: tuple[str, ...] = ()
        self._on_runtime_ready: Callable[[], None] | None = None
        self._ssh_started = False
        self._started_walk = False  # a create was attempted: the run waits for its node
        self._runtime_ready = False
        self._weights_loaded = False
        # A failed bring-up's reason: ProvisionFailed is the run's, written once the run
        # ends failed, never for a host the walk went past.
        self._failed_reason: str | None = None
        self._shutdown = False
        self._request_ids: dict[int, int] = {}  # queue prompt id -> the RPC client's id
        self._stopping: set[str] = set()  # leases destroyed by the run's teardown

    def describe(
        self,
        *,
        provider: str,
        image: str,
        ssh_node: bool,
        config: Mapping[str, Any],
        env_keys: tuple[str, ...],
        default_max_tokens: int,
        on_runtime_ready: Callable[[], None] | None = None,
        warnings: tuple[str, ...] = (),
    ) -> None:
        """What the records say about the run: set once the engine has built its parts.
        `on_runtime_ready` runs when the node's runtime is up (the seed's node joined);
        `warnings` are the config's lines the CLI printed on stderr before the run."""
        self._on_runtime_ready = on_runtime_ready
        self._warnings = warnings
        self._provider, self._image, self._ssh_node = provider, image, ssh_node
        self._config, self._env_keys = dict(config), env_keys
        self._max_tokens = default_max_tokens

    def __call__(self, event: EngineEvent) -> None:
        self._sink(event)
        try:
            if type(event) in UI_EVENTS:  # what a replay gives the panes, as it was
                self.emitter.emit_engine_event(event_record(event))
            self._record(event)
        except Exception as exc:  # a record that cannot be written must never stop the run
            with contextlib.suppress(Exception):
                self.log(f"could not record {event.kind}: {type(exc).__name__}: {exc}")

    def log(self, line: str) -> None:
        """One line of the engine's own on the node's provider channel."""
        self.emitter.emit_log(LogStream.PROVIDER, line)

    def stderr(self, line: str) -> None:
        """A line this process writes on its stderr, also on the node's `.stderr` channel:
        the seed's orchestrator stdio capture (`mvp.provisioning.logs.node.<N>.stderr`)."""
        self.emitter.emit_log(LogStream.STDERR, line)

    @property
    def waiting_for(self) -> str | None:
        """What the run waits for, in the seed's words (`shutdown requested while waiting
        for …`): `node ready` until the node's runtime is up, then `weights loaded`; None
        once the weights are loaded (or before the walk began)."""
        if self._weights_loaded or not self._started_walk:
            return None
        return "weights loaded" if self._runtime_ready else "node ready"

    def shutdown(self, source: str) -> None:
        """The seed's `shutdown` phase, once per run: who asked the run to end."""
        if self._shutdown:
            return
        self._shutdown = True
        with contextlib.suppress(Exception):
            self._phase("shutdown", "started", source=source)

    def _phase(self, phase: str, status: str, **detail: Any) -> None:
        self.emitter.emit_bootstrap(phase, status, detail)

    def _event(self, kind: ProvisionEventKind, message: str) -> None:
        self.emitter.emit_event(kind, provider=self._provider or None, message=message)

    def _record(self, event: EngineEvent) -> None:
        if isinstance(event, RunStarted):
            self._started(event)
        elif isinstance(event, OffersListed):
            self._phase("offers", "ready", provider=event.provider, count=event.count)
        elif isinstance(
            event,
            (lease.AttemptStarted, lease.AttemptAnswered, lease.LeaseRunning, lease.WalkFailed),
        ):
            self._walk(event)
        elif isinstance(
            event, (ssh.SshAttempt, ssh.HostKeyPinned, ssh.AgentStarted, ssh.AgentExited)
        ):
            self._node(event)
        elif isinstance(event, NodeWatchdog) and event.status in ("ready", "failed"):
            self._phase("watchdog", event.status, armed=event.armed, reason=event.reason)
        elif isinstance(event, (NodeReady, NodeFailed)):
            self._weights(event)
        elif isinstance(event, AttemptAbandoned):
            self._next_host()
        elif isinstance(event, RunStateChanged) and event.state == "tearing down":
            self._provision_failed()
        elif isinstance(event, PromptRpcListening):
            self._serving(event)
        elif isinstance(event, PromptRpcFailed):
            self._phase("prompt_rpc", "failed", addr=event.addr, error=event.error)
        elif isinstance(
            event, (lease.LeaseDeleting, lease.LeaseDeleted, lease.LeaseDeleteUnconfirmed)
        ):
            self._stop(event)
        elif isinstance(event, RunFinished):
            if event.exit_code != 0:
                self._provision_failed()
            if event.exit_code == 0:
                self._phase("orch_exit", "ready", result="ok")
            else:
                self._phase(
                    "orch_exit",
                    "failed",
                    result="failed",
                    exit_code=event.exit_code,
                    reason=event.reason,
                )
        else:
            self._prompt(event)

    def _started(self, event: RunStarted) -> None:
        self._phase("config", "ready", **self._config)
        for warning in self._warnings:  # printed by the CLI before the run, in either mode
            self.stderr(f"warning: {warning}")
        self._phase(
            "node_provisioner",
            "ready",
            provider=event.provider,
            owner="mvp-tui",
            config=self._config.get("provider_config", {}),
        )
        # The seed's order: one ProvisionStart for the run, then the node's spec.
        self._event(
            ProvisionEventKind.PROVISION_START, f"starting {self._provider} image {self._image}"
        )
        provider_config = self._config.get("provider_config", {})
        kind = registry.find(event.provider)  # its node spec's own env (Docker's GPUs)
        env_keys = {*self._env_keys, *(kind.node_spec_env if kind else ())}
        self._phase(
            "node_spec",
            "ready",
            provider=event.provider,
            image=self._image,
            relay_mode=self._config.get("relay_mode"),
            docker_gpus=provider_config.get("docker_gpus"),  # only Docker's config names it
            provider_config=provider_config,
            env_keys=sorted(env_keys),
        )

    def _next_host(self) -> None:
        """An attempt's host was given up: the next host's bring-up is recorded afresh (its
        `node_runtime_ready`, and what a stop on stdin says the run waits for)."""
        self._ssh_started = self._runtime_ready = self._weights_loaded = False

    def _provision_failed(self) -> None:
        """The seed's `Failed` observation, once, when the run ends on a failed bring-up."""
        reason, self._failed_reason = self._failed_reason, None
        if reason is not None:
            self._event(ProvisionEventKind.PROVISION_FAILED, reason)

    def _walk(self, event: EngineEvent) -> None:
        if isinstance(event, lease.AttemptStarted):
            self._started_walk = True
            self._failed_reason = None  # the walk went on past the failed host
            self._phase(
                "provider_start",
                "started",
                provider=self._provider,
                image=self._image,
                node_id=self._node_id,
                label=event.label,
                offer_id=event.offer_id,
                price_per_hour=event.price_per_hour,
            )
        elif isinstance(event, lease.AttemptAnswered):
            self.log(
                f"create {event.label} on offer {event.offer_id}: {event.outcome}"
                + (f" ({event.detail})" if event.detail else "")
            )
        elif isinstance(event, lease.LeaseRunning):
            endpoint = f"{event.host}:{event.port}" if event.host else ""
            self._phase(
                "provider_start",
                "ready",
                provider=self._provider,
                provider_id=event.provider_id,
                via=event.via,
                endpoint=endpoint,
            )
            self._event(ProvisionEventKind.NODE_LIVE, f"lease {event.provider_id} running")
            self._phase("node_runtime_ready", "started")
            if not self._ssh_node:  # the agent is this run's child process: it runs now
                self._runtime_ready_now(provider_id=event.provider_id)
        elif isinstance(event, lease.WalkFailed):
            self._phase("provider_start", "failed", provider=self._provider, error=event.reason)
            self._event(ProvisionEventKind.PROVISION_FAILED, event.reason)

    def _runtime_ready_now(self, **detail: Any) -> None:
        self._runtime_ready = True
        if self._on_runtime_ready is not None:
            self._on_runtime_ready()
        self._phase("node_runtime_ready", "ready", **detail)
        self._phase("weights_loaded", "started", model_id=self._config.get("model_id"))

    def _node(self, event: EngineEvent) -> None:
        if isinstance(event, ssh.SshAttempt) and not self._ssh_started:
            self._ssh_started = True
            self._phase("ssh", "started", target=event.target)
        elif isinstance(event, ssh.HostKeyPinned):
            self._phase("host_key", "ready", fingerprint=event.fingerprint)
        elif isinstance(event, ssh.AgentStarted):
            self._phase("ssh", "ready", agent_pid=event.pid)
            if not self._runtime_ready:
                self._runtime_ready_now(agent_pid=event.pid, resumed=event.resumed)
        elif isinstance(event, ssh.AgentExited):
            # The seed's `Exited` observation: the node's process ended on its own.
            self._event(
                ProvisionEventKind.NODE_STOPPED,
                f"node process exited with code {event.exit_code}"
                + (" before ready" if event.before_ready else ""),
            )

    def _weights(self, event: NodeReady | NodeFailed) -> None:
        if isinstance(event, NodeReady):
            self._weights_loaded = True
            self._phase(
                "weights_loaded",
                "ready",
                source_channel=WEIGHTS_CHANNEL,
                model_id=event.model_id,
                engine=event.engine,
                local_url=event.local_url,
                load_ms=event.load_ms,
            )
            return
        phase = (
            "node_runtime_ready"
            if not self._runtime_ready
            else "weights_loaded"
            if not self._weights_loaded
            else "serve_prompts"
        )
        self._phase(phase, "failed", error=event.reason, fix=event.fix)
        if not self._weights_loaded:  # the seed's `Failed`, if the run ends here
            self._failed_reason = event.reason

    def _serving(self, event: PromptRpcListening) -> None:
        addr = f"[{event.host}]:{event.port}" if ":" in event.host else f"{event.host}:{event.port}"
        self._phase("prompt_rpc", "ready", addr=addr, default_max_tokens=self._max_tokens)
        self._phase("prompt_loop", "ready", addr=addr)
        self._phase(
            "serve_prompts",
            "started",
            mode="single_active_prompt",
            poll_interval_ms=PROMPT_POLL_INTERVAL_MS,
        )

    def _stop(self, event: EngineEvent) -> None:
        if isinstance(event, lease.LeaseDeleting):
            if event.reason not in _TEARDOWN:  # the walk replacing a candidate: not the stop
                return
            self._stopping.add(event.provider_id)
            self.shutdown("run")  # a teardown nobody announced (a failure, --down-after)
            self._phase(
                "provider_stop",
                "started",
                provider=self._provider,
                node_id=self._node_id,
                provider_id=event.provider_id,
            )
        elif isinstance(event, lease.LeaseDeleted):
            if event.provider_id not in self._stopping:
                self._event(ProvisionEventKind.NODE_STOPPED, f"lease {event.provider_id} destroyed")
                return
            self._phase(
                "provider_stop",
                "ready",
                provider=self._provider,
                node_id=self._node_id,
                provider_id=event.provider_id,
                uptime_s=event.uptime_s,
                spend_usd=event.spend_usd,
            )
            self._event(ProvisionEventKind.NODE_STOPPED, f"lease {event.provider_id} destroyed")
        elif (
            isinstance(event, lease.LeaseDeleteUnconfirmed) and event.provider_id in self._stopping
        ):
            self._phase(
                "provider_stop",
                "failed",
                provider=self._provider,
                node_id=self._node_id,
                provider_id=event.provider_id,
                error=event.reason,
            )

    def _prompt(self, event: EngineEvent) -> None:
        if isinstance(event, PromptQueued) and event.request_id is not None:
            self._request_ids[event.prompt_id] = event.request_id
        records = orch_prompt_records(
            event, run_id=self._number, node_id=self._node_id, request_ids=self._request_ids
        )
        for record in records:
            self.emitter.emit_prompt(
                int(record["request_id"]),
                str(record["phase"]),
                record["status"],
                record.get("detail") or {},
            )
        if is_end(event):  # its records are out: the id is not needed again (nor kept)
            self._request_ids.pop(getattr(event, "prompt_id", -1), None)
