"""The account secrets endpoints, which the 2026-08 OpenAPI document lacks: checked against
RunPod's docs pages instead (contract deviation `account-secrets`):
docs.runpod.io/api-reference-v2/account/create-a-secret and …/delete-a-secret.

- `POST /v2/account/secrets` `{name (1-191, ^[a-zA-Z_][a-zA-Z0-9_.\\-/]*$, not RUNPOD…),
  value (write-only, < 16 MiB), description (optional, ≤ 65,535 bytes)}` → 201, the secret's
  metadata with its `id`, never its value.
- `DELETE /v2/account/secrets/{id}` → 2xx, no body needed.
- Bearer auth as every v2 call; an error answer is RunPod's problem+json.
"""

from __future__ import annotations

import re
from typing import Any

from jsonschema import Draft202012Validator

from tests.fakes.runpod_server import Exchange

PATH = re.compile(r"^/v2/account/secrets(/[^/]+)?$")

_CREATE = {
    "type": "object",
    "required": ["name", "value"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 191,
                 "pattern": r"^[a-zA-Z_][a-zA-Z0-9_.\-/]*$",
                 "not": {"pattern": "^[Rr][Uu][Nn][Pp][Oo][Dd]"}},
        "value": {"type": "string", "maxLength": 16 * 1024 * 1024 - 1},
        "description": {"type": "string", "maxLength": 65535},
    },
}
_SECRET = {
    "type": "object",
    "required": ["id", "name"],
    "properties": {"id": {"type": "string", "minLength": 1}, "name": {"type": "string"}},
    "not": {"required": ["value"]},  # the value is write-only
}
_PROBLEM = {
    "type": "object",
    "required": ["status"],
    "properties": {"status": {"type": "integer"}, "title": {"type": "string"},
                   "detail": {"type": "string"}},
}


def _errors(schema: dict[str, Any], value: Any) -> list[str]:
    return [
        f"{'/'.join(str(p) for p in e.absolute_path) or '$'}: {e.message[:300]}"
        for e in Draft202012Validator(schema).iter_errors(value)
    ]


def check(exchange: Exchange, judge_request: bool) -> list[str]:
    """What in one secrets exchange the docs pages do not allow (empty: it conforms)."""
    request = exchange.request
    item = PATH.match(request.path)
    if item is None:
        return ["not an account secrets path"]
    one = item[1] is not None
    out: list[str] = []
    if (request.method, one) not in (("POST", False), ("DELETE", True)):
        return [f"{request.method} is not documented for {request.path}"]
    if judge_request:
        auth = request.headers.get("authorization", "")
        if not auth.startswith("Bearer ") or len(auth) <= len("Bearer "):
            out.append("no bearer token")
        if request.query:
            out.append(f"query parameters {sorted(request.query)} are not documented")
        if request.method == "POST":
            out += [f"request body {e}" for e in _errors(_CREATE, request.body)]
        elif request.body not in (None, ""):
            out.append("a body was sent to the delete")
    if exchange.status is None:
        return out
    if 200 <= exchange.status < 300:
        if request.method == "POST":
            if exchange.status != 201:
                out.append(f"create answered {exchange.status}, documented 201")
            out += [f"body {e}" for e in _errors(_SECRET, exchange.body)]
    elif "json" in exchange.content_type:
        out += [f"body {e}" for e in _errors(_PROBLEM, exchange.body)]
    return out
