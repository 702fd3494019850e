"""The node's dead-man's switch, as the engine sees it: what the agent is told (deadline,
silence limit, the provider API it may call with the instance's own key), the heartbeats an
attached run sends, and the agent's verdict on whether it can destroy its own instance.

The switch itself runs in the node agent (`mvp_tui/node/switch.py`); the account key never
reaches the node.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from mvp_tui.config import Config
from mvp_tui.config.sections.limits import BILLING_IDLE_STOP_MINS, BILLING_IDLE_TEARDOWN_MINS
from mvp_tui.datastream.frame import Frame
from mvp_tui.engine.events import IdleStopNotice, NodeBootGuard, NodeWatchdog
from mvp_tui.engine.failures import AttemptFailure, FailureScope, Stage
from mvp_tui.engine.limits import Limits
from mvp_tui.engine.verdict_wait import OPT_OUT, VERDICT_CHARS, verdict_line
from mvp_tui.node_protocol import (
    AGENT_CHANNEL_SUFFIX,
    NODE_AGENT_PHASE,
    NODE_AGENT_PROGRESS,
    WATCHDOG_PHASE,
    SwitchEnv,
    api_url_fields,
    parse_record,
    record_type,
)
from mvp_tui.untrusted import clean_line


@dataclass(frozen=True, slots=True)
class WatchdogSettings:
    """[limits] as the node's switch takes them; built once from the config (no field has a
    default of its own: what an unset key means is [limits]'s, BILLING_IDLE_*_MINS)."""

    # field -> the key it is copied from (tests/foundation/test_settings_from_sections.py)
    KEYS: ClassVar[Mapping[str, str]] = {"max_hours": "limits.max_hours"}

    provider: str
    max_hours: float | None  # None: no deadline
    idle_mins: float | None  # None: no silence switch
    required: bool  # a failed verdict stops the run
    # The provider's API URL for the node ([vastai] / [runpod] api_url); None: the node's
    # default.
    api_url: str | None
    # The boot guard's grace in whole seconds (providers/boot_guard.py; 0 = off); None where
    # no guard runs (local and Docker nodes do not bill).
    boot_grace_s: int | None
    # The idle stop: no request reached the engine for this long (counted on the node, kept
    # by a lease kept on purpose); None: off.
    idle_stop_mins: float | None

    @classmethod
    def from_config(cls, config: Config, *, billing: bool) -> WatchdogSettings:
        limits = config.settings.limits
        idle = limits.idle_teardown_mins
        if idle is None:
            idle = BILLING_IDLE_TEARDOWN_MINS if billing else None
        url_key = config.kind.api_url_key  # the API the node's switch calls, if any
        api_url = config.values.get(url_key) if url_key else None
        grace = limits.boot_grace_mins
        idle_stop = limits.idle_stop_mins
        if idle_stop is None:
            idle_stop = BILLING_IDLE_STOP_MINS if billing else None
        return cls(
            provider=config.provider,
            max_hours=Limits.from_config(config).max_hours,  # 0: none; unset: 12 h if rented
            idle_mins=idle or None,  # 0 turns the silence switch off (unset: see above)
            required=billing and limits.require_node_watchdog,
            api_url=api_url if isinstance(api_url, str) else None,
            # Whole seconds for the guard's sh (no float arithmetic); rounded up, so a grace
            # is never shorter than asked.
            boot_grace_s=math.ceil(grace * 60.0) if billing else None,
            idle_stop_mins=idle_stop or None,  # 0 turns it off
        )

    @property
    def heartbeat_every_s(self) -> float | None:
        """At least four heartbeats per silence window."""
        return self.idle_mins * 60.0 / 4.0 if self.idle_mins else None

    def node_env(self, lease_started_at: float | None = None) -> dict[str, str]:
        """The switch's and the boot guard's part of the node env (`SwitchEnv`)."""
        url = self.api_url or ""
        env = SwitchEnv(
            max_hours=self.max_hours or 0.0,
            idle_teardown_mins=self.idle_mins or 0.0,
            idle_stop_mins=self.idle_stop_mins or 0.0,
            lease_started_at=round(lease_started_at, 3) if lease_started_at is not None else 0.0,
            boot_grace_s=self.boot_grace_s,
            **api_url_fields(self.provider, url),  # the URL its switch calls, if it has one
        ).to_env()
        # Always named, so a node started over SSH (PID 1 with none) arms the right switch.
        env[SwitchEnv.env_name("watchdog_provider")] = self.provider
        return env


def watchdog_record(frame: Frame) -> dict[str, Any] | None:
    """The agent's `watchdog` phase record in a frame, if it is one."""
    if not frame.channel.endswith(AGENT_CHANNEL_SUFFIX):
        return None
    value = parse_record(frame.payload)
    if record_type(value) != NODE_AGENT_PHASE:
        return None
    return value if value.get("phase") == WATCHDOG_PHASE else None


def verdict_event(
    record: dict[str, Any], run_id: str, at: float, redact: Callable[[str], str] | None
) -> NodeWatchdog | None:
    detail = record.get("detail")
    detail = detail if isinstance(detail, dict) else {}
    status = record.get("status")
    if status == "started":
        kind = "fired"
    elif status == "failed":
        kind = "failed"
    elif status == "ready" and detail.get("destroyed") is True:
        kind = "destroyed"
    elif status == "ready" and detail.get("ended") is True:
        kind = "ended"
    elif status == "ready":
        kind = "ready"
    else:
        return None
    deadline, idle = detail.get("deadline_at"), detail.get("idle_teardown_mins")
    return NodeWatchdog(
        at=at,
        run_id=run_id,
        status=kind,
        reason=verdict_line(str(detail.get("reason") or ""), VERDICT_CHARS, redact),
        deadline_at=float(deadline) if isinstance(deadline, (int, float)) else None,
        idle_teardown_mins=float(idle) if isinstance(idle, (int, float)) else None,
        armed=detail.get("armed") is True,
        trigger=clean_line(str(detail.get("trigger") or ""), 20),
        scope="host" if detail.get("scope") == "host" else "run",
        destroy_proven=(
            detail["destroy_proven"] if isinstance(detail.get("destroy_proven"), bool) else None
        ),
        bills=detail.get("bills") is True,
    )


def no_verdict(run_id: str, at: float, reason: str) -> NodeWatchdog:
    """The failed verdict of a switch that said nothing in time: this host's failure (the
    switch bounds its own API retries well inside the wait, so silence is its agent stuck)."""
    return NodeWatchdog(at=at, run_id=run_id, status="failed", reason=reason, scope="host")


REFUSAL_FIX = (
    "fix the node image or its instance key, or set [limits] require_node_watchdog = false "
    "(env MVP_REQUIRE_NODE_WATCHDOG=false) to rent without it"
)


UNPROVEN_WORDS = (
    "the node's dead-man's switch proved only that its key reads the instance: {provider} "
    "documents no harmless write, and pod keys have been seen refused (HTTP 403) on their own "
    "delete. If it fires while this dashboard is gone it tries the delete, then podAction "
    "terminate and stop, and says the pod may still bill; [limits] unproven_node_switch = "
    '"refuse" refuses such a switch'
)


def switch_refusal(
    verdict: NodeWatchdog | None, guard: NodeBootGuard | None, *, refuse_unproven: bool = False
) -> AttemptFailure | None:
    """The attempt's failure when the boot guard or the switch failed (the guard first),
    else None. As the seed, a refusal stops the run: an instance key that is missing or lacks
    the right, or an image without the guard's tools, fails the same on every host. Only a
    switch that could not reach the provider's API, or said nothing in time, is this host's
    failure (`scope` "host"), and the walk tries the next offer."""
    if guard is not None and guard.status == "failed":
        what, reason, scope, kind = "boot guard", guard.reason, FailureScope.RUN, "guard_failed"
    elif verdict is not None and verdict.status == "failed":
        host = verdict.scope == "host"
        what, reason, kind = "dead-man's switch", verdict.reason, "switch_failed"
        scope = FailureScope.HOST if host else FailureScope.RUN
    elif refuse_unproven and verdict is not None and verdict.destroy_proven is False:
        what, scope, kind = "dead-man's switch", FailureScope.RUN, "switch_unproven"
        reason = 'its delete right is unproven and [limits] unproven_node_switch = "refuse"'
        return AttemptFailure(
            Stage.AGENT, scope, kind, f"the node's {what} cannot protect this lease: {reason}",
            'set [limits] unproven_node_switch = "warn" to rent with a read-proven switch',
        )
    else:
        return None
    # The opt-out in our own words: the node's reason is cut at 200 (seed 003).
    text = f"the node's {what} cannot protect this lease: {reason} ({OPT_OUT})"
    return AttemptFailure(Stage.AGENT, scope, kind, text, REFUSAL_FIX)


IDLE_STOP_STATES = {
    "idle_stop_armed": "armed",
    "idle_stop_warning": "warning",
    "idle_stop_postponed": "postponed",
}


def idle_stop_notice(frame: Frame, run_id: str, at: float) -> IdleStopNotice | None:
    """The agent's idle-stop progress (a `watchdog` NodeAgentProgress record), as an event."""
    if not frame.channel.endswith(AGENT_CHANNEL_SUFFIX):
        return None
    value = parse_record(frame.payload)
    if record_type(value) != NODE_AGENT_PROGRESS or value.get("phase") != WATCHDOG_PHASE:
        return None
    state = IDLE_STOP_STATES.get(str(value.get("state")))
    if state is None:
        return None
    return IdleStopNotice(
        at=at,
        run_id=run_id,
        state=state,
        idle_stop_mins=_number(value.get("idle_stop_mins")),
        stops_in_s=_number(value.get("stops_in_s")),
    )


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None
