"""The contract check: every exchange with `FakeRunPod` against RunPod's official v2 OpenAPI
document (paths, methods, query parameters, declared status codes, request and response
bodies with every `$ref` resolved, JSON Schema 2020-12 as OpenAPI 3.1 uses it).

Where recorded live behaviour differs from the document, the difference is named in
`DEVIATIONS` and allowed only in that exact form.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from tests.fakes.runpod_server import Exchange
from tests.runpod import contract_secrets

SPEC_PATH = Path("/work/shared/reference/runpod-v2-openapi.json")
_LOCAL_COPY = Path(__file__).with_name("runpod-v2-openapi.json")
_URI = "urn:runpod:v2-openapi"
_METHODS = ("get", "put", "post", "patch", "delete")

# Recorded live behaviour the document does not describe, each allowed only as named here.
DEVIATIONS = {
    "cloudflare-1010": (
        "Cloudflare answers a missing or generic User-Agent with 403 text/plain "
        "`error code: 1010` before the API sees it (runpod.md §0.3; overbrainer, raft PR #14); "
        "the document's 403 is problem+json"
    ),
    "pods-pagination": (
        "GET /v2/pods answering `pagination {hasNextPage, nextCursor}` and taking `?cursor=`, "
        "as recorded live by overbrainer and SkyPilot; absent from the 2026-08 document. "
        "Only `cursor` on listPods is allowed, and only when a page asked for it"
    ),
    "account-secrets": (
        "POST /v2/account/secrets and DELETE /v2/account/secrets/{id}, absent from the 2026-08 "
        "document: checked against RunPod's docs pages instead "
        "(docs.runpod.io/api-reference-v2/account/create-a-secret and …/delete-a-secret; "
        "tests/runpod/contract_secrets.py); the pod's host key goes there, not in its env"
    ),
    "foreign-html-404": (
        "a 404 HTML page from something that is not RunPod (a wrong api_url, a proxy): "
        "scripted on purpose to prove it is never read as 'pod gone'"
    ),
}


def _spec_file() -> Path:
    return _LOCAL_COPY if _LOCAL_COPY.is_file() else SPEC_PATH


@cache
def spec() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(_spec_file().read_text(encoding="utf-8"))
    return data


@cache
def _registry() -> Registry:
    resource: Resource[Any] = Resource.from_contents(spec(), default_specification=DRAFT202012)
    return Registry().with_resource(_URI, resource)


def _validator(schema: dict[str, Any]) -> Draft202012Validator:
    return Draft202012Validator(_rebase(schema), registry=_registry())


def _rebase(node: Any) -> Any:
    """Local `#/...` refs of a fragment, pointed at the whole document."""
    if isinstance(node, dict):
        return {
            k: (f"{_URI}{v}" if k == "$ref" and isinstance(v, str) and v.startswith("#") else
                _rebase(v))
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_rebase(v) for v in node]
    return node


def _deref(node: Any) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        target: Any = spec()
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        node = target
    return node


@cache
def _templates() -> list[tuple[re.Pattern[str], str]]:
    found = []
    for template in spec()["paths"]:
        pattern = re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template))
        found.append((re.compile(f"^{pattern}$"), template))
    # literal segments first: /v2/registries/delegations before /v2/registries/{id}
    found.sort(key=lambda item: item[1].count("{"))
    return found


@dataclass(frozen=True)
class Problem:
    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


def _errors(schema: dict[str, Any], value: Any) -> list[str]:
    return [
        f"{'/'.join(str(p) for p in e.absolute_path) or '$'}: {e.message[:300]}"
        for e in _validator(schema).iter_errors(value)
    ]


def _param_value(schema: dict[str, Any], raw: str) -> Any:
    schema = _deref(schema)
    kind = schema.get("type")
    if kind == "array":
        return [_param_value(schema.get("items", {}), item) for item in raw.split(",")]
    if kind == "integer":
        return int(raw) if re.fullmatch(r"-?\d+", raw) else raw
    if kind == "boolean":
        return {"true": True, "false": False}.get(raw, raw)
    return raw


def check_exchange(exchange: Exchange, *, judge_request: bool = True) -> list[Problem]:
    """What in one exchange the document does not allow (empty: it conforms); with
    `judge_request=False` only the answer is judged (a test's own deliberately bad request)."""
    request = exchange.request
    where = f"{request.method} {request.path}"
    if contract_secrets.PATH.match(request.path):  # DEVIATIONS["account-secrets"]
        what = contract_secrets.check(exchange, judge_request)
        return [Problem(f"{where} → {exchange.status}", w) for w in what]
    template = next((t for p, t in _templates() if p.match(request.path)), None)
    if template is None:
        return [Problem(where, "no such path in the document")]
    item = spec()["paths"][template]
    operation = item.get(request.method.lower())
    if operation is None or request.method.lower() not in _METHODS:
        return [Problem(where, f"method not declared for {template}")]
    where = f"{request.method} {template} ({operation['operationId']})"
    problems = (
        [Problem(where, w) for w in _check_request(operation, item, exchange)]
        if judge_request
        else []
    )
    if exchange.status is not None:
        problems += [Problem(f"{where} → {exchange.status}", w)
                     for w in _check_response(operation, exchange)]
    return problems


def _check_request(
    operation: dict[str, Any], item: dict[str, Any], exchange: Exchange
) -> list[str]:
    request = exchange.request
    out: list[str] = []
    auth = request.headers.get("authorization", "")
    if not auth.startswith("Bearer ") or len(auth) <= len("Bearer "):
        out.append("no bearer token (security: bearerAuth)")
    params = [_deref(p) for p in [*item.get("parameters", []), *operation.get("parameters", [])]]
    query = {p["name"]: p for p in params if p.get("in") == "query"}
    for name, raw in request.query.items():
        declared = query.get(name)
        if declared is None and name == "cursor" and operation["operationId"] == "listPods":
            continue  # DEVIATIONS["pods-pagination"]
        if declared is None:
            out.append(f"query parameter {name!r} is not declared")
            continue
        schema = declared.get("schema", {})
        out += [f"query {name}: {e}" for e in _errors(schema, _param_value(schema, raw))]
    out += [f"query parameter {p!r} is required" for p, d in query.items()
            if d.get("required") and p not in request.query]
    body_spec = operation.get("requestBody")
    if body_spec is None:
        if request.body not in (None, ""):
            out.append("a body was sent to an operation that takes none")
        return out
    body_spec = _deref(body_spec)
    if request.body is None:
        if body_spec.get("required"):
            out.append("the required request body is missing")
        return out
    media = body_spec["content"].get("application/json")
    ctype = request.headers.get("content-type", "")
    if media is None or "application/json" not in ctype:
        out.append(f"request content type {ctype!r} is not declared")
        return out
    out += [f"request body {e}" for e in _errors(media["schema"], request.body)]
    return out


def _check_response(operation: dict[str, Any], exchange: Exchange) -> list[str]:
    responses = operation["responses"]
    declared = responses.get(str(exchange.status)) or responses.get("default")
    if declared is None:
        return [f"status {exchange.status} is not declared (and no default)"]
    declared = _deref(declared)
    if _is_cloudflare(exchange):
        return []  # DEVIATIONS["cloudflare-1010"]
    if exchange.status == 404 and exchange.content_type.startswith("text/html"):
        return []  # DEVIATIONS["foreign-html-404"]
    out: list[str] = []
    content = declared.get("content")
    if not content:
        if exchange.body not in (None, ""):
            out.append("a body was returned where the document declares none")
        return out
    ctype = exchange.content_type.split(";")[0].strip()
    media = content.get(ctype)
    if media is None:
        return [f"content type {ctype!r} is not declared ({', '.join(content)})"]
    out += [f"body {e}" for e in _errors(media["schema"], exchange.body)]
    for name, header in (declared.get("headers") or {}).items():
        value = exchange.headers.get(name)
        schema = _deref(header).get("schema")
        if value is not None and schema is not None:
            out += [f"header {name}: {e}" for e in _errors(schema, _param_value(schema, value))]
    return out


def _is_cloudflare(exchange: Exchange) -> bool:
    return (
        exchange.status == 403
        and exchange.content_type.startswith("text/plain")
        and exchange.body == "error code: 1010"
    )


def ours(exchange: Exchange) -> bool:
    """Sent by mvp-tui or its node agent (tests' own clients say `mvp-tui-tests/…`)."""
    agent = exchange.request.headers.get("user-agent", "")
    return agent.startswith(("mvp-tui/", "mvp-node/"))


def check_all(exchanges: Iterable[Exchange]) -> list[Problem]:
    """Every answer, and every request mvp-tui (or its node agent) sent."""
    return [p for x in exchanges for p in check_exchange(x, judge_request=ours(x))]
