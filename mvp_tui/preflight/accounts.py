"""The marketplace checks: each provider's API key proven by one authenticated read that
spends nothing (Vast.ai's current user, RunPod's pod list), and this machine's clock against
the Date header of the answers."""

from __future__ import annotations

import asyncio
import email.utils
import math
from dataclasses import dataclass
from datetime import UTC

from mvp_tui.config import Config, ConfigError
from mvp_tui.config.schema import BY_DOTTED
from mvp_tui.preflight.outcome import Check
from mvp_tui.providers import registry
from mvp_tui.providers.base import ProviderError

CLOCK_SKEW_S = 60.0  # more than this off the providers' clock fails the clock check
READ_BUDGET_S = 60.0  # one provider's read, its 429 waits included
MARKETS = registry.RENTED  # the marketplaces whose keys `check` proves (their kinds say)


@dataclass(frozen=True, slots=True)
class AccountRead:
    """One provider's check, the provider's own configuration when it applies (its key set,
    or it is the selected provider), and its server's Date header with our time then."""

    kind: str
    check: Check
    config: Config | None = None
    server_date: tuple[str, float] | None = None


def how_to_set(kind: str) -> str:
    """Where a provider's key may come from, with the env names the config reads."""
    key, file = BY_DOTTED[f"{kind}.api_key"], BY_DOTTED[f"{kind}.api_key_file"]
    return (
        f"set {' or '.join(key.env)}, or {file.env[0]} (or {file.label}) to a file holding "
        f"the key, mode 600; create a key at {registry.kind(kind).key_page}"
    )


def _key_set(config: Config, kind: str) -> bool:
    if config.provider == kind:
        return bool(config.values.get(f"{kind}.api_key"))
    return f"{kind}.api_key" in config.unused or f"{kind}.api_key_file" in config.unused


async def read_account(config: Config, kind: str) -> AccountRead:
    """`kind`'s key check: skipped without a key (failed when `kind` is the selected
    provider), else one authenticated read."""
    name, market = f"{kind} key", registry.title(kind)
    if not _key_set(config, kind):
        if config.provider != kind:
            return AccountRead(kind, Check.skipped(name, f"no {market} API key is set",
                                                   how_to_set(kind)))
        selected = config.sources["provider.kind"]
        return AccountRead(kind, Check.failed(
            name, f"no {market} API key is set, and the provider is {kind} ({selected})",
            how_to_set(kind),
        ), config)
    try:
        own = config.for_provider(kind)
    except ConfigError as exc:
        return AccountRead(kind, Check.failed(name, exc.message, exc.fix or how_to_set(kind)))
    check, date = await _read(own, kind)
    return AccountRead(kind, check, own, date)


async def _read(config: Config, kind: str) -> tuple[Check, tuple[str, float] | None]:
    from mvp_tui.engine.provider_factory import build_provider
    from mvp_tui.node_protocol import shown_url
    from mvp_tui.providers.runpod.client import RunPodProvider
    from mvp_tui.providers.vastai.client import VastAiProvider

    name = f"{kind} key"
    source = config.sources[f"{kind}.api_key"]
    host = shown_url(str(config.values[f"{kind}.api_url"]))
    try:
        provider = build_provider(config)
    except ConfigError as exc:
        return Check.failed(name, exc.message, exc.fix or how_to_set(kind)), None
    try:
        async with asyncio.timeout(READ_BUDGET_S):
            if isinstance(provider, VastAiProvider):
                account = await provider.account()
                credit = f", credit ${account.credit:.2f}" if account.credit is not None else ""
                found = f"account {account.user_id or '?'}{credit}"
            else:
                assert isinstance(provider, RunPodProvider)
                found = f"{await provider.account_pods()} pod(s) on the account"
        check = Check.ok(name, f"the key ({source}) works at {host}: {found}")
    except TimeoutError:
        check = Check.failed(name, f"no answer from {host} within {READ_BUDGET_S:g} s",
                             f"check the network and [{kind}] api_url, then retry")
    except ProviderError as exc:
        check = _refused(exc, kind, source) if _is_auth(exc, kind) else Check.failed(
            name, exc.message, exc.fix)
    finally:
        date = provider.server_date if isinstance(provider, VastAiProvider | RunPodProvider) \
            else None
        await provider.aclose()
    return check, date


def _is_auth(exc: ProviderError, kind: str) -> bool:
    """The provider refused the key: 401/403 (a Cloudflare 403 is RunPod's front refusing
    the client, not the key), or the provider's own auth wording (Vast's 404 for a revoked
    key)."""
    blocked = registry.kind(kind).blocked_marker
    if blocked and blocked in exc.message:
        return False
    return exc.http_status in (401, 403) or "refused the API key" in exc.message


def _refused(exc: ProviderError, kind: str, source: object) -> Check:
    return Check.failed(
        f"{kind} key", exc.message,
        f"the key from {source} was refused: put a valid one there, or {how_to_set(kind)}",
    )


def clock_check(reads: list[AccountRead]) -> Check:
    """This clock against the first provider's Date header (1 s resolution): more than
    `CLOCK_SKEW_S` apart fails. Skipped when no provider answered."""
    for read in reads:
        if read.server_date is None:
            continue
        header, local_at = read.server_date
        server_at = server_time(header)
        if server_at is None:
            continue
        off = local_at - server_at
        side = "ahead of" if off > 0 else "behind"
        market = registry.title(read.kind)
        if abs(off) > CLOCK_SKEW_S:
            return Check.failed(
                "clock",
                f"this machine's clock is {abs(off):.0f} s {side} {market}'s (its Date header); "
                "deadlines, spend and the node's dead-man's switch are reckoned in time",
                "set the clock right and keep it synced (e.g. `timedatectl set-ntp true`, or "
                "the system's date and time settings)",
            )
        return Check.ok("clock", f"within {abs(off):.0f} s of {market}'s clock (its Date "
                                 "header)")
    return Check.skipped("clock", "no provider answered, so there is no clock to compare with",
                         "set a Vast.ai or RunPod API key: the check compares with its server")


def server_time(header: str) -> float | None:
    """A Date header as a Unix time (a header without a zone reads as UTC); None when it
    does not parse."""
    try:
        when = email.utils.parsedate_to_datetime(header)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    stamp = when.timestamp()
    return stamp if math.isfinite(stamp) else None
