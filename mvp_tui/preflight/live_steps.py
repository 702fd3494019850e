"""`check --live`'s steps: the run's engine events, as they come, read as one line each
(what happened, whether it went as a canary needs) with the time since the check began and
what the run has cost so far. The events arrive as their JSON records (`EngineEvent.to_dict`),
the same records the facts (live_facts.py) are read from."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Record = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Step:
    """One step: `name` (short), `ok` (False: it went wrong), what was seen, when (seconds
    since the check began) and the run's spend then (USD, the ledger's estimate)."""

    name: str
    ok: bool
    detail: str
    elapsed_s: float = 0.0
    spent_usd: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {"step": self.name, "ok": self.ok, "detail": self.detail,
                "elapsed_s": round(self.elapsed_s, 3), "spent_usd": round(self.spent_usd, 6)}


# (step name, ok, detail) from one record; None: the record is no step of its own.
Said = tuple[str, bool, str] | None


def _price(value: object) -> str:
    return f"${float(value):.3f}/h" if isinstance(value, int | float) else "$?/h"


def _created(r: Record) -> Said:
    if r.get("outcome") == "created":
        return "leased", True, f"{r.get('provider_id')} created from offer {r.get('offer_id')}"
    return "leased", False, (f"offer {r.get('offer_id')}: {r.get('outcome')}"
                             + (f" ({r['detail']})" if r.get("detail") else ""))


def _running(r: Record) -> Said:
    at = f" at {r.get('host')}:{r.get('port')}" if r.get("host") else ""
    return "running", True, (f"{r.get('provider_id')} running{at} after "
                             f"{float(r.get('after_s') or 0):.0f} s, "
                             f"{_price(r.get('price_per_hour'))}")


def _guard(r: Record) -> Said:
    status = r.get("status")
    if status == "not_needed":
        return None
    ok = status != "failed"
    words = {"armed": f"armed by the start command (grace {r.get('grace_s')} s), stood down",
             "off": "the start command ran it off ([limits] boot_grace_mins = 0)",
             "none": "none ran on this node (its start command armed none)"}
    return "boot guard", ok, words.get(str(status), str(r.get("reason") or status))


def _switch(r: Record) -> Said:
    status = r.get("status")
    if status == "ready":
        deadline = r.get("deadline_at")
        when = f"deadline in {float(deadline) - float(r['at']):.0f} s" \
            if isinstance(deadline, int | float) else "no deadline"
        return "node switch", True, f"armed: {when}"
    if status == "failed":
        return "node switch", False, str(r.get("reason") or "failed")
    if status in ("fired", "destroyed", "ended"):
        return "node switch", True, f"{status} ({r.get('trigger') or r.get('reason') or '-'})"
    return None


def _ready(r: Record) -> Said:
    load = r.get("load_ms")
    loaded = f", loaded in {int(load) / 1000:.1f} s" if isinstance(load, int) else ""
    return "node ready", True, f"{r.get('engine')} serves {r.get('model_id')}{loaded}"


def _done(r: Record) -> Said:
    tokens = int(r.get("tokens_generated") or 0)
    seconds = int(r.get("elapsed_ms") or 0) / 1000
    rate = float(r.get("tokens_per_s") or 0.0)
    return "prompt", tokens > 0, f"{tokens} token(s) streamed in {seconds:.1f} s ({rate:.1f} tok/s)"


def _fault(r: Record) -> Said:
    return "prompt", False, f"{r.get('fault_kind')}: {r.get('error')}"


def _abandoned(r: Record) -> Said:
    return "attempt", False, (f"{r.get('provider_id') or r.get('offer_id')} abandoned at "
                              f"{r.get('stage')} ({r.get('failure_kind')}): {r.get('reason')}")


def _limit(r: Record) -> Said:
    return "limit", False, f"{r.get('limit')} {r.get('value')} reached ({r.get('reached')})"


def _deleted(r: Record) -> Said:
    by = "by the node itself" if r.get("deleted_by") == "node" else "confirmed"
    return "torn down", True, (f"{r.get('provider_id')} deleted, {by} (up "
                               f"{float(r.get('uptime_s') or 0):.0f} s, "
                               f"${float(r.get('spend_usd') or 0):.4f})")


def _unconfirmed(r: Record) -> Said:
    return "torn down", False, f"{r.get('provider_id')} NOT confirmed deleted: {r.get('reason')}"


def _secret(ok: bool, what: str) -> Callable[[Record], Said]:
    return lambda r: ("secret", ok, f"{r.get('name')} {what}"
                      + (f": {r.get('reason')}" if r.get("reason") else ""))


def _account(r: Record) -> Said:
    if not r.get("listed"):
        return "account", False, f"not checked: {r.get('error')}"
    left = [str(x) for key in ("unconfirmed", "other_runs") for x in r.get(key) or ()]
    if left:
        return "account", False, f"still listed on {r.get('provider')}: {', '.join(left)}"
    return "account", True, (f"{r.get('provider')} lists nothing of this run under "
                             f"{r.get('prefix')!r}")


def _walk_failed(r: Record) -> Said:
    return "walk", False, str(r.get("reason"))


# Event name -> its step. An event not named here is not a step (it still feeds the facts).
STEPS: dict[str, Callable[[Record], Said]] = {
    "attempt_answered": _created,
    "lease_running": _running,
    "node_boot_guard": _guard,
    "node_watchdog": _switch,
    "node_ready": _ready,
    "prompt_done": _done,
    "prompt_fault": _fault,
    "attempt_abandoned": _abandoned,
    "limit_reached": _limit,
    "lease_deleted": _deleted,
    "lease_delete_unconfirmed": _unconfirmed,
    "secret_stored": _secret(True, "stored on the account (the host key's secret)"),
    "secret_deleted": _secret(True, "deleted"),
    "secret_left_over": _secret(False, "left on the account"),
    "account_checked": _account,
    "walk_failed": _walk_failed,
}


def step_of(record: Record) -> Said:
    """The step one event record makes, if any; the first streamed token is one too."""
    kind = str(record.get("event"))
    read = STEPS.get(kind)
    return read(record) if read is not None else None
