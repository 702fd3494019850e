"""The orchestrator's own records, in the seed's JSON shapes, and the emitter that sends them.

- `mvp.orch.bootstrap`: `{"type": "OrchBootstrap", "phase", "status", "run_id", "node_id",
  "detail"}` with status `started` | `ready` | `failed`;
- `mvp.orch.prompt`: `{"type": "OrchPromptEvent", "phase", "status", "run_id", "node_id",
  "request_id", "detail"}`;
- `mvp.provisioning.events`: `{"event": {"run_id", "node_id", "kind", "provider",
  "message"}}` with kind `ProvisionStart` | `NodeLive` | `ProvisionFailed` | `NodeStopped`;
- `mvp.provisioning.logs.node.<N>.<kind>`: `{"line": {"run_id", "node_id", "stream",
  "line"}}` with stream `Stdout` | `Stderr` | `Provider`.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from typing import Any

from mvp_tui.datastream.channels import (
    MVP_ORCH_BOOTSTRAP,
    MVP_ORCH_EVENTS,
    MVP_ORCH_PROMPT,
    MVP_PROVISIONING_EVENTS,
    LogStream,
    node_log_channel,
)
from mvp_tui.datastream.frame import Frame, orchestrator_stream
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.secrets import Redactor

ORCHESTRATOR_SOURCE = "orchestrator"


class StepStatus(enum.Enum):
    """Where a bootstrap phase or prompt step stands (the seed's status words)."""

    STARTED = "started"
    READY = "ready"
    FAILED = "failed"
    OBSERVED = "observed"  # prompt steps only
    DROPPED = "dropped"  # prompt steps only
    CANCELLED = "cancelled"  # prompt steps only; not the seed's (it cannot cancel a prompt)


def step_status(status: StepStatus | str) -> StepStatus:
    """`status` as a StepStatus; ValueError listing the valid words otherwise."""
    if isinstance(status, StepStatus):
        return status
    try:
        return StepStatus(status)
    except ValueError:
        words = ", ".join(s.value for s in StepStatus)
        raise ValueError(f"status {status!r} is not one of {words}") from None


BOOTSTRAP_STATUSES = frozenset({StepStatus.STARTED, StepStatus.READY, StepStatus.FAILED})


class ProvisionEventKind(enum.Enum):
    """A node's provisioning milestone on `mvp.provisioning.events`."""

    PROVISION_START = "ProvisionStart"
    NODE_LIVE = "NodeLive"
    PROVISION_FAILED = "ProvisionFailed"
    NODE_STOPPED = "NodeStopped"


def bootstrap_record(
    run_id: int, node_id: int, phase: str, status: StepStatus, detail: Mapping[str, Any]
) -> dict[str, Any]:
    """The seed's `OrchBootstrap` record; status must be started, ready or failed."""
    if status not in BOOTSTRAP_STATUSES:
        raise ValueError(
            f"bootstrap phase {phase!r} status {status.value!r}: a bootstrap status is "
            "started, ready or failed"
        )
    return {
        "type": "OrchBootstrap",
        "phase": phase,
        "status": status.value,
        "run_id": run_id,
        "node_id": node_id,
        "detail": dict(detail),
    }


def prompt_record(
    run_id: int,
    node_id: int,
    request_id: int,
    phase: str,
    status: StepStatus,
    detail: Mapping[str, Any],
) -> dict[str, Any]:
    """The seed's `OrchPromptEvent` record."""
    return {
        "type": "OrchPromptEvent",
        "phase": phase,
        "status": status.value,
        "run_id": run_id,
        "node_id": node_id,
        "request_id": request_id,
        "detail": dict(detail),
    }


def provision_event_record(
    run_id: int,
    node_id: int,
    kind: ProvisionEventKind,
    provider: str | None = None,
    message: str | None = None,
) -> dict[str, Any]:
    """The seed's `MvpProvisionEventRecord`: `{"event": ProvisionEvent}`."""
    return {
        "event": {
            "run_id": run_id,
            "node_id": node_id,
            "kind": kind.value,
            "provider": provider,
            "message": message,
        }
    }


def provision_log_record(run_id: int, node_id: int, stream: LogStream, line: str) -> dict[str, Any]:
    """The seed's `MvpProvisionLogRecord`: `{"line": ProvisionLogLine}`."""
    return {"line": {"run_id": run_id, "node_id": node_id, "stream": stream.value, "line": line}}


def encode_record(record: Mapping[str, Any]) -> bytes:
    """Compact JSON bytes, as serde_json writes them (UTF-8, no spaces)."""
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False, default=str).encode()


class OrchestratorEmitter:
    """The engine's writer of its own channels for one run (the seed's `OrchDatastream`).

    Every payload passes the run's Redactor before it reaches the hub (and the archive).
    """

    def __init__(
        self,
        hub: ChannelHub,
        *,
        run_id: int,
        node_id: int,
        redactor: Redactor | None = None,
        source: str = ORCHESTRATOR_SOURCE,
    ) -> None:
        self.hub = hub
        self.run_id = run_id
        self.node_id = node_id
        self.stream = orchestrator_stream(run_id)
        self.source = source
        self._redactor = redactor or Redactor()

    def emit_bootstrap(
        self, phase: str, status: StepStatus | str, detail: Mapping[str, Any] | None = None
    ) -> Frame:
        """A bootstrap phase `started`, `ready` or `failed`, with its detail."""
        step = step_status(status)
        record = bootstrap_record(self.run_id, self.node_id, phase, step, detail or {})
        return self._emit(MVP_ORCH_BOOTSTRAP, record)

    def emit_prompt(
        self,
        request_id: int,
        phase: str,
        status: StepStatus | str,
        detail: Mapping[str, Any] | None = None,
    ) -> Frame:
        """A prompt step (the seed's statuses include `observed` and `dropped`)."""
        step = step_status(status)
        record = prompt_record(self.run_id, self.node_id, request_id, phase, step, detail or {})
        return self._emit(MVP_ORCH_PROMPT, record)

    def emit_engine_event(self, record: Mapping[str, Any]) -> Frame:
        """One engine event's record (`engine/event_records.py`) on `mvp.orch.events`."""
        return self._emit(MVP_ORCH_EVENTS, record)

    def emit_event(
        self,
        kind: ProvisionEventKind,
        *,
        provider: str | None = None,
        message: str | None = None,
        node_id: int | None = None,
    ) -> Frame:
        node = self.node_id if node_id is None else node_id
        record = provision_event_record(self.run_id, node, kind, provider, message)
        return self._emit(MVP_PROVISIONING_EVENTS, record)

    def emit_log(self, stream: LogStream, line: str, *, node_id: int | None = None) -> Frame:
        """One of the engine's own lines on a node's log channel (the seed's stdio drain)."""
        node = self.node_id if node_id is None else node_id
        record = provision_log_record(self.run_id, node, stream, line)
        return self._emit(node_log_channel(node, stream), record)

    def _emit(self, channel: str, record: Mapping[str, Any]) -> Frame:
        payload = encode_record(record)
        if self._redactor:
            payload = self._redactor(payload.decode()).encode()
        return self.hub.publish(channel, payload, stream=self.stream, source=self.source)
