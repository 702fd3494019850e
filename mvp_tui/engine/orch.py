"""The engine's own channels: each step of the run as the seed's `mvp.orch.bootstrap` phases
(started / ready / failed), provisioning events, and prompt records on `mvp.orch.prompt`.

`OrchTap` sits between the engine and its sink: every event still goes to the sink, and the
ones that mark a step of the run are also written as frames, so the Channels pane and the
archive show the run's checklist without a second source of truth.
"""

from __future__ import annotations

import contextlib
import re
import zlib
from typing import Any

from mvp_tui.datastream.channels import LogStream
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.datastream.records import OrchestratorEmitter, ProvisionEventKind
from mvp_tui.engine.events import NodeFailed, NodeReady, OffersListed, RunFinished, RunStarted
from mvp_tui.events import EngineEvent, EventSink
from mvp_tui.lease import events as lease
from mvp_tui.prompt.channel import orch_prompt_records
from mvp_tui.secrets import Redactor
from mvp_tui.ssh import events as ssh

_GENERATED = re.compile(r"^r-([0-9a-f]{8})$")


def run_number(run_id: str) -> int:
    """The run as the seed's numeric run id (stream lifetimes and record fields are u64):
    a seed config's number as it is, the hex of a generated id, else a stable CRC."""
    if run_id.isascii() and run_id.isdigit():
        return int(run_id)
    match = _GENERATED.match(run_id)
    return int(match.group(1), 16) if match else zlib.crc32(run_id.encode())


class OrchTap:
    """An EventSink that forwards every event and writes run steps onto the hub."""

    def __init__(
        self, sink: EventSink, hub: ChannelHub, *, run_id: str, node_id: int, redactor: Redactor
    ) -> None:
        self._sink = sink
        self._node_id = node_id
        self._number = run_number(run_id)
        self.emitter = OrchestratorEmitter(
            hub, run_id=self._number, node_id=node_id, redactor=redactor
        )
        self._ssh_started = False

    def __call__(self, event: EngineEvent) -> None:
        self._sink(event)
        try:
            self._record(event)
        except Exception as exc:  # a record that cannot be written must never stop the run
            with contextlib.suppress(Exception):
                self.log(f"could not record {event.kind}: {type(exc).__name__}: {exc}")

    def log(self, line: str) -> None:
        """One line of the engine's own on the node's provider channel."""
        self.emitter.emit_log(LogStream.PROVIDER, line)

    def _phase(self, phase: str, status: str, **detail: Any) -> None:
        self.emitter.emit_bootstrap(phase, status, detail)

    def _record(self, event: EngineEvent) -> None:
        e = self.emitter
        if isinstance(event, RunStarted):
            self._phase("config", "ready", provider=event.provider, profile=event.profile)
        elif isinstance(event, OffersListed):
            self._phase("offers", "ready", provider=event.provider, count=event.count)
        elif isinstance(event, lease.AttemptStarted):
            self._phase("lease", "started", offer_id=event.offer_id, label=event.label,
                        price_per_hour=event.price_per_hour)  # fmt: skip
            e.emit_event(ProvisionEventKind.PROVISION_START, message=event.label)
        elif isinstance(event, lease.AttemptAnswered):
            self.log(f"create {event.label} on offer {event.offer_id}: {event.outcome}"
                     + (f" ({event.detail})" if event.detail else ""))  # fmt: skip
        elif isinstance(event, lease.LeaseRunning):
            self._phase("lease", "ready", provider_id=event.provider_id, via=event.via,
                        endpoint=f"{event.host}:{event.port}" if event.host else "")  # fmt: skip
            e.emit_event(ProvisionEventKind.NODE_LIVE, message=event.provider_id)
        elif isinstance(event, lease.WalkFailed):
            self._phase("lease", "failed", reason=event.reason)
            e.emit_event(ProvisionEventKind.PROVISION_FAILED, message=event.reason)
        elif isinstance(event, ssh.SshAttempt) and not self._ssh_started:
            self._ssh_started = True
            self._phase("ssh", "started", target=event.target)
        elif isinstance(event, ssh.AgentStarted):
            self._phase("ssh", "ready", agent_pid=event.pid)
        elif isinstance(event, NodeReady):
            self._phase("weights", "ready", model_id=event.model_id, engine=event.engine,
                        local_url=event.local_url, load_ms=event.load_ms)  # fmt: skip
        elif isinstance(event, NodeFailed):
            self._phase("weights", "failed", reason=event.reason, fix=event.fix)
        elif isinstance(event, lease.LeaseDeleting):
            self._phase("teardown", "started", provider_id=event.provider_id)
        elif isinstance(event, lease.LeaseDeleted):
            self._phase("teardown", "ready", provider_id=event.provider_id,
                        uptime_s=event.uptime_s, spend_usd=event.spend_usd)  # fmt: skip
            e.emit_event(ProvisionEventKind.NODE_STOPPED, message=event.provider_id)
        elif isinstance(event, lease.LeaseDeleteUnconfirmed):
            self._phase("teardown", "failed", provider_id=event.provider_id, reason=event.reason)
        elif isinstance(event, RunFinished):
            status = "ready" if event.exit_code == 0 else "failed"
            self._phase("orch_exit", status, exit_code=event.exit_code, reason=event.reason)
        else:
            for record in orch_prompt_records(event, run_id=self._number, node_id=self._node_id):
                e.emit_prompt(int(record.get("request_id", 0)), str(record["phase"]),
                              record["status"], record.get("detail") or {})  # fmt: skip
