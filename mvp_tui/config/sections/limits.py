"""[limits]: what a run may cost and how long it may live, here and on the node."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from mvp_tui.config.spec import Section, key

# What an unset idle_teardown_mins / idle_stop_mins means on a billing provider (the keys'
# docs say it; the engine's WatchdogSettings applies it).
BILLING_IDLE_TEARDOWN_MINS = 20.0
BILLING_IDLE_STOP_MINS = 30.0
# What an unset max_hours means on a rented provider: every seed pod had a deadline, so a
# kept lease that a tool keeps busy (the idle stop never fires) still ends.
BILLING_MAX_HOURS = 12.0


@dataclass(frozen=True)
class LimitsSection(Section):
    """[limits]: spend, price and time limits, and the node's own switch."""

    NAME: ClassVar[str] = "limits"

    max_price_per_hour: float | None = key(
        None, "hide and refuse offers above this $/h; unset or 0 = no cap",
        env="MVP_MAX_PRICE_PER_HOUR", flag="--max-price-per-hour", minimum=0, zero_is_unset=True,
        example=0.8,
    )
    max_spend_usd: float | None = key(
        None, "tear down when a run's spend reaches this many USD; unset or 0 = no limit",
        env="MVP_MAX_SPEND_USD", flag="--max-spend-usd", minimum=0, zero_is_unset=True,
        example=5.0,
    )
    max_hours: float | None = key(
        None,
        (
            "tear down a lease after this many hours (the node enforces it too); unset = "
            f"{BILLING_MAX_HOURS:g} on rented providers (vastai, runpod), none elsewhere; 0 = no "
            "limit"
        ),
        env="MVP_MAX_HOURS", flag="--max-hours", minimum=0, example=4.0,
        note="The lease confirm, `mvp-tui ls` and the exit receipt show the deadline.",
    )
    idle_teardown_mins: float | None = key(
        None,
        (
            "the node destroys its own lease after this many minutes without a heartbeat from an "
            f"attached run (unset = {BILLING_IDLE_TEARDOWN_MINS:g} on billing providers; 0 = off)"
        ),
        env="MVP_IDLE_TEARDOWN_MINS", flag="--idle-teardown-mins", minimum=0, example=20.0,
        note="The node also enforces max_hours itself, dashboard or not (see "
        "docs/spend-safety.md, \"The node's dead-man's switch\").",
    )
    idle_stop_mins: float | None = key(
        None,
        (
            "the node destroys its own lease after this many minutes with no request to its model"
            " (counted on the node; a kept lease keeps it; unset = "
            f"{BILLING_IDLE_STOP_MINS:g} on billing providers; 0 = off)"
        ),
        env="MVP_IDLE_STOP_MINS", flag="--idle-stop-mins", minimum=0, example=30.0,
        note="A warning comes two minutes before; a prompt or a key in the dashboard postpones it.",
    )
    boot_grace_mins: float = key(
        20.0,
        (
            "a rented node destroys its own lease when no agent has attached this many minutes "
            "after its container started (the boot guard, armed by the create request; 0 = off)"
        ),
        env="MVP_BOOT_GRACE_MINS", flag="--boot-grace-mins", minimum=0,
        note="Fractions work (0.1 = 6 s).",
    )
    require_node_watchdog: bool = key(
        True,
        (
            "stop the run and destroy the lease when the node's dead-man's switch cannot reach "
            "its own instance with its key (a read, and on Vast a documented no-op change)"
        ),
        env="MVP_REQUIRE_NODE_WATCHDOG", flag="--require-node-watchdog",
    )
    unproven_node_switch: str = key(
        "warn",
        (
            "a switch whose delete right cannot be proven without deleting (RunPod documents no "
            "harmless write; pod keys have been seen refused with 403 on their own delete): "
            "warn and rent, or refuse the run"
        ),
        env="MVP_UNPROVEN_NODE_SWITCH", flag="--unproven-node-switch", choices=("warn", "refuse"),
    )
