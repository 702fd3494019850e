"""A replay's engine events, read back from the archive's frames.

A live run's engine facts reach the panes as engine events through the engine port; an
archive holds those steps as frames instead (the orchestrator's `mvp.orch.bootstrap` lease,
SSH, host key, weights and teardown phases, its `create … on offer …: outcome` lines on the
provider log channel, and `mvp.orch.prompt` records). This is the one adapter that turns
them back into the same events, which then go through the same port (`engine/ui_port.py`),
so a replay fills every pane the archive has data for, by the routes a live run takes.
Answer text is never archived: a replayed prompt says so.

Frame fields come from a file: only typed values are used, texts are cleaned by the panes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mvp_tui.datastream import MVP_ORCH_BOOTSTRAP, ChannelHub
from mvp_tui.datastream.channels import MVP_ORCH_PROMPT, NODE_LOG_PREFIX
from mvp_tui.engine.events import NodeFailed, NodeReady
from mvp_tui.events import EngineEvent
from mvp_tui.lease import events as lease
from mvp_tui.prompt import events as prompt
from mvp_tui.ssh import events as ssh

NOT_ARCHIVED = "*(the answer's text is not archived; only its size and timings)*"
_CREATE_LINE = re.compile(r"^create (\S+) on offer (\S+): ([a-z_]+)(?: \((.*)\))?$", re.S)
# The seed's phase names (mvp.orch.bootstrap) for what earlier archives called otherwise.
_OLD_NAMES = {"lease": "provider_start", "teardown": "provider_stop", "weights": "weights_loaded"}


def _str(value: object, default: str = "") -> str:
    return value if isinstance(value, str) else default


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _int(value: object, default: int = 0) -> int:
    number = _num(value)
    return int(number) if number is not None else default


@dataclass(slots=True)
class _Walk:
    """What the lease steps so far said (a running lease's phase names no label or price)."""

    label: str = ""
    offer_id: str = ""
    price: float = 0.0
    started_at: float = 0.0
    attempts: int = 0
    answered: set[str] = field(default_factory=set)
    provider_id: str = ""
    target: str = ""  # the SSH target its `ssh` phase named


class ArchiveEvents:
    """Polls a replay's hub; `poll()` returns (the hub restarted, new events in order)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._version = -1
        self._epoch = -1
        self._positions: dict[str, int] = {}
        self._walk = _Walk()
        self._run = "replay"
        self._deltas: set[int] = set()

    def poll(self, hub: ChannelHub) -> tuple[bool, list[EngineEvent]]:
        if hub.version == self._version:
            return False, []
        self._version = hub.version
        restarted = hub.epoch != self._epoch
        if restarted:  # a seek back: the hub was refilled from the start
            self._epoch, self._positions = hub.epoch, {}
            self._walk, self._deltas = _Walk(), set()
        frames = []
        for channel in self._channels(hub):
            tail = hub.tail(channel, self._positions.get(channel, -1))
            frames += [(f.position, channel, f.payload) for f in tail.frames]
            if tail.last_position >= 0:
                self._positions[channel] = tail.last_position
        events: list[EngineEvent] = []
        # Per channel in order; across channels the lease steps come first (a create's line
        # and its phase are written together by one event).
        for _, channel, payload in frames:
            events += self._events(channel, payload)
        return restarted, events

    @staticmethod
    def _channels(hub: ChannelHub) -> list[str]:
        names = [c for c in (MVP_ORCH_BOOTSTRAP, MVP_ORCH_PROMPT) if hub.has_channel(c)]
        logs = [c for c in hub.channels() if c.startswith(NODE_LOG_PREFIX)]
        return names + [c for c in logs if c.endswith(".provider")]

    def _events(self, channel: str, payload: bytes) -> list[EngineEvent]:
        try:
            value = json.loads(payload)
        except ValueError:
            return []
        if not isinstance(value, dict):
            return []
        if channel == MVP_ORCH_BOOTSTRAP:
            return self._phase(value)
        if channel == MVP_ORCH_PROMPT:
            return self._prompt(value)
        line = value.get("line")
        text = _str(line.get("line")) if isinstance(line, dict) else ""
        return self._create_line(text)

    # -- leases ---------------------------------------------------------------------------
    def _phase(self, value: Mapping[str, Any]) -> list[EngineEvent]:
        now, walk = self._clock(), self._walk
        phase, status = _str(value.get("phase")), _str(value.get("status"))
        raw = value.get("detail")
        detail: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
        run = self._run = str(value.get("run_id", self._run))
        provider_id = _str(detail.get("provider_id"))
        phase = _OLD_NAMES.get(phase, phase)  # archives written before the seed's names
        if phase == "provider_start" and status == "started":
            walk.label, walk.offer_id = _str(detail.get("label")), _str(detail.get("offer_id"))
            walk.price = _num(detail.get("price_per_hour")) or 0.0
            walk.started_at, walk.attempts = now, walk.attempts + 1
            started = lease.AttemptStarted(
                at=now, run_id=run, label=walk.label, offer_id=walk.offer_id, gpu_name="",
                price_per_hour=walk.price, attempt=walk.attempts,
            )
            return [started]
        if phase == "provider_start" and status == "ready":
            walk.provider_id = provider_id
            host, _, port = _str(detail.get("endpoint")).rpartition(":")
            out: list[EngineEvent] = []
            if walk.label not in walk.answered:
                out.append(lease.AttemptAnswered(at=now, run_id=run, label=walk.label,
                                                 offer_id=walk.offer_id, outcome="created",
                                                 http_status=None, detail="",
                                                 provider_id=provider_id))
            out.append(lease.LeaseRunning(at=now, run_id=run, provider_id=provider_id,
                                          label=walk.label, host=host,
                                          port=int(port) if port.isdigit() else 0, user="",
                                          via=_str(detail.get("via"), "none"),
                                          after_s=max(0.0, now - walk.started_at),
                                          price_per_hour=walk.price))
            return out
        if phase == "provider_start" and status == "failed":
            reason = _str(detail.get("error")) or _str(detail.get("reason"), "no lease")
            return [lease.WalkFailed(at=now, run_id=run, failure=lease.WalkFailure.EXHAUSTED,
                                     reason=reason,
                                     attempts=walk.attempts)]
        if phase == "provider_stop" and status == "started":
            return [lease.LeaseDeleting(at=now, run_id=run, provider_id=provider_id,
                                        reason=lease.DeleteReason.REQUESTED)]
        if phase == "provider_stop" and status == "ready":
            return [lease.LeaseDeleted(at=now, run_id=run, provider_id=provider_id,
                                       uptime_s=_num(detail.get("uptime_s")) or 0.0,
                                       spend_usd=_num(detail.get("spend_usd")) or 0.0)]
        if phase == "provider_stop" and status == "failed":
            reason = _str(detail.get("error")) or _str(detail.get("reason"))
            return [lease.LeaseDeleteUnconfirmed(at=now, run_id=run, provider_id=provider_id,
                                                 reason=reason)]
        if phase in ("ssh", "host_key") or status == "failed":
            return self._node_phase(phase, status, detail, now)
        if phase == "weights_loaded" and status == "ready":
            return [NodeReady(at=now, run_id=run, model_id=_str(detail.get("model_id")),
                              engine=_str(detail.get("engine")),
                              local_url=_str(detail.get("local_url")),
                              load_ms=_int(detail.get("load_ms")) or None)]
        return []

    def _node_phase(
        self, phase: str, status: str, detail: Mapping[str, Any], now: float
    ) -> list[EngineEvent]:
        """The node's bring-up as the engine told it: SSH connected, the agent's pid, the
        host key, or why the node was given up."""
        walk, key = self._walk, self._walk.provider_id
        if phase == "ssh" and status == "started":
            walk.target = _str(detail.get("target"))
        elif phase == "ssh" and status == "ready":
            connected = ssh.SshAttempt(at=now, lease_key=key, attempt=1, target=walk.target,
                                       outcome=ssh.AttemptOutcome.CONNECTED)
            pid = _int(detail.get("agent_pid"))
            return [connected, ssh.AgentStarted(at=now, lease_key=key, pid=pid, remote_dir="",
                                                resumed=detail.get("resumed") is True)]
        elif phase == "host_key" and status == "ready":
            return [ssh.HostKeyPinned(at=now, lease_key=key,
                                      fingerprint=_str(detail.get("fingerprint")))]
        elif status == "failed" and phase in ("node_runtime_ready", "weights_loaded"):
            reason = _str(detail.get("error")) or "the node cannot serve"
            return [NodeFailed(at=now, run_id=self._run, reason=reason,
                               fix=_str(detail.get("fix")))]
        return []

    def _create_line(self, text: str) -> list[EngineEvent]:
        """`create LABEL on offer ID: OUTCOME (DETAIL)`: the answers that made no lease."""
        match = _CREATE_LINE.match(text)
        if match is None or match.group(3) == "created":
            return []  # a created lease is told by its "lease ready" phase (with its id)
        label, offer_id, outcome, detail = match.groups()
        self._walk.answered.add(label)
        return [lease.AttemptAnswered(at=self._clock(), run_id=self._run, label=label,
                                      offer_id=offer_id, outcome=outcome, http_status=None,
                                      detail=detail or "", provider_id=None)]

    # -- prompts ----------------------------------------------------------------------------
    def _prompt(self, value: Mapping[str, Any]) -> list[EngineEvent]:
        now = self._clock()
        phase, status = _str(value.get("phase")), _str(value.get("status"))
        raw = value.get("detail")
        detail: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
        pid = _int(value.get("request_id"))
        if phase == "prompt_work":
            rpc = detail.get("source") == prompt.PromptSource.RPC.value
            source = prompt.PromptSource.RPC if rpc else prompt.PromptSource.PANE
            return [prompt.PromptQueued(at=now, prompt_id=pid,
                                        text_chars=_int(detail.get("prompt_chars")),
                                        max_tokens=_int(detail.get("max_tokens")),
                                        position=_int(detail.get("position")),
                                        source=source)]
        if phase == "node_prompt_send":
            return [prompt.PromptStarted(at=now, prompt_id=pid)]
        if phase == "node_prompt_event" and detail.get("event") == "TextDelta":
            first = pid not in self._deltas
            self._deltas.add(pid)
            return [prompt.TextDelta(at=now, prompt_id=pid, text=NOT_ARCHIVED if first else "")]
        if phase == "node_prompt_event" and detail.get("event") == "Done":
            tokens, elapsed = _int(detail.get("tokens_generated")), _int(detail.get("elapsed_ms"))
            ttft = _num(detail.get("ttft_ms"))
            rate = tokens / (elapsed / 1000) if elapsed > 0 else 0.0
            return [prompt.PromptDone(at=now, prompt_id=pid, final_text="",
                                      tokens_generated=tokens, elapsed_ms=elapsed,
                                      ttft_ms=int(ttft) if ttft is not None else None,
                                      tokens_per_s=rate)]
        if phase == "prompt_complete" and status == "failed":
            return [prompt.PromptFault(at=now, prompt_id=pid,
                                       fault_kind=prompt.FaultKind.ENGINE_REJECTED,
                                       error=_str(detail.get("error"), "failed"))]
        if phase == "prompt_complete" and status == "dropped":
            active = detail.get("was_active") is True
            return [prompt.PromptCancelled(at=now, prompt_id=pid, was_active=active)]
        return []
