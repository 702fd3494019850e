"""Vast.ai offer search: the query sent to `POST /api/v0/bundles/` and the rows it answers.

The query speaks Vast's filter language (`{"field": {"op": value}}`, MB and Mbit/s units);
answers are normalised into `Offer` (units in providers/base.py) and re-checked against the
policy here, so a server that ignores a filter can never leak an offer outside it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from mvp_tui.providers.base import Offer, SelectionPolicy
from mvp_tui.untrusted import Redact, clean_line

PROVIDER_NAME = "vastai"
# Short provider strings (names, places) are cut well below clean_line's default.
_SHORT = 200


def gpu_name_for_api(name: str) -> str:
    """Vast wants "RTX 4090"; users (and the CLI) often write "RTX_4090"."""
    return " ".join(name.replace("_", " ").split())


def build_search_query(policy: SelectionPolicy, *, bid: bool = False) -> dict[str, Any]:
    """The JSON body of a bundles search for `policy`: on-demand, cheapest first; with
    `bid`, interruptible offers (`type: "bid"`) whose `min_bid` is within the price cap (the
    on-demand `dph_total` is then no limit: the bid is what is paid). With `policy.disk_gb`,
    `allocated_storage` prices that disk into `dph_total` (vast-cli `search_offers` always
    sends it) and `disk_space` asks the host for it; with `policy.min_cuda`, `cuda_max_good`
    keeps hosts whose driver is older than the image out."""
    query: dict[str, Any] = {"rentable": {"eq": True}}
    if policy.gpu_name:
        query["gpu_name"] = {"eq": gpu_name_for_api(policy.gpu_name)}
    if policy.min_gpu_ram_mb is not None:
        query["gpu_ram"] = {"gte": policy.min_gpu_ram_mb}
    if policy.min_down_mbps is not None:
        query["inet_down"] = {"gte": policy.min_down_mbps}
    if policy.min_up_mbps is not None:
        query["inet_up"] = {"gte": policy.min_up_mbps}
    if policy.min_reliability is not None:
        query["reliability2"] = {"gte": policy.min_reliability}
    if policy.require_verified:
        query["verified"] = {"eq": True}
    if policy.max_price_per_hour is not None:
        query["min_bid" if bid else "dph_total"] = {"lte": policy.max_price_per_hour}
    if policy.min_cuda is not None:
        # The image's CUDA floor: a host whose driver supports less refuses the container.
        query["cuda_max_good"] = {"gte": policy.min_cuda}
    if policy.disk_gb is not None:
        # As the CLI sends it: `dph_total` then includes the storage the create rents.
        query["disk_space"] = {"gte": policy.disk_gb}
        query["allocated_storage"] = policy.disk_gb
    query["order"] = [["min_bid" if bid else "dph_total", "asc"]]
    query["type"] = "bid" if bid else "on-demand"
    query["limit"] = policy.limit
    return query


class MalformedOffer(ValueError):
    """One offer row could not be read; the message names the field."""


def _number(row: Mapping[str, Any], key: str, *, required: bool) -> float | None:
    value = row.get(key)
    if type(value) is float or type(value) is int:  # the common case, fast (bool excluded)
        if math.isfinite(value):
            return float(value)
        raise MalformedOffer(f"field {key!r} is not finite")
    if value is None:
        if required:
            raise MalformedOffer(f"field {key!r} missing")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MalformedOffer(f"field {key!r} is not a number")
    number = float(value)
    if not math.isfinite(number):
        raise MalformedOffer(f"field {key!r} is not finite")
    return number


def _text(row: Mapping[str, Any], key: str, redact: Redact | None = None) -> str:
    value = row.get(key)
    if not isinstance(value, str):
        return ""
    if len(value) <= _SHORT and value.isascii() and value.isprintable():
        # Nothing to sanitise or cut: no escapes, no controls, short.
        return (redact(value) if redact is not None else value).strip()
    return clean_line(value, _SHORT, redact=redact).strip()  # redacted before it is cut


def _offer_id(row: Mapping[str, Any]) -> str:
    value = row.get("id")
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise MalformedOffer("field 'id' is not a positive integer")
    return str(value)


def _id_text(value: Any) -> str | None:
    """A host or machine id (a positive integer) as text; None when absent or not one."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return str(value)
    return None


def normalise_offer(row: Any, redact: Redact | None = None) -> Offer:
    """One bundles row as an `Offer`; raises `MalformedOffer` naming the bad field.

    Its texts are sanitised and, with `redact`, redacted before they are cut."""
    if not isinstance(row, Mapping):
        raise MalformedOffer("row is not a JSON object")
    offer_id = _offer_id(row)
    gpu_name = _text(row, "gpu_name", redact)
    if not gpu_name:
        raise MalformedOffer("field 'gpu_name' missing or empty")
    num_gpus = _number(row, "num_gpus", required=True)
    if num_gpus is None or num_gpus < 1 or num_gpus != int(num_gpus):
        raise MalformedOffer("field 'num_gpus' is not a positive integer")
    gpu_ram = _number(row, "gpu_ram", required=True)
    price = _number(row, "dph_total", required=True)
    if gpu_ram is None or gpu_ram < 0:
        raise MalformedOffer("field 'gpu_ram' is negative")
    if price is None or price < 0:
        raise MalformedOffer("field 'dph_total' is negative")
    reliability = _number(row, "reliability2", required=False)
    if reliability is None:
        reliability = _number(row, "reliability", required=False)
    host_id, machine_id = _id_text(row.get("host_id")), _id_text(row.get("machine_id"))
    cpu_ram = _number(row, "cpu_ram", required=False)
    return Offer(
        provider=PROVIDER_NAME,
        offer_id=offer_id,
        gpu_name=gpu_name,
        num_gpus=int(num_gpus),
        gpu_ram_mib=round(gpu_ram),  # Vast's "MB" are nvidia-smi MiB (an RTX 4090 says 24564)
        price_per_hour=price,
        reliability=reliability if reliability is not None else 0.0,
        down_mbps=_number(row, "inet_down", required=False) or 0.0,
        up_mbps=_number(row, "inet_up", required=False) or 0.0,
        location=_text(row, "geolocation", redact),
        cuda_max=_number(row, "cuda_max_good", required=False),
        host_id=host_id,
        machine_id=machine_id,
        verified=row.get("verification") == "verified",
        cpu=_text(row, "cpu_name", redact),
        ram_mib=round(cpu_ram) if cpu_ram is not None and cpu_ram > 0 else 0,
        download_usd_per_gb=max(0.0, _number(row, "inet_down_cost", required=False) or 0.0),
        mem_bw_gbps=max(0.0, _number(row, "gpu_mem_bw", required=False) or 0.0),
        disk_space_gb=_number(row, "disk_space", required=False),
    )


def as_bid(offer: Offer, row: Mapping[str, Any], factor: float,
           cap: float | None) -> Offer | str:
    """The offer priced at our bid: `min_bid` × `factor`, capped by `cap` (`[limits]
    max_price_per_hour`), plus the storage Vast bills besides (`dph_total` − `dph_base`); or
    why it cannot be bid on (no `min_bid`, or a floor above the cap: a bid under the floor
    would only leave a stopped instance)."""
    floor = _number(row, "min_bid", required=False)
    if floor is None or floor <= 0:
        return "no min_bid: not offered as interruptible"
    if cap is not None and floor > cap:
        return f"min_bid {floor} > max_price_per_hour {cap}"
    bid = floor * factor if cap is None else min(floor * factor, cap)
    base = _number(row, "dph_base", required=False)
    storage = max(0.0, offer.price_per_hour - base) if base is not None else 0.0
    bid = round(bid, 6)
    return replace(offer, price_per_hour=round(bid + storage, 6), bid_per_hour=bid,
                   on_demand_per_hour=offer.price_per_hour)


# Vast reports `cuda_max_good` as a float (12.8); a little slack for its rounding.
_CUDA_SLACK = 1e-6


def host_unfit(offer: Offer, policy: SelectionPolicy) -> str | None:
    """Why the offer's host cannot run this run's image or hold its disk (the image's CUDA
    floor, `disk_gb`), or None. Unknown counts as unfit: nothing proves it would start."""
    floor = policy.min_cuda
    if floor is not None and (offer.cuda_max is None or offer.cuda_max + _CUDA_SLACK < floor):
        have = "unknown" if offer.cuda_max is None else f"{offer.cuda_max:g}"
        return (f"cuda_max_good {have} < the image's CUDA floor {floor:g} ([image] cuda_min): "
                "its driver cannot start the image")
    disk = policy.disk_gb
    if disk is not None and (offer.disk_space_gb is None or offer.disk_space_gb < disk):
        have = "unknown" if offer.disk_space_gb is None else f"{offer.disk_space_gb:g} GB"
        return f"disk_space {have} < [vastai] disk_gb {disk:g} GB"
    return None


def policy_violation(offer: Offer, policy: SelectionPolicy) -> str | None:
    """Why `offer` falls outside `policy`, or None when it qualifies."""
    return _selection_violation(offer, policy) or host_unfit(offer, policy)


def _selection_violation(offer: Offer, policy: SelectionPolicy) -> str | None:
    """`policy_violation` less `host_unfit`: the offers the user did not ask to see."""
    if (
        policy.gpu_name
        and offer.gpu_name.casefold() != gpu_name_for_api(policy.gpu_name).casefold()
    ):
        return f"gpu_name {offer.gpu_name!r} is not {policy.gpu_name!r}"
    if policy.min_gpu_ram_mb is not None and offer.gpu_ram_mib < policy.min_gpu_ram_mb:
        return f"gpu_ram {offer.gpu_ram_mib} MB < min_gpu_ram_mb {policy.min_gpu_ram_mb}"
    if policy.min_down_mbps is not None and offer.down_mbps < policy.min_down_mbps:
        return f"inet_down {offer.down_mbps} Mbit/s < min_down_mbps {policy.min_down_mbps}"
    if policy.min_up_mbps is not None and offer.up_mbps < policy.min_up_mbps:
        return f"inet_up {offer.up_mbps} Mbit/s < min_up_mbps {policy.min_up_mbps}"
    if policy.min_reliability is not None and offer.reliability < policy.min_reliability:
        return f"reliability {offer.reliability} < min_reliability {policy.min_reliability}"
    if policy.require_verified and not offer.verified:
        return "not verified (require_verified is on)"
    cap = policy.max_price_per_hour
    if cap is not None and offer.bid_per_hour > cap:
        return f"bid {offer.bid_per_hour} > max_price_per_hour {cap}"
    if cap is not None and not offer.bid and offer.price_per_hour > cap:
        return f"dph_total {offer.price_per_hour} > max_price_per_hour {cap}"
    return None


@dataclass(slots=True)
class OfferPage:
    """Offers that qualify (cheapest first, at most `policy.limit`) and why others did not."""

    offers: list[Offer] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def _row_name(index: int, row: Any, redact: Redact | None = None) -> str:
    raw = row.get("id") if isinstance(row, Mapping) else None
    shown = clean_line(str(raw), 40, redact=redact) if raw is not None else "?"
    return f"offer row {index} (id {shown})"


def read_offers(answer: Any, policy: SelectionPolicy, *, redact: Redact | None = None,
                bid_factor: float | None = None) -> OfferPage:
    """Normalise a bundles answer (`{"offers": [...]}`) and re-apply `policy` client-side.

    Raises `MalformedOffer` only when the answer as a whole is not an offer list; bad rows
    are skipped with their reason kept. An offer whose host cannot run the image or hold the
    disk (`host_unfit`) stays, marked `refused` with the reason: never rented. With
    `redact`, provider texts are redacted before they are cut. With `bid_factor`, each offer
    is priced at our bid (`as_bid`).
    """
    rows = answer.get("offers") if isinstance(answer, Mapping) else None
    if not isinstance(rows, list):
        raise MalformedOffer("answer has no 'offers' list")
    page = OfferPage()
    for index, row in enumerate(rows):
        try:
            offer = normalise_offer(row, redact)
        except MalformedOffer as exc:
            page.skipped.append(f"{_row_name(index, row, redact)}: malformed: {exc}")
            continue
        if row.get("rentable") is False:
            page.skipped.append(f"{_row_name(index, row, redact)}: outside policy: not rentable")
            continue
        if bid_factor is not None:
            priced = as_bid(offer, row, bid_factor, policy.max_price_per_hour)
            if isinstance(priced, str):
                page.skipped.append(f"{_row_name(index, row, redact)}: not biddable: {priced}")
                continue
            offer = priced
        why = _selection_violation(offer, policy)
        if why is not None:
            page.skipped.append(f"{_row_name(index, row, redact)}: outside policy: {why}")
            continue
        unfit = host_unfit(offer, policy)
        # Listed (a server that ignored the filter), shown dimmed with why, never rented.
        page.offers.append(replace(offer, refused=unfit) if unfit else offer)
    page.offers.sort(key=lambda o: (o.price_per_hour, int(o.offer_id)))
    del page.offers[policy.limit :]
    return page
