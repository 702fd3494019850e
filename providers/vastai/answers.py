"""Reading Vast.ai's HTTP answers: what a create or destroy answer means for the lease walk.

Vast's error answers are `{"success": false, "error": "<code>", "msg": "<text>"}` with a
status that is not always the one you would guess (a revoked key can come back as 404, a
sold offer as 404 or 410, a bid that is too low as 200 with an error *and* a new instance).
Every classification lives here, in one place, with the evidence from the Vast.ai API facts
(/work/shared/reference/vastai.md) beside it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from mvp_tui.providers.base import (
    CreateResult,
    DestroyOutcome,
    DestroyResult,
    Outcome,
)
from mvp_tui.untrusted import Redact, clean_bytes, clean_line

_DETAIL_CHARS = 300
# Only this head of a body is ever shown: never run the sanitiser over a 16 MB offer list.
_HEAD_BYTES = _DETAIL_CHARS * 4 + 1024


def _unchanged(text: str) -> str:
    return text


AUTH_FIX = "check [vastai] api_key / VASTAI_API_KEY (create a key at console.vast.ai → Keys)"


@dataclass(frozen=True, slots=True)
class Answer:
    """One HTTP answer: its status, its JSON body (None when not JSON) and sanitised text.

    Every text taken from it (`text`, `message`, `error_code`, `detail()`) is sanitised,
    redacted with `redact` and only then cut, so a secret Vast echoes back never shows a
    prefix at a cut.
    """

    status: int
    body: Any
    text: str
    redact: Redact = field(default=_unchanged, repr=False, compare=False)

    @classmethod
    def parse(
        cls, status: int, raw: bytes, content_type: str, *, redact: Redact | None = None
    ) -> Answer:
        """Decode `raw` as JSON when it is JSON; keep a bounded, sanitised text either way."""
        redact = redact or _unchanged
        text = clean_bytes(raw, _DETAIL_CHARS, redact=redact, scan_bytes=_HEAD_BYTES)
        body: Any = None
        looks_json = "json" in content_type or raw[:64].lstrip()[:1] in (b"{", b"[")
        if raw and not raw.isspace() and looks_json:
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
        return cls(status=status, body=body, text=text, redact=redact)

    @property
    def error_code(self) -> str:
        code = self.body.get("error") if isinstance(self.body, dict) else None
        return clean_line(code, 80, redact=self.redact) if isinstance(code, str) else ""

    @property
    def message(self) -> str:
        """The human part of the answer: `msg`, else `detail`, else the raw text."""
        if isinstance(self.body, dict):
            for key in ("msg", "detail", "message"):
                value = self.body.get(key)
                if isinstance(value, str) and value.strip():
                    return clean_line(value, _DETAIL_CHARS, redact=self.redact)
        return self.text

    @property
    def success(self) -> bool | None:
        value = self.body.get("success") if isinstance(self.body, dict) else None
        return value if isinstance(value, bool) else None

    def detail(self) -> str:
        """`HTTP 404 no_such_ask: <msg>`: enough for a log line, never the whole body."""
        parts = [f"HTTP {self.status}"]
        if self.error_code:
            parts.append(self.error_code)
        head = " ".join(parts)
        return f"{head}: {self.message}" if self.message else head

    @property
    def searchable(self) -> str:
        """Error code and message, lower-cased, for marker matching."""
        return f"{self.error_code} {self.message}".lower()


def is_auth_failure(answer: Answer) -> bool:
    """401, or 403/404 that say the key is bad (Vast answers revoked keys with 404)."""
    if answer.status == 401:
        return True
    if answer.status not in (403, 404):
        return False
    text = answer.searchable
    return (
        answer.error_code == "auth_error"
        or "invalid user key" in text
        or "session expired" in text
        or "please log in" in text
    )


_CREDIT_CODES = {
    "insufficient_credit",
    "insufficient_credits",
    "insufficient_funds",
    "insufficient_balance",
}


def is_no_credit(answer: Answer) -> bool:
    """The account cannot pay. Undocumented by Vast: any of the codes/texts seen in clients."""
    if answer.status == 402 or answer.error_code in _CREDIT_CODES:
        return True
    text = answer.searchable
    return any(
        marker in text
        for marker in ("insufficient credit", "insufficient funds", "balance", "not enough credit")
    )


_GONE_OFFER_TEXT = ("no_such_ask", "no such ask", "no longer available", "is not available")
_GONE_OFFER_WITH_OFFER = (
    "unavailable",
    "no longer rentable",
    "already been rented",
    "already rented",
)


def is_offer_gone(answer: Answer) -> bool:
    """The offer was sold or withdrawn (404/410, `no_such_ask`, or the texts SkyPilot matches)."""
    if answer.status in (404, 410):
        return True
    text = answer.searchable
    if any(marker in text for marker in _GONE_OFFER_TEXT):
        return True
    return "offer" in text and any(marker in text for marker in _GONE_OFFER_WITH_OFFER)


def _contract_id(body: Any) -> str | None:
    value = body.get("new_contract") if isinstance(body, dict) else None
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value > 0:
        return str(value)
    if isinstance(value, str) and value.isdigit() and int(value) > 0:
        return value
    return None


def _result(outcome: Outcome, answer: Answer, provider_id: str | None = None) -> CreateResult:
    return CreateResult(
        outcome=outcome, provider_id=provider_id, detail=answer.detail(), http_status=answer.status
    )


def classify_create(answer: Answer) -> CreateResult:
    """What a `PUT /asks/{id}/` answer (other than 429, which is retried) means.

    - 200 `success: true` + `new_contract` → CREATED.
    - 200 `new_contract` without `success: true` (Vast made a *stopped* instance and reports
      an error, e.g. a bid too low) → AMBIGUOUS with `provider_id` set: an instance exists and
      bills storage, and the walk must destroy it, so it must not look like "nothing happened".
    - 200 without a contract id (garbage, or `success: false` saying nothing we know) →
      AMBIGUOUS: we cannot prove no instance exists.
    - 401 / 403-404 with `auth_error` / "Invalid user key" → AUTH_FAILED (checked first:
      a bad key's 404 must not read as a sold offer).
    - insufficient credit (code, 402 or "balance" text) → NO_CREDITS.
    - 5xx → AMBIGUOUS (the server may have done it), checked before the offer-gone texts so
      "503 Service Unavailable" is never mistaken for a sold offer.
    - 404 / 410 / `no_such_ask` / "no longer available" → UNAVAILABLE.
    - 403 → FORBIDDEN (e.g. "Offer … is not your own").
    - other 4xx → REJECTED (the request itself is wrong; the next offer would fail alike).
    - anything else (1xx/3xx) → AMBIGUOUS.
    """
    if 200 <= answer.status < 300:
        return _classify_ok(answer)
    if is_auth_failure(answer):
        return _result(Outcome.AUTH_FAILED, answer)
    if 400 <= answer.status < 500 and is_no_credit(answer):
        return _result(Outcome.NO_CREDITS, answer)
    if answer.status >= 500:
        return _result(Outcome.AMBIGUOUS, answer)
    if 400 <= answer.status < 500 and is_offer_gone(answer):
        return _result(Outcome.UNAVAILABLE, answer)
    if answer.status == 403:
        return _result(Outcome.FORBIDDEN, answer)
    if 400 <= answer.status < 500:
        return _result(Outcome.REJECTED, answer)
    return _result(Outcome.AMBIGUOUS, answer)


def _classify_ok(answer: Answer) -> CreateResult:
    contract = _contract_id(answer.body)
    if contract is not None:
        outcome = Outcome.CREATED if answer.success is True else Outcome.AMBIGUOUS
        return _result(outcome, answer, contract)
    if answer.success is False:
        if is_no_credit(answer):
            return _result(Outcome.NO_CREDITS, answer)
        if is_offer_gone(answer):
            return _result(Outcome.UNAVAILABLE, answer)
    return _result(Outcome.AMBIGUOUS, answer)


_INSTANCE_GONE_CODES = {"no_such_instance", "not_found"}


def is_instance_gone(answer: Answer) -> bool:
    """Vast says the instance does not exist: `no_such_instance` / `not_found`, or a 404 in
    Vast's JSON shape. A 404 that is not JSON (an HTML page from a proxy, or a wrong
    api_url) proves nothing: calling that "gone" could close a lease that still bills."""
    if is_auth_failure(answer):
        return False
    if answer.error_code in _INSTANCE_GONE_CODES:
        return True
    return answer.status == 404 and isinstance(answer.body, dict)


def classify_destroy(answer: Answer) -> DestroyResult:
    """What a `DELETE /instances/{id}/` answer (other than 429, which is retried) means.

    200 `success: true` → ACCEPTED (confirm by listing); `is_instance_gone` → GONE (never
    for a bad key's 404: then FAILED, nothing was destroyed); anything else → FAILED, for
    the walk to retry.
    """
    detail = answer.detail()
    if is_auth_failure(answer):
        return DestroyResult(
            DestroyOutcome.FAILED, f"{detail} — {AUTH_FIX}", http_status=answer.status
        )
    if is_instance_gone(answer):
        return DestroyResult(DestroyOutcome.GONE, detail, http_status=answer.status)
    if 200 <= answer.status < 300 and answer.success is True:
        return DestroyResult(DestroyOutcome.ACCEPTED, detail, http_status=answer.status)
    return DestroyResult(DestroyOutcome.FAILED, detail, http_status=answer.status)
