"""The Vast.ai provider: search offers, create from an offer, poll, list by label, destroy.

Speaks Vast's REST API through the shared marketplace client (providers/marketplace_http.py:
`Authorization: Bearer` only, the key never in a URL, every text redacted, a 429 retried with
back-off because Vast refused that call without performing it). Every create answer is
classified into an `Outcome` here (providers/vastai/answers.py).

Choices the Vast.ai API facts (/work/shared/reference/vastai.md) leave open, decided here:
- `runtype` is `"ssh_direc ssh_proxy"` — the exact value the official CLI sends for
  `--ssh --direct` (its spelling, which Vast echoes back in `image_runtype`): Vast maps a
  real port 22 when the host has direct ports and keeps its SSH proxy as the fallback, so no
  `-p 22:22` docker option is needed in `env`.
- `cancel_unavail: true`: an offer that cannot start now fails (410) instead of leaving a
  stopped instance that bills storage.
- 429s that outlast `rate_limit_retries` raise `ProviderError` (status 429) from every call
  that returns data, create included (each 429 was a refusal, so nothing was created);
  `destroy` returns FAILED instead, so the walk's retry-and-confirm loop keeps going.
- A connection that cannot even be opened raises `ProviderError` from create (the request
  never left, nothing was created); a timeout or a dropped connection *after* sending is
  AMBIGUOUS (an instance may exist).
- `[vastai] rental = "bid"` (interruptible): offers are searched with `type: "bid"` and
  priced at our bid (`min_bid` × `bid_factor`, capped by `[limits] max_price_per_hour`), the
  create carries it as `price`, and the instance is read back at once: Vast is known to
  make an on-demand instance silently when the bid is missing (vast-cli PR #403), so one
  that is not `is_bid` at our price (`dph_base`, the GPU part) is refused (REJECTED, its id
  kept: the walk destroys it, confirmed, and the run stops saying so). A bid Vast answers
  with an error and a `new_contract` (too low: it made a stopped instance) is UNAVAILABLE
  with that id: destroyed, confirmed, and the next offer tried. An outbid later pauses the
  instance (`cur_state == intended_status == next_state == "stopped"`): `get` says STOPPED
  and the serving run replaces the host.
- A 410 on a v0 single-instance route (`GET`/`DELETE /api/v0/instances/{id}/`: one report
  says Vast retired them with `deprecated_endpoint`, peers 2026-12-07 V6/V7) is never read as
  "gone": the read goes to the v1 list the CLI uses, filtered on the id (absent there = gone,
  as the reference's "confirm gone with either"); the delete goes to
  `DELETE /api/v1/instances/{id}/` with the same `{}` body (no source documents it; the
  teardown's confirmation reads the v1 list either way).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from mvp_tui.config import Config, ConfigError
from mvp_tui.node_protocol import api_url_env
from mvp_tui.providers.base import (
    CreateRequest,
    CreateResult,
    DestroyOutcome,
    DestroyResult,
    LeaseStatus,
    Offer,
    Outcome,
    ProviderBase,
    ProviderError,
    ProviderInfo,
    SelectionPolicy,
)
from mvp_tui.providers.local.node import LineHandler
from mvp_tui.providers.marketplace_http import (
    Marketplace,
    MarketplaceClient,
    NoAnswer,
    ensure_account_key,
)
from mvp_tui.providers.vastai.answers import (
    AUTH_FIX,
    Answer,
    classify_create,
    classify_destroy,
    is_auth_failure,
    is_instance_gone,
)
from mvp_tui.providers.vastai.boot import OnstartTooLong, vast_onstart
from mvp_tui.providers.vastai.host_key import HostKeyPlan
from mvp_tui.providers.vastai.instances import gone, instance_id, lease_status
from mvp_tui.providers.vastai.offers import (
    PROVIDER_NAME,
    MalformedOffer,
    build_search_query,
    read_offers,
)
from mvp_tui.providers.vastai.section import VastaiSection
from mvp_tui.secrets import Redactor
from mvp_tui.untrusted import clean_line

DEFAULT_API_URL = "https://console.vast.ai"
RUNTYPE = "ssh_direc ssh_proxy"
RENTALS = ("on-demand", "bid")
# How often the instance is read back to check a bid before it is given up (and destroyed).
BID_CHECK_READS = 3
BID_PRICE_SLACK = 1.01  # Vast rounds prices; more than 1 % over our bid is not our bid
LIST_PAGE_SIZE = 25  # the v1 list's maximum
V0_RETIRED = 410  # a v0 single-instance route's `deprecated_endpoint`: ask v1 instead
_MAX_LIST_PAGES = 2000
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
RATE_LIMIT_FIX = (
    "wait a minute and retry; Vast.ai limits calls per endpoint and key, so another tool "
    "using the same key may be polling too fast"
)
MARKET = Marketplace(
    name="Vast.ai",
    section="vastai",
    # [vastai] api_url's env name, the one the node reads it by too
    url_env=api_url_env("vastai"),
    url_example=DEFAULT_API_URL,
    auth_fix=AUTH_FIX,
    rate_limit_fix=RATE_LIMIT_FIX,
    user_agent="mvp-tui",
)
NETWORK_FIX = MARKET.network_fix
KEYS_PAGE = "console.vast.ai → Keys"


@dataclass(frozen=True, slots=True)
class VastAccount:
    """What `GET /api/v0/users/current/` says about the key's account."""

    user_id: str
    credit: float | None


def _numeric_id(provider_id: str, what: str) -> str:
    text = str(provider_id).strip()
    if not text.isdigit() or int(text) <= 0:
        raise ProviderError(
            f"{what} {clean_line(str(provider_id), 60)!r} is not a Vast.ai id",
            fix="Vast.ai ids are positive integers; check the run record",
        )
    return text


def build_create_body(
    request: CreateRequest, host_key_env: dict[str, str] | None = None
) -> dict[str, Any]:
    """The JSON body of `PUT /api/v0/asks/{id}/`: on-demand (no `price`), SSH direct+proxy.

    `onstart` is the boot guard (providers/boot_guard.py) followed by the request's own start
    script, kept apart from any bootstrap command (the bootstrap runs over SSH later); a merged
    text over Vast's cap is refused before anything is sent. `SSH_PUBLIC_KEY` joins the env
    when a key is given.
    """
    env: dict[str, str] = {}
    for name, value in request.env.items():
        if not _ENV_NAME.match(name):
            # A name starting with "-" would be read by Vast as a docker option (-p, -v …).
            raise ProviderError(
                f"environment variable name {clean_line(name, 80)!r} is not valid",
                fix="use letters, digits and _ only, not starting with a digit",
            )
        env[name] = value
    if request.ssh_public_key:
        env["SSH_PUBLIC_KEY"] = request.ssh_public_key.strip()
    env.update(host_key_env or {})  # the pinned host key's pieces (vast_host_key.py)
    body: dict[str, Any] = {
        "client_id": "me",
        "image": request.image,
        "env": env,
        "disk": float(request.disk_gb),
        "label": request.label,
        "runtype": RUNTYPE,
        "cancel_unavail": True,
    }
    try:
        body["onstart"] = vast_onstart(request.onstart)
    except OnstartTooLong as exc:
        raise ProviderError(str(exc), fix="shorten [vastai] onstart") from None
    return body


def bid_mismatch(row: Mapping[str, Any], bid: float) -> str | None:
    """Why an instance row is not an interruptible one at `bid` (`is_bid`, and its GPU price
    `dph_base` when it has one, within rounding), or None when it is."""
    if row.get("is_bid") is not True:
        price = row.get("dph_total")
        shown = f" at {price:.3f} $/h" if isinstance(price, int | float) else ""
        return f"on demand (is_bid is not true){shown}"
    base = row.get("dph_base")
    price = float(base) if isinstance(base, int | float) and not isinstance(base, bool) else None
    if price is not None and price > bid * BID_PRICE_SLACK + 1e-6:
        return f"a bid at {price:.3f} $/h (dph_base), not ours"
    return None


def _parse(response: httpx.Response, redact: Redactor) -> Answer:
    return Answer.parse(
        response.status_code,
        response.content,
        response.headers.get("content-type", ""),
        redact=redact,  # before any text of it is cut
    )


def _account_key_texts(body: Any) -> list[str]:
    """Key texts from `GET /ssh/`: a list, or `{"ssh_keys": [...]}`; text in
    `public_key`, `key` or `ssh_key` (sources disagree, so accept all)."""
    rows = body.get("ssh_keys") if isinstance(body, Mapping) else body
    if isinstance(rows, str):  # some endpoints send the list as a JSON string
        try:
            rows = json.loads(rows)
        except ValueError:
            rows = None
    if not isinstance(rows, list):
        return []
    texts: list[str] = []
    for row in rows:
        if isinstance(row, str):
            texts.append(row)
        elif isinstance(row, Mapping):
            texts.extend(
                value
                for key in ("public_key", "key", "ssh_key")
                if isinstance(value := row.get(key), str)
            )
    return texts


class VastAiProvider(ProviderBase):
    """`Provider` for Vast.ai. One instance per run; close it with `aclose()`."""

    info = ProviderInfo(
        name=PROVIDER_NAME,
        billing=True,
        notes=(
            "on-demand instances (or bids, [vastai] rental); price is dph_total (GPU + "
            "storage, USD/h)",
            "SSH direct when the host maps port 22, else the Vast SSH proxy",
        ),
        rotates_host_key=True,
    )

    def __init__(
        self,
        *,
        api_key: str,
        api_url: str = DEFAULT_API_URL,
        ssh_user: str = "root",
        image_gb: float = 0.0,
        timeout_s: float = 30.0,
        rate_limit_retries: int = 5,
        rate_limit_base_delay_s: float = 1.0,
        transport: httpx.AsyncBaseTransport | None = None,
        pin_host_key: bool = True,
        rental: str = "on-demand",
        bid_factor: float = 1.0,
    ) -> None:
        if rental not in RENTALS:
            raise ProviderError(f"[vastai] rental = {clean_line(rental, 40)!r} is not one of "
                                f"{', '.join(RENTALS)}", fix='set [vastai] rental = "on-demand"')
        self._bid_factor = max(1.0, bid_factor) if rental == "bid" else None
        # The v0 single-instance routes that answered 410 in this process ("read",
        # "delete"): `check --live` reports which routes a real account still serves.
        self.v0_retired: set[str] = set()
        self._http: MarketplaceClient[Answer] = MarketplaceClient(
            MARKET,
            api_key=api_key,
            api_url=api_url,
            parse=_parse,
            timeout_s=timeout_s,
            rate_limit_retries=rate_limit_retries,
            rate_limit_base_delay_s=rate_limit_base_delay_s,
            transport=transport,
        )
        self._api_url = self._http.api_url
        self._redact = self._http.redact
        self._pin_host_key = pin_host_key
        self._host_keys: dict[str, HostKeyPlan] = {}  # label → its pinned host key (secret)
        self._ssh_user = ssh_user
        self._image_gb = max(0.0, image_gb)  # [image] size_gb: priced into each offer's pull
        self._retries = self._http.retries
        self.last_skipped: list[str] = []
        """Why rows of the last search were left out (malformed, or outside the policy)."""

    def __repr__(self) -> str:
        return f"VastAiProvider(api_url={self._api_url!r}, ssh_user={self._ssh_user!r})"

    async def aclose(self) -> None:
        await self._http.aclose()

    # -- the HTTP exchange ----------------------------------------------------------------

    async def _call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | int] | None = None,
        body: Any = None,
    ) -> Answer | NoAnswer:
        """One API call through the shared client: 429s are retried with exponential
        back-off (Vast sends no Retry-After, but one is honoured when present)."""
        return await self._http.call(method, path, params=params, body=body)

    def _error(self, answer: Answer, action: str) -> ProviderError:
        """A ProviderError for an answer that is not what `action` needs."""
        return self._http.error(
            action, answer.status, answer.detail(), auth_failed=is_auth_failure(answer)
        )

    def _unreachable(self, no_answer: NoAnswer, action: str) -> ProviderError:
        return self._http.unreachable(no_answer, action)

    def _usable(
        self, answer: Answer | NoAnswer, action: str, *, need_object: bool = False
    ) -> Answer:
        """`answer` when `action` can use it; no answer, a status outside 2xx or (with
        `need_object`) a body that is not a JSON object raises the shared wording (ApiErrors)."""
        if isinstance(answer, NoAnswer):
            raise self._unreachable(answer, action)
        if not 200 <= answer.status < 300 or (need_object and not isinstance(answer.body, Mapping)):
            raise self._error(answer, action)
        return answer

    # -- Provider ---------------------------------------------------------------------------

    async def search_offers(self, policy: SelectionPolicy) -> list[Offer]:
        """Offers matching `policy`, cheapest first; rows left out are in `last_skipped`."""
        action = "searching offers"
        bidding = self._bid_factor is not None
        answer = self._usable(
            await self._call("POST", "/api/v0/bundles/",
                             body=build_search_query(policy, bid=bidding)), action
        )
        try:
            page = read_offers(answer.body, policy, redact=self._redact,
                               bid_factor=self._bid_factor)
        except MalformedOffer as exc:
            raise ProviderError(
                f"Vast.ai answered the offer search with no offer list ({exc}; "
                f"{self._redact(answer.detail())})",
                fix=f"retry; if it persists, check [vastai] api_url ({self._api_url})",
                http_status=answer.status,
            ) from None
        self.last_skipped = [self._redact(reason) for reason in page.skipped]
        return [self._priced(self._redacted_offer(offer)) for offer in page.offers]

    def _priced(self, offer: Offer) -> Offer:
        """The offer with this run's image pull priced in (Vast bills it per GB)."""
        pull = round(self._image_gb * offer.download_usd_per_gb, 6)
        return dataclasses.replace(offer, pull_usd=pull) if pull else offer

    def host_key_for(self, label: str) -> str | None:
        """The public host key the instance of attempt `label` will present (pinned in the
        record before the create): made here, its private half sent in the create's env and
        installed by the instance's onstart (providers/vastai/host_key.py). None when
        `[vastai] pin_host_key` is off: the first connection then pins what answers."""
        if not self._pin_host_key:
            return None
        plan = HostKeyPlan.new()
        self._redact.add(plan.private_b64)
        for piece in plan.env().values():
            self._redact.add(piece)
        self._host_keys[label] = plan
        return plan.public

    async def create(self, offer: Offer, request: CreateRequest) -> CreateResult:
        """Rent `offer` on demand; every answer becomes an `Outcome` (see vastai_answers)."""
        if offer.provider != PROVIDER_NAME:
            return CreateResult(
                Outcome.REJECTED, detail=f"offer is from {clean_line(offer.provider, 40)!r}"
            )
        offer_id = _numeric_id(offer.offer_id, "offer id")
        plan = self._host_keys.get(request.label)
        body = build_create_body(request, plan.env() if plan is not None else None)
        if self._bid_factor is not None:
            if not offer.bid:
                return CreateResult(Outcome.REJECTED, detail=(
                    f"offer {offer_id} carries no bid, and [vastai] rental = \"bid\": search "
                    "the offers again"))
            body["price"] = offer.bid_per_hour  # absent, Vast rents on demand (silently)
        answer = await self._call("PUT", f"/api/v0/asks/{offer_id}/", body=body)
        if isinstance(answer, NoAnswer):
            if not answer.sent:
                raise self._unreachable(answer, f"renting offer {offer_id} (nothing was created)")
            return CreateResult(Outcome.AMBIGUOUS, detail=answer.reason)
        if answer.status == 429:
            raise self._error(answer, f"renting offer {offer_id} (nothing was created)")
        result = classify_create(answer)
        result = CreateResult(
            outcome=result.outcome,
            provider_id=result.provider_id,
            detail=self._redact(result.detail),
            http_status=result.http_status,
        )
        if self._bid_factor is None or result.provider_id is None:
            return result
        if result.outcome is Outcome.AMBIGUOUS:  # an error with a new_contract: bid too low
            return dataclasses.replace(result, outcome=Outcome.UNAVAILABLE, detail=(
                f"Vast.ai refused our bid of {offer.bid_per_hour:.3f} $/h on offer {offer_id} "
                f"and left instance {result.provider_id} stopped (it is destroyed): "
                f"{result.detail}"))
        if result.outcome is Outcome.CREATED:
            return await self._check_bid(offer, result)
        return result

    async def _check_bid(self, offer: Offer, result: CreateResult) -> CreateResult:
        """The created instance read back: an interruptible one at our bid, or REJECTED with
        its id (the walk destroys it, confirmed): Vast may rent on demand without a word."""
        instance = result.provider_id or ""
        row: Mapping[str, Any] | None = None
        for _ in range(BID_CHECK_READS):
            reply = await self._read_one(instance)
            if isinstance(reply, NoAnswer) or not isinstance(reply.body, Mapping):
                continue
            found = reply.body.get("instances")
            if isinstance(found, Mapping):
                row = found
                break
        if row is None:
            return dataclasses.replace(result, outcome=Outcome.UNAVAILABLE, detail=(
                f"instance {instance} could not be read back to check it is a bid at "
                f"{offer.bid_per_hour:.3f} $/h: it is destroyed, not kept unchecked"))
        why = bid_mismatch(row, offer.bid_per_hour)
        if why is None:
            return result
        return dataclasses.replace(result, outcome=Outcome.REJECTED, detail=(
            f"Vast.ai made instance {instance} {why} although we bid "
            f"{offer.bid_per_hour:.3f} $/h: it is destroyed; set [vastai] rental = "
            "\"on-demand\" to rent on demand"))

    async def get(self, provider_id: str) -> LeaseStatus:
        """The instance as Vast reports it now; `{"instances": null}` or 404 → GONE."""
        instance = _numeric_id(provider_id, "instance id")
        action = f"reading instance {instance}"
        reply = await self._call("GET", f"/api/v0/instances/{instance}/", params={"owner": "me"})
        if not isinstance(reply, NoAnswer) and reply.status == V0_RETIRED:
            self.v0_retired.add("read")
            return await self._get_v1(instance, action)
        if not isinstance(reply, NoAnswer) and is_instance_gone(reply):
            return gone(instance, self._redact(reply.detail()))
        answer = self._usable(reply, action, need_object=True)
        row = answer.body.get("instances", ...)
        if isinstance(row, list):  # tolerate the list shape some API versions send
            row = next(
                (r for r in row if isinstance(r, Mapping) and instance_id(r) == instance), None
            )
        if row is None:
            return gone(instance, "Vast.ai no longer lists it")
        if not isinstance(row, Mapping):
            raise self._error(answer, action)
        if instance_id(row) not in (None, instance):
            raise ProviderError(
                f"Vast.ai answered {action} with another instance's row",
                fix="retry; if it persists, report it to Vast.ai support",
            )
        status = lease_status(row, user=self._ssh_user, provider_id=instance, redact=self._redact)
        return self._redacted(status)

    async def _read_one(self, instance: str) -> Answer | NoAnswer:
        """`GET /api/v0/instances/{id}/?owner=me`; after a 410 there, the v1 list's row for the
        id in the v0 shape (`{"instances": row | null}`), so every caller reads one shape."""
        reply = await self._call("GET", f"/api/v0/instances/{instance}/", params={"owner": "me"})
        if isinstance(reply, NoAnswer) or reply.status != V0_RETIRED:
            return reply
        self.v0_retired.add("read")
        return await self._v1_row(instance)

    async def _v1_row(self, instance: str) -> Answer | NoAnswer:
        """The v1 list (as the CLI calls it) filtered on the id: its answer, with a 2xx body
        recast as `{"instances": <the row> | None}`."""
        params: dict[str, str | int] = {
            "select_filters": json.dumps({"id": {"eq": int(instance)}}),
            "order_by": json.dumps([{"col": "id", "dir": "asc"}]),
            "limit": LIST_PAGE_SIZE,
        }
        reply = await self._call("GET", "/api/v1/instances/", params=params)
        if isinstance(reply, NoAnswer) or not 200 <= reply.status < 300:
            return reply
        rows = reply.body.get("instances") if isinstance(reply.body, Mapping) else None
        if not isinstance(rows, list):
            return dataclasses.replace(reply, body=None)  # not the list's shape: unusable
        row = next((r for r in rows if isinstance(r, Mapping) and instance_id(r) == instance),
                   None)
        return dataclasses.replace(reply, body={"instances": row})

    async def _get_v1(self, instance: str, action: str) -> LeaseStatus:
        """`get` after a 410 on the v0 read: the v1 list's row, or GONE when it lists none."""
        answer = self._usable(await self._v1_row(instance), f"{action} (v1 list, after the "
                              "v0 read answered 410)", need_object=True)
        row = answer.body.get("instances")
        if not isinstance(row, Mapping):
            return gone(instance, "Vast.ai's v1 instance list no longer lists it")
        status = lease_status(row, user=self._ssh_user, provider_id=instance, redact=self._redact)
        return self._redacted(status)

    async def list_by_label(self, prefix: str) -> list[LeaseStatus]:
        """Every instance on the account whose label starts with `prefix` (the v1 list,
        all pages; the label filter runs here, as Vast has no prefix operator)."""
        action = "listing instances"
        params: dict[str, str | int] = {
            "select_filters": json.dumps({}),
            "order_by": json.dumps([{"col": "id", "dir": "asc"}]),
            "limit": LIST_PAGE_SIZE,
        }
        found: list[LeaseStatus] = []
        seen_tokens: set[str] = set()
        for _ in range(_MAX_LIST_PAGES):
            answer = self._usable(
                await self._call("GET", "/api/v1/instances/", params=params),
                action,
                need_object=True,
            )
            rows = answer.body.get("instances") or []
            if not isinstance(rows, list):
                raise self._error(answer, action)
            for row in rows:
                if not isinstance(row, Mapping) or instance_id(row) is None:
                    continue
                label = row.get("label")
                if isinstance(label, str) and label.startswith(prefix):
                    status = lease_status(row, user=self._ssh_user, redact=self._redact)
                    found.append(self._redacted(status))
            token = answer.body.get("next_token")
            if not isinstance(token, str) or not token:
                return found
            if token in seen_tokens:
                raise ProviderError(
                    f"Vast.ai's instance list repeated a page token while {action}",
                    fix="retry; if it persists, report it to Vast.ai support",
                )
            seen_tokens.add(token)
            params["after_token"] = token
        raise ProviderError(
            f"Vast.ai's instance list did not end after {_MAX_LIST_PAGES} pages",
            fix="retry; if it persists, report it to Vast.ai support",
        )

    async def destroy(self, provider_id: str) -> DestroyResult:
        """Ask Vast to destroy the instance (stops all billing). No retry beyond 429s: the
        lease walk retries and confirms with `get`/`list_by_label`."""
        instance = _numeric_id(provider_id, "instance id")
        answer = await self._call("DELETE", f"/api/v0/instances/{instance}/", body={})
        if not isinstance(answer, NoAnswer) and answer.status == V0_RETIRED:
            # Never "gone" on a 410: the same destroy on v1, then confirmed as ever (get).
            self.v0_retired.add("delete")
            retired = self._redact(answer.detail())
            answer = await self._call("DELETE", f"/api/v1/instances/{instance}/", body={})
            if not isinstance(answer, NoAnswer) and not 200 <= answer.status < 300:
                return DestroyResult(
                    DestroyOutcome.FAILED,
                    detail=self._redact(f"v0 destroy: {retired}; v1 destroy: {answer.detail()}"),
                    http_status=answer.status,
                )
        if isinstance(answer, NoAnswer):
            return DestroyResult(DestroyOutcome.FAILED, detail=answer.reason)
        if answer.status == 429:
            return DestroyResult(
                DestroyOutcome.FAILED,
                detail=f"rate-limited: HTTP 429 after {self._retries} retries",
                http_status=429,
            )
        result = classify_destroy(answer)
        return DestroyResult(
            result.outcome, detail=self._redact(result.detail), http_status=result.http_status
        )

    # -- account ------------------------------------------------------------------------------

    async def ensure_ssh_key(self, public_key_openssh: str) -> bool:
        """Make sure the account holds this public key (Vast copies account keys into new
        instances). Returns True when it was registered now (and listed again to check),
        False when already there."""
        return await ensure_account_key(
            MARKET,
            public_key_openssh,
            list_keys=self._account_keys,
            register=self._register_key,
            keys_page=KEYS_PAGE,
        )

    async def _account_keys(self) -> list[str]:
        answer = self._usable(await self._call("GET", "/api/v0/ssh/"), "listing account SSH keys")
        return _account_key_texts(answer.body)

    async def _register_key(self, _present: list[str], key_line: str) -> None:
        posted = await self._call("POST", "/api/v0/ssh/", body={"ssh_key": key_line})
        if not isinstance(posted, NoAnswer) and posted.error_code == "team_ssh_keys_not_supported":
            raise ProviderError(
                "Vast.ai does not take SSH keys from a team API key",
                fix=f"use a personal API key, or add the key once at {KEYS_PAGE}",
                http_status=posted.status,
            )
        registered = self._usable(posted, "registering the SSH key")
        if registered.success is False:
            raise self._error(registered, "registering the SSH key")

    async def account(self) -> VastAccount:
        """The key's account (a cheap check that the key works); raises on a bad key."""
        answer = self._usable(
            await self._call("GET", "/api/v0/users/current/"),
            "checking the API key",
            need_object=True,
        )
        credit = answer.body.get("credit")
        return VastAccount(
            user_id=clean_line(str(answer.body.get("id", "")), 40, redact=self._redact),
            credit=float(credit)
            if isinstance(credit, int | float) and not isinstance(credit, bool)
            else None,
        )

    @property
    def server_date(self) -> tuple[str, float] | None:
        """The last answer's Date header and this clock's time when it came."""
        return self._http.last_date

    def _redacted_offer(self, offer: Offer) -> Offer:
        """Offer text is provider text too; scrub it (a no-op unless a secret is echoed)."""
        texts = (offer.gpu_name, offer.location, offer.cpu)
        if not any(self._redact(text) != text for text in texts):
            return offer
        return dataclasses.replace(
            offer,
            gpu_name=self._redact(offer.gpu_name),
            location=self._redact(offer.location),
            cpu=self._redact(offer.cpu),
        )

    def _redacted(self, status: LeaseStatus) -> LeaseStatus:
        """Provider text (label, status_msg) could echo a secret; scrub it."""
        label = self._redact(status.label) if status.label is not None else None
        return dataclasses.replace(status, label=label, detail=self._redact(status.detail))


def build(config: Config, on_line: LineHandler | None = None) -> VastAiProvider:
    """The kind's factory (providers/vastai/kind.py); a ConfigError (exit 2) without a key."""
    vast = config.settings.of(VastaiSection)
    api_key = vast.api_key if vast else None
    if vast is None or not api_key:  # build_provider names the key and its fix first
        raise ConfigError("[vastai] api_key is required when provider=vastai")
    return VastAiProvider(
        api_key=api_key,
        api_url=vast.api_url,
        ssh_user=vast.ssh_user,
        image_gb=config.settings.image.size_gb,
        pin_host_key=vast.pin_host_key,
        rental=vast.rental,
        bid_factor=vast.bid_factor,
    )
