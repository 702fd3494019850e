"""Vast.ai instance rows (`GET /instances/{id}/`, `GET /api/v1/instances/`) as `LeaseStatus`.

Two facts the Vast seed's SSH endpoint lookup got wrong are encoded here: the SSH endpoint
is *either* direct
(`public_ipaddr` + the host port mapped to 22/tcp) *or* the proxy (`ssh_host:ssh_port`),
never a mix of the two; and a row only counts as reachable once it is running.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from mvp_tui.providers.base import LeaseState, LeaseStatus, SshEndpoint
from mvp_tui.untrusted import Redact, clean_line

_PENDING = {"created", "loading", "rebooting", "restarting", "scheduling", "unknown"}
_STOPPED = {"stopped", "frozen", "paused"}
_DEAD = {"exited", "offline", "error", "failed"}
_GONE = {"destroyed", "terminated", "deleted"}
# Texts in status_msg that mean the container will never start (vast self-test, dstack,
# the Vast seed).
_FATAL_MSG = re.compile(r"Error|error:|failed|unresolvable CDI")
_HOSTNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.\-:]*$")
_DETAIL_CHARS = 300


def _text(row: Mapping[str, Any], key: str, limit: int = 200, redact: Redact | None = None) -> str:
    value = row.get(key)
    return clean_line(value, limit, redact=redact).strip() if isinstance(value, str) else ""


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _port(value: Any) -> int | None:
    """A TCP port from an int or a numeric string (Vast's HostPort is a string)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and 0 < value < 65536:
        return value
    return None


def _host(value: Any) -> str | None:
    """A host name or IP address, or None for empty / "unknown" / junk."""
    if not isinstance(value, str):
        return None
    host = value.strip()
    if not host or host.lower() in {"unknown", "none", "null"} or not _HOSTNAME.match(host):
        return None
    return host


def lease_state(row: Mapping[str, Any]) -> LeaseState:
    """Map `actual_status` (+ `intended_status` and `status_msg`) to a `LeaseState`.

    null/created/loading/unknown → PENDING, running → RUNNING, stopped/frozen → STOPPED,
    exited/offline → DEAD. A not-yet-running container whose status_msg reports an error
    is DEAD, and one the user (or Vast, for a lost bid) intends stopped is STOPPED: neither
    will become ready by waiting.
    """
    actual = row.get("actual_status")
    status = actual.strip().lower() if isinstance(actual, str) else None
    if status in _GONE or _text(row, "intended_status").lower() in _GONE:
        return LeaseState.GONE
    if outbid(row):  # paused by Vast, whatever the container's state still says
        return LeaseState.STOPPED
    if status == "running":
        return LeaseState.RUNNING
    if status in _STOPPED:
        return LeaseState.STOPPED
    if status in _DEAD:
        return LeaseState.DEAD
    if _FATAL_MSG.search(_text(row, "status_msg", 2000)):
        return LeaseState.DEAD
    if _text(row, "intended_status").lower() == "stopped":
        return LeaseState.STOPPED
    return LeaseState.PENDING  # null, created, loading, unknown, and states we do not know


def outbid(row: Mapping[str, Any]) -> bool:
    """Vast stopped the contract and means it to stay stopped: `cur_state == intended_status
    == next_state == "stopped"` (dstack's check; what an outbid interruptible looks like)."""
    return _contract_states(row) == {"stopped"}


def _contract_states(row: Mapping[str, Any]) -> set[str]:
    """What was asked for and the contract's state (reference §4: `intended_status`,
    `cur_state`, `next_state`); all three "stopped" is a bid that lost (dstack)."""
    return {_text(row, key).lower() for key in ("intended_status", "cur_state", "next_state")}


def billing_words(row: Mapping[str, Any], redact: Redact | None = None) -> str:
    """`actual_status` as the account check says it (redacted, then cut): a bid Vast has
    stopped (outbid, or created stopped below the minimum bid) is a paused bid; it still
    bills its storage."""
    raw = row.get("actual_status")
    actual = clean_line(raw, 40, redact=redact).strip() if isinstance(raw, str) else "null"
    stopped = _contract_states(row) == {"stopped"}
    if row.get("is_bid") is True and stopped:
        return "paused bid (stopped, outbid)"
    if stopped and actual.lower() != "stopped":
        return f"{actual}, stopped by Vast"
    return actual


def ssh_endpoint(row: Mapping[str, Any], user: str) -> SshEndpoint | None:
    """Direct (public IP + mapped 22/tcp) when Vast maps it, else the proxy, else None."""
    ports = row.get("ports")
    mapped = ports.get("22/tcp") if isinstance(ports, Mapping) else None
    if isinstance(mapped, list) and mapped and isinstance(mapped[0], Mapping):
        host, port = _host(row.get("public_ipaddr")), _port(mapped[0].get("HostPort"))
        if host and port:
            return SshEndpoint(host=host, port=port, user=user, via="direct")
    host, port = _host(row.get("ssh_host")), _port(row.get("ssh_port"))
    if not (host and port):
        return None
    if "jupyter" in _text(row, "image_runtype"):
        port += 1  # the CLI's rule: jupyter images put SSH one above the proxy port
    return SshEndpoint(host=host, port=port, user=user, via="proxy")


def instance_id(row: Mapping[str, Any]) -> str | None:
    value = row.get("id")
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return str(value)
    return None


def lease_status(
    row: Mapping[str, Any],
    *,
    user: str,
    provider_id: str | None = None,
    redact: Redact | None = None,
) -> LeaseStatus:
    """One instance row as a `LeaseStatus`; `ssh` is set only while it is running.

    Texts (label, state, status message) are redacted with `redact` before they are cut."""
    state = lease_state(row)
    label = row.get("label")
    return LeaseStatus(
        provider_id=provider_id or instance_id(row) or "",
        label=clean_line(label, 1024, redact=redact) if isinstance(label, str) else None,
        state=state,
        raw_state=billing_words(row, redact),
        ssh=ssh_endpoint(row, user) if state is LeaseState.RUNNING else None,
        price_per_hour=_number(row.get("dph_total")),
        started_at=_number(row.get("start_date")),
        detail=_outbid_detail(row) or _text(row, "status_msg", _DETAIL_CHARS, redact),
    )


def _outbid_detail(row: Mapping[str, Any]) -> str:
    if row.get("is_bid") is True and outbid(row):
        return "outbid: Vast.ai paused this interruptible instance (a higher bid took the GPU)"
    return ""


def gone(provider_id: str, detail: str = "") -> LeaseStatus:
    """The status of an instance Vast no longer has."""
    return LeaseStatus(
        provider_id=provider_id, label=None, state=LeaseState.GONE, raw_state="gone", detail=detail
    )
