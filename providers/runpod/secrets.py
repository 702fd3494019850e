"""The pod's private host key as a RunPod account secret, as seed 003 hands it over.

A pod's plain `env` is readable in RunPod's console and API for as long as the pod lives;
a secret's value is write-only (never returned). So the key goes into
`POST /v2/account/secrets` before the pod's create, the create's env carries only the
reference `{{ RUNPOD_SECRET_<name> }}` (RunPod substitutes the value when the pod boots), and
the secret is deleted (`DELETE /v2/account/secrets/{id}`) once the pod is confirmed gone.

Facts from RunPod's docs (docs.runpod.io/api-reference-v2/account/create-a-secret and
…/delete-a-secret; the 2026-08 OpenAPI document has neither): a name is 1-191 characters of
`^[a-zA-Z_][a-zA-Z0-9_.\\-/]*$`, immutable, and may not begin with RUNPOD (any case); the
value is under 16 MiB; 201 answers the secret's metadata with its `id`.

Unlike the seed (one secret per run), each attempt gets its own: this app makes a host key
per attempt, so a secret per attempt keeps one pod's key out of every other pod.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any
from urllib.parse import quote

from mvp_tui.providers.base import (
    DestroyOutcome,
    DestroyResult,
    ProviderError,
    SecretOutcome,
    StoredSecret,
)
from mvp_tui.untrusted import clean_line

SECRETS_PATH = "/account/secrets"
NAME_PREFIX = "mvp_host_key_"
_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_.\-/]{0,190}$")
DESCRIPTION = "mvp-tui: the SSH host key of pod {label}; deleted once the pod is gone"


def secret_name(label: str) -> str:
    """The secret's name for attempt `label`: letters, digits and `_` only (the reference is
    substituted into an env value, where nothing else is certain to survive), plus a digest
    of the exact label, since `-` and `_` both become `_` (`a_r-1-1-1` vs `a-r-1-1-1`)."""
    digest = hashlib.sha256(label.encode()).hexdigest()[:8]
    name = NAME_PREFIX + re.sub(r"[^A-Za-z0-9_]", "_", label)[:160] + "_" + digest
    if not _NAME.match(name) or name.upper().startswith("RUNPOD"):
        raise ProviderError(
            f"label {clean_line(label, 80)!r} gives no usable RunPod secret name",
            fix="use a label_prefix of lowercase letters, digits or '_'",
        )
    return name


def secret_reference(name: str) -> str:
    """What the pod's env holds instead of the key: RunPod fills it in at boot."""
    return "{{ RUNPOD_SECRET_" + name + " }}"


def create_body(name: str, value: str, label: str) -> dict[str, Any]:
    """The JSON body of `POST /account/secrets` (the value is its only secret part)."""
    return {"name": name, "value": value, "description": DESCRIPTION.format(label=label)}


def secret_path(secret_id: str) -> str:
    text = str(secret_id).strip()
    if not text or len(text) > 128 or not text.isprintable() or "/" in text:
        raise ProviderError(
            f"secret id {clean_line(str(secret_id), 60)!r} is not a RunPod secret id",
            fix="check the run record",
        )
    return f"{SECRETS_PATH}/{quote(text, safe='')}"


def stored(status: int, body: Any, detail: str) -> StoredSecret:
    """A create answer as a `StoredSecret`: 2xx with an id → STORED; 408, 5xx or 2xx
    without an id → UNCLEAR (it may exist); any other answer → REFUSED."""
    if 200 <= status < 300:
        found = body.get("id") if isinstance(body, dict) else None
        if isinstance(found, str) and found.strip():
            secret_id = clean_line(found.strip(), 128)
            return StoredSecret(SecretOutcome.STORED, secret_id, detail, status)
        return StoredSecret(SecretOutcome.UNCLEAR, None, f"{detail} (no secret id)", status)
    if status == 408 or status >= 500:
        return StoredSecret(SecretOutcome.UNCLEAR, None, detail, status)
    return StoredSecret(SecretOutcome.REFUSED, None, detail, status)


def deleted(status: int, problem_shaped: bool, detail: str) -> DestroyResult:
    """A delete answer: 2xx → ACCEPTED (RunPod's word that it is gone; a secret does not
    bill, so no listing confirms it), RunPod's own 404 → GONE, anything else → FAILED."""
    if 200 <= status < 300:
        return DestroyResult(DestroyOutcome.ACCEPTED, detail, status)
    if status == 404 and problem_shaped:
        return DestroyResult(DestroyOutcome.GONE, detail, status)
    return DestroyResult(DestroyOutcome.FAILED, detail, status)


def removal(api_url: str, name: str, secret_id: str | None) -> str:
    """How to delete a secret by hand (the API key comes from the environment, never here)."""
    console = f"RunPod console → Secrets → {name}"
    if not secret_id:
        return f"if it exists: {console}"
    return (
        f'curl -X DELETE -H "Authorization: Bearer $RUNPOD_API_KEY" '
        f"{api_url}{SECRETS_PATH}/{quote(secret_id, safe='')}  (or {console})"
    )
