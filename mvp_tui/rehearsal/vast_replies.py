"""The fake Vast.ai's wire vocabulary: scripted faults, the request log's entries, and the
error bodies and rate-limit answers Vast really sends (reference/vastai.md)."""

from __future__ import annotations

import http
from dataclasses import dataclass
from typing import Any

from mvp_tui.rehearsal.http_fake import JSON, Reply

THRESHOLDS = {
    "search": "10 per minute",
    "create": "4.5",
    "show": "2.0",
    "list": "1.0",
    "destroy": "3.0",
    "ssh_list": "1.0",
    "ssh_create": "1.0",
    "user": "1.0",
    "manage": "1.0",
    "gpu_names": "1.0",
}


@dataclass
class Fault:
    """One scripted answer for one call of an operation."""

    status: int = 500
    body: Any = None  # JSON value (or str for a raw text body); None → realistic default
    delay_s: float = 0.0  # wait before answering (the fake's own scripted latency)
    perform: bool = False  # do the real operation first, then answer with this fault
    drop: bool = False  # close the connection with no answer (after performing if perform)
    content_type: str | None = None  # None → application/json for JSON, text/plain for str
    late: bool = False  # the real answer, only delay_s late (a slow API; nothing else wrong)


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any  # parsed JSON, the raw text when not JSON, or None when empty


def error_reply(status: int, code: str, msg: str, **extra: Any) -> Reply:
    return Reply(status, {"success": False, "error": code, "msg": msg, **extra})


def ask_gone_404(ask: Any) -> Reply:
    msg = f"error 404/3603: no_such_ask Instance type by id {ask} is not available."
    return error_reply(404, "invalid_args", msg, ask_id=ask)


def ask_gone_410(ask: Any) -> Reply:
    msg = f"error 410/3907: no_such_ask Instance type {ask} is no longer available."
    return error_reply(410, "no_such_ask", msg, ask_id=ask)


def ask_not_yours_403(ask: Any) -> Reply:
    msg = f"error 403/3586: Offer {ask} is not your own. Hosts can only rent their own machines."
    return error_reply(403, "invalid_args", msg, ask_id=ask)


def ask_invalid_400(ask: Any, why: str = "'id' is required and must be a valid offer ID") -> Reply:
    return error_reply(400, "invalid_args", f"error 400/3467: Invalid args: {why}", ask_id=ask)


CREATE_ERRORS = {
    404: ask_gone_404,
    410: ask_gone_410,
    403: ask_not_yours_403,
    400: ask_invalid_400,
}


def rate_limit_reply(op: str) -> Reply:
    threshold = THRESHOLDS.get(op, "1.0")
    if op == "destroy":
        return error_reply(
            429,
            "rate_limit_exceeded",
            f"API requests too frequent endpoint threshold={threshold}",
        )
    return Reply(429, {"detail": f"API requests too frequent endpoint threshold={threshold}"})


def fault_reply(op: str, fault: Fault, path: str) -> Reply:
    body = fault.body if fault.body is not None else default_body(op, fault.status, path)
    if fault.content_type is not None:
        content_type = fault.content_type
    elif isinstance(body, str):
        content_type = "text/plain; charset=utf-8"
    else:
        content_type = JSON
    return Reply(fault.status, body, content_type)


def default_body(op: str, status: int, path: str) -> Any:
    """What Vast really answers with `status` for this operation."""
    ident = path.rstrip("/").split("/")[-1]
    if status == 429:
        return rate_limit_reply(op).body
    if status in (401,):
        return {"success": False, "error": "auth_error", "msg": "Invalid user key"}
    if op == "create" and status in CREATE_ERRORS:
        return CREATE_ERRORS[status](ident).body
    if op in ("destroy", "show", "manage") and status == 404:
        return {
            "success": False,
            "error": "no_such_instance",
            "msg": f"Instance {ident} not found.",
        }
    if status >= 500:
        return {
            "success": False,
            "error": "server_error",
            "msg": http.HTTPStatus(status).phrase,
        }
    try:
        phrase = http.HTTPStatus(status).phrase
    except ValueError:
        phrase = "Error"
    return {"success": False, "error": "error", "msg": phrase}
