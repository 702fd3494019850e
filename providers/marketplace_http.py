"""The one HTTP client both GPU marketplaces (Vast.ai, RunPod) are spoken to through.

What every marketplace call shares lives here, once: the API key and URL checks (https,
or http to loopback only: the key rides on every call), the httpx
client (`Authorization: Bearer` only, so the key never goes into a URL; redirects never
followed, since one must never carry the key elsewhere; no proxy from the environment), the
call-and-retry loop (a 429 is a refusal made before anything was done, so it is waited out,
per `Retry-After` when sent, else `base_delay_s * 2**attempt`, capped at 60 s, and sent
again), the no-answer type, the SSH public key check, the account-key flow (list, register,
list again) and one error wording (`ApiErrors`: a `ProviderError` that names what was being
done and the fix). Every text that leaves passes a `Redactor` that knows the key.

Each marketplace keeps what is its own: how an answer's body reads (`parse`), which answers
mean a refused key, and how a create or destroy answer is classified.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import httpx

from mvp_tui.node_protocol import base_url_problem, is_loopback_name, shown_url, url_host
from mvp_tui.providers.base import ProviderError
from mvp_tui.secrets import Redactor
from mvp_tui.untrusted import clean_line

MAX_BACKOFF_S = 60.0
# The OpenSSH public key types an account key may have; anything else is not a key line.
KEY_TYPES = frozenset(
    {
        "ssh-ed25519",
        "ssh-rsa",
        "ssh-dss",
        "ecdsa-sha2-nistp256",
        "ecdsa-sha2-nistp384",
        "ecdsa-sha2-nistp521",
        "sk-ssh-ed25519@openssh.com",
        "sk-ecdsa-sha2-nistp256@openssh.com",
    }
)
Sleep = Callable[[float], Awaitable[None]]


class _Answered(Protocol):
    @property
    def status(self) -> int: ...


A = TypeVar("A", bound=_Answered)


@dataclass(frozen=True, slots=True)
class NoAnswer:
    """A call that got no HTTP answer. `sent` is False only when the request surely never
    reached the server (the connection could not be opened)."""

    sent: bool
    reason: str


@dataclass(frozen=True, slots=True)
class Marketplace:
    """One marketplace's facts the shared client needs: its name, where its settings live,
    its URL's shape and the fixes its errors name."""

    name: str  # "Vast.ai"
    section: str  # "vastai": the config section holding api_key / api_url
    url_env: str  # [section] api_url's env name (node_protocol.api_url_env)
    url_example: str  # shown in the fix for a bad api_url
    auth_fix: str
    rate_limit_fix: str
    user_agent: str
    url_may_have_path: bool = False  # RunPod's base is ".../v2"

    @property
    def network_fix(self) -> str:
        return f"check the network and [{self.section}] api_url / {self.url_env}, then retry"


@dataclass(frozen=True, slots=True)
class ApiErrors:
    """How one marketplace's HTTP API failures read. One wording for every provider."""

    market: Marketplace
    api_url: str

    def answer(
        self, action: str, status: int, detail: str, *, auth_failed: bool, retries: int
    ) -> ProviderError:
        """A ProviderError for an answer (`detail` already redacted) that `action` can't use."""
        name = self.market.name
        if auth_failed:
            return ProviderError(
                f"{name} refused the API key while {action} ({detail})",
                fix=self.market.auth_fix,
                http_status=status,
            )
        if status == 429:
            return ProviderError(
                f"{name} kept rate-limiting {action}: HTTP 429 after {retries} retries",
                fix=self.market.rate_limit_fix,
                http_status=429,
            )
        if status >= 500:
            return ProviderError(
                f"{name} failed while {action} ({detail})",
                fix="a server-side error: retry in a minute",
                http_status=status,
            )
        return ProviderError(
            f"{name} rejected {action} ({detail})",
            fix=f"check the values sent and [{self.market.section}] api_url ({self.api_url})",
            http_status=status,
        )

    def no_answer(self, action: str, reason: str) -> ProviderError:
        return ProviderError(
            f"no answer from {self.market.name} at {self.api_url} while {action}: {reason}",
            fix=self.market.network_fix,
        )


def checked_api_key(api_key: str, market: Marketplace) -> str:
    """`api_key` when it can go in a header; a ProviderError naming the marketplace otherwise."""
    if not api_key or not api_key.strip():
        raise ProviderError(f"no {market.name} API key is configured", fix=market.auth_fix)
    if any(not (33 <= ord(c) < 127) for c in api_key):
        raise ProviderError(
            f"the {market.name} API key contains spaces or non-printable characters",
            fix=market.auth_fix,
        )
    return api_key


def checked_api_url(api_url: str, market: Marketplace) -> str:
    """The base URL without a trailing slash; a ProviderError naming the setting otherwise.
    Read with httpx's own parser (the one that sends the key): scheme and host (and, where
    the market has one, a base path) only; user info, a query or a fragment is refused, and
    plain http goes to a loopback host only, decided on the host httpx connects to."""
    url = api_url.strip().rstrip("/")
    shown = shown_url(api_url)
    where = f"[{market.section}] api_url ({market.url_env}) {shown!r}"
    example = f'e.g. "{market.url_example}"'
    problem = base_url_problem(url, plain_http_ok=False)
    parsed: httpx.URL | None = None
    if problem is None:
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL:
            problem = "does not parse as a URL"
    if parsed is not None and (parsed.userinfo or parsed.query or parsed.fragment):
        problem = "holds user info, a query or a fragment"
    elif parsed is not None and parsed.host != url_host(url):
        problem = "reads as two different hosts to two URL parsers"
    elif parsed is not None and parsed.path not in ("", "/") and not market.url_may_have_path:
        problem = "has a path"
    plain = parsed is not None and parsed.scheme == "http"
    if problem is None and plain and parsed is not None and not is_loopback_name(parsed.host):
        problem = "is plain http to a host that is not loopback"  # httpx's host, once more
    if problem is None:
        return url
    if "plain http" in problem:
        raise ProviderError(
            f"{where} {problem}: the {market.name} API key would cross the network "
            "unencrypted",
            fix=f"use https, {example} (http:// only to 127.0.0.1/localhost)",
        )
    scope = "the scheme and host (and base path)" if market.url_may_have_path else (
        "the scheme and host only")
    raise ProviderError(f"{where} is not a base URL: it {problem}",
                        fix=f"use {scope}, {example}")


def key_identity(text: str) -> tuple[str, str] | None:
    """(type, base64 blob) of an OpenSSH public key line; comments and spacing do not count."""
    fields = text.strip().split()
    if len(fields) < 2 or fields[0] not in KEY_TYPES:
        return None
    try:
        base64.b64decode(fields[1], validate=True)
    except (binascii.Error, ValueError):
        return None
    return fields[0], fields[1]


def checked_public_key(text: str, market: Marketplace) -> tuple[str, str]:
    """The key's identity, or a ProviderError (never quoting the text: it may be a secret)."""
    if "PRIVATE KEY" in text:
        raise ProviderError(
            f"refusing to register a private key as a {market.name} account SSH key",
            fix="pass the public key (the .pub file), never the private key",
        )
    identity = key_identity(text)
    if identity is None:
        raise ProviderError(
            "the SSH public key is not in OpenSSH format",
            fix='expected one line like "ssh-ed25519 AAAAC3… comment"',
        )
    return identity


class MarketplaceClient(Generic[A]):
    """One marketplace's HTTP exchange. `parse` reads a response into that marketplace's
    answer type (redacting with the client's redactor before any text is cut)."""

    def __init__(
        self,
        market: Marketplace,
        *,
        api_key: str,
        api_url: str,
        parse: Callable[[httpx.Response, Redactor], A],
        timeout_s: float = 30.0,
        rate_limit_retries: int = 5,
        rate_limit_base_delay_s: float = 1.0,
        sleep: Sleep = asyncio.sleep,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        key = checked_api_key(api_key, market)
        self.market = market
        self.api_url = checked_api_url(api_url, market)
        self.errors = ApiErrors(market, self.api_url)
        self.redact = Redactor([key])
        self.timeout_s = timeout_s
        self.retries = max(0, rate_limit_retries)
        self._base_delay_s = max(0.0, rate_limit_base_delay_s)
        self._sleep = sleep
        self._parse = parse
        self.rate_limited_waits: list[float] = []  # each 429 waited out, in seconds
        # The last answer's Date header (the server's clock, untrusted text) and this
        # clock's time when it came: `mvp-tui check` compares the two.
        self.last_date: tuple[str, float] | None = None
        self._http = httpx.AsyncClient(
            base_url=self.api_url,
            headers={
                "Authorization": f"Bearer {key}",
                "Accept": "application/json",
                "User-Agent": market.user_agent,
            },
            timeout=httpx.Timeout(timeout_s),
            transport=transport,
            follow_redirects=False,  # a redirect must never carry the bearer key elsewhere
            trust_env=False,
        )

    @property
    def stream_client(self) -> httpx.AsyncClient:
        """The authenticated client itself, for a read this loop cannot make (a stream)."""
        return self._http

    async def aclose(self) -> None:
        await self._http.aclose()

    async def call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | int] | None = None,
        body: Any = None,
        timeout_s: float | None = None,
    ) -> A | NoAnswer:
        """One API call; 429s are waited out and sent again up to `rate_limit_retries`
        times. Returns the last answer, or NoAnswer when none came."""
        timeout = self.timeout_s if timeout_s is None else timeout_s
        attempt = 0
        while True:
            try:
                response = await self._http.request(
                    method, path, params=params, json=body, timeout=timeout
                )
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
                return NoAnswer(sent=False, reason=self.why(exc, timeout))
            except httpx.TransportError as exc:  # timeouts and resets after sending
                return NoAnswer(sent=True, reason=self.why(exc, timeout))
            if date := response.headers.get("date"):
                self.last_date = (date, time.time())
            answer = self._parse(response, self.redact)
            if answer.status != 429 or attempt >= self.retries:
                return answer
            wait = self._backoff_s(attempt, response)
            self.rate_limited_waits.append(wait)
            await self._sleep(wait)
            attempt += 1

    def _backoff_s(self, attempt: int, response: httpx.Response) -> float:
        try:
            wait = float(response.headers.get("retry-after", ""))
        except ValueError:
            wait = self._base_delay_s * 2**attempt
        return min(max(wait, 0.0), MAX_BACKOFF_S)

    def why(self, exc: httpx.HTTPError, timeout_s: float) -> str:
        kind = type(exc).__name__
        if isinstance(exc, httpx.TimeoutException):
            return f"no answer within {timeout_s:g} s ({kind})"
        text = clean_line(str(exc), 200, redact=self.redact) or "no detail"
        return f"{kind}: {text}"

    def error(self, action: str, status: int, detail: str, *, auth_failed: bool) -> ProviderError:
        return self.errors.answer(
            action, status, self.redact(detail), auth_failed=auth_failed, retries=self.retries
        )

    def unreachable(self, no_answer: NoAnswer, action: str) -> ProviderError:
        return self.errors.no_answer(action, no_answer.reason)


async def ensure_account_key(
    market: Marketplace,
    public_key_openssh: str,
    *,
    list_keys: Callable[[], Awaitable[list[str]]],
    register: Callable[[list[str], str], Awaitable[None]],
    keys_page: str,
) -> bool:
    """Make sure the account holds this public key: True when it was registered now, False
    when it was already there. A registration is checked by listing the keys again (a POST
    that did not take would otherwise show up only later, as SSH login refusals)."""
    identity = checked_public_key(public_key_openssh, market)
    texts = await list_keys()
    if identity in {key_identity(text) for text in texts}:
        return False
    await register(texts, " ".join(public_key_openssh.strip().split()))
    if identity not in {key_identity(text) for text in await list_keys()}:
        raise ProviderError(
            f"{market.name} accepted the SSH key but does not list it on the account "
            f"({identity[0]} key)",
            fix=f"add the public key by hand at {keys_page}, then run again",
        )
    return True
