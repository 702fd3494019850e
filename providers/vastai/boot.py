"""Vast's `onstart`: mvp-tui's start lines (the pinned host key's install, the boot guard,
the model prefetch) ahead of the user's own script, within Vast's cap."""

from __future__ import annotations

from mvp_tui.providers.boot_guard import guard_script
from mvp_tui.providers.prefetch import prefetch_script
from mvp_tui.providers.vastai.host_key import install_script
from mvp_tui.providers.vastai.node_api import GUARD

VAST_ONSTART_CAP = 4096  # Vast: args + args_str + onstart <= 4096 chars (reference/vastai.md §3)


class OnstartTooLong(ValueError):
    """The user's `[vastai] onstart` leaves the guard no room under Vast's cap."""


def vast_start_lines() -> str:
    """mvp-tui's own lines at the head of Vast's `onstart`: the pinned host key's install
    (quick, before anything else; silent without a key), then the boot guard, then the model
    prefetch (providers/prefetch.py: it needs the guard armed first)."""
    return install_script() + guard_script(GUARD) + prefetch_script()


def vast_onstart(user_onstart: str | None) -> str:
    """Vast's `onstart`: mvp-tui's start lines (a user script that blocks or exits cannot keep
    them from running), then the user's own text. A user script's `#!` line stays first."""
    guard = vast_start_lines()
    user = (user_onstart or "").strip("\n")
    if user.startswith("#!"):
        shebang, _, rest = user.partition("\n")
        merged = f"{shebang}\n{guard}{rest}\n" if rest else f"{shebang}\n{guard}"
    else:
        merged = f"{guard}{user}\n" if user else guard
    if len(merged) > VAST_ONSTART_CAP:
        room = VAST_ONSTART_CAP - len(guard) - 1
        raise OnstartTooLong(
            f"[vastai] onstart is {len(user)} characters; with mvp-tui's start lines (host "
            f"key, boot guard, model prefetch: {len(guard)}) it exceeds Vast's "
            f"{VAST_ONSTART_CAP}-character cap on onstart: "
            f"shorten it to at most {room} characters (e.g. fetch a script and run it)"
        )
    return merged
