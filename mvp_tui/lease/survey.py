"""What a sweep would do, counted before it asks: `down`'s confirm says it in numbers."""

from __future__ import annotations

import time
from dataclasses import dataclass

from mvp_tui.labels import check_prefix
from mvp_tui.lease.ownership import Holdings, Stranger, Whose, claim
from mvp_tui.lease.records import RecordStore
from mvp_tui.lease.teardown import Clock
from mvp_tui.providers.base import LeaseState, Provider, ProviderError


@dataclass(frozen=True, slots=True)
class Survey:
    """One provider's account as a sweep would treat it (nothing is done to it here)."""

    provider: str
    recorded_runs: int  # runs recorded here with a lease that may bill
    recorded_leases: int  # their leases that may bill
    tagged: tuple[str, ...]  # ids carrying this install's tag that no record here holds
    strangers: tuple[Stranger, ...]  # named like ours, not made here: left alone
    error: str = ""  # the account could not be listed


async def survey(
    provider: Provider,
    store: RecordStore,
    *,
    label_prefix: str,
    owner_tag: str,
    run_id: str | None,
    clock: Clock = time.time,
) -> Survey:
    """Count what `down RUN` (or `down --all` when `run_id` is None) would destroy on
    `provider`, and what it would leave alone."""
    name = provider.info.name
    runs = [r for r in store.scan().runs if r.provider == name and r.is_open
            and (run_id is None or r.run_id == run_id)]
    leases = sum(len(r.open_leases()) for r in runs)
    if not provider.info.billing:
        return Survey(name, len(runs), leases, (), ())
    try:
        listed = await provider.list_by_label(f"{check_prefix(label_prefix)}-")
    except ProviderError as exc:
        return Survey(name, len(runs), leases, (), (), error=str(exc))
    holdings = Holdings.of(store.scan().runs, name)
    tagged: list[str] = []
    strangers: list[Stranger] = []
    for status in listed:
        if status.state is LeaseState.GONE:
            continue
        whose = claim(status, label_prefix, owner_tag, holdings)
        if whose.whose is Whose.STRANGER:
            strangers.append(Stranger.of(name, status, whose.why, clock()))
        elif whose.whose is Whose.TAGGED and run_id in (None, whose.run_id):
            tagged.append(status.provider_id)
    return Survey(name, len(runs), leases, tuple(tagged), tuple(strangers))
