"""RunPod's GPU catalog (`GET /v2/catalog/gpus?include=AVAILABILITY&product=POD`) as offers,
and the order the lease walk tries them in.

One offer per GPU type and cloud (SECURE / COMMUNITY): price for the whole pod (list price
per GPU × count), VRAM, the cloud's max count, stock level and data centers. Stock is a hint
from the catalog, never a reservation: a create can still answer "no capacity".

The order (overbrainer's walk, `src/runpod/provision.rs`): `[runpod] gpu_types` in the
user's order, or `auto`: the types meeting the VRAM floor, cheapest first; types the catalog
reports out of stock are skipped, except up to `max_out_of_stock` that are cheaper than the
cheapest type in stock, which are tried first.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mvp_tui.providers.base import Offer
from mvp_tui.providers.gpu_bandwidth import bandwidth_gbps
from mvp_tui.untrusted import Redact, clean_line

PROVIDER_NAME = "runpod"
CLOUDS = ("SECURE", "COMMUNITY")
STOCK_LEVELS = ("NONE", "LOW", "MEDIUM", "HIGH")
MAX_OUT_OF_STOCK = 3
_SHORT = 120


class MalformedCatalog(ValueError):
    """The catalog answer (or one of its rows) cannot be read; the message names the field."""


@dataclass(frozen=True, slots=True)
class CatalogGpu:
    """One GPU type as the catalog reports it for one cloud."""

    gpu_id: str
    name: str
    memory_gb: int
    cloud: str
    price_per_gpu: float
    max_count: int
    stock: str  # NONE | LOW | MEDIUM | HIGH ("" when availability was not reported)
    data_centers: tuple[str, ...] = ()

    @property
    def in_stock(self) -> bool:
        return self.stock not in ("NONE", "")

    def offer(self, gpu_count: int) -> Offer:
        where = ", ".join(self.data_centers[:3]) + ("…" if len(self.data_centers) > 3 else "")
        stock = (self.stock or "?").lower()
        return Offer(
            provider=PROVIDER_NAME,
            offer_id=offer_id(self.cloud, self.gpu_id),
            gpu_name=self.name,
            num_gpus=gpu_count,
            gpu_ram_mib=self.memory_gb * 1024,
            price_per_hour=round(self.price_per_gpu * gpu_count, 6),
            reliability=0.0,  # RunPod publishes none
            down_mbps=0.0,
            up_mbps=0.0,
            location=f"{self.cloud.lower()} · stock {stock}" + (f" · {where}" if where else ""),
            verified=self.cloud == "SECURE",
            stock=self.stock.lower(),
            data_centers=self.data_centers,
            mem_bw_gbps=bandwidth_gbps(self.gpu_id) or bandwidth_gbps(self.name),
        )


def offer_id(cloud: str, gpu_id: str) -> str:
    """`SECURE:NVIDIA GeForce RTX 4090`: the cloud and the GPU type id create needs."""
    return f"{cloud}:{gpu_id}"


def split_offer_id(value: str) -> tuple[str, str] | None:
    cloud, sep, gpu_id = value.partition(":")
    if not sep or cloud not in CLOUDS or not gpu_id:
        return None
    return cloud, gpu_id


def _text(row: Mapping[str, Any], key: str, redact: Redact | None) -> str:
    value = row.get(key)
    if not isinstance(value, str):
        return ""
    if len(value) <= _SHORT and value.isascii() and value.isprintable():
        return (redact(value) if redact is not None else value).strip()
    return clean_line(value, _SHORT, redact=redact).strip()


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise MalformedCatalog(f"field {what!r} is not a number")
    return float(value)


def parse_gpu(row: Any, cloud: str, redact: Redact | None = None) -> CatalogGpu | None:
    """One catalog row for `cloud`; None when the type is not offered on that cloud.
    Raises `MalformedCatalog` naming the bad field."""
    if not isinstance(row, Mapping):
        raise MalformedCatalog("row is not a JSON object")
    gpu_id = row.get("id")
    if not isinstance(gpu_id, str) or not gpu_id.strip() or not gpu_id.isprintable():
        raise MalformedCatalog("field 'id' missing or not printable text")
    side = "secure" if cloud == "SECURE" else "community"
    if row.get(side) is False:
        return None
    memory = _number(row.get("memory"), "memory")
    price = row.get("price")
    max_count = row.get("maxCount")
    if not isinstance(price, Mapping) or not isinstance(max_count, Mapping):
        raise MalformedCatalog("field 'price' or 'maxCount' is not an object")
    per_gpu = price.get(side)
    if per_gpu is None:
        return None  # priced on the other cloud only
    per_gpu = _number(per_gpu, f"price.{side}")
    count = _number(max_count.get(side, 0), f"maxCount.{side}")
    if per_gpu < 0 or memory < 0 or count < 1:
        return None
    stock = row.get("availability")
    stock = stock if isinstance(stock, str) and stock in STOCK_LEVELS else ""
    centers: list[str] = []
    raw_centers = row.get("dataCenters")
    if isinstance(raw_centers, list):
        for center in raw_centers:
            if isinstance(center, Mapping) and center.get("availability") != "NONE":
                name = _text(center, "id", redact)
                if name:
                    centers.append(name)
    return CatalogGpu(
        gpu_id=gpu_id.strip(),
        name=_text(row, "name", redact) or gpu_id.strip(),
        memory_gb=int(memory),
        cloud=cloud,
        price_per_gpu=per_gpu,
        max_count=int(count),
        stock=stock,
        data_centers=tuple(centers),
    )


@dataclass(slots=True)
class CatalogPage:
    gpus: list[CatalogGpu] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def read_catalog(answer: Any, cloud: str, redact: Redact | None = None) -> CatalogPage:
    """A catalog answer (`{"gpus": [...]}`) for `cloud`; bad rows are skipped with a reason."""
    rows = answer.get("gpus") if isinstance(answer, Mapping) else None
    if not isinstance(rows, list):
        raise MalformedCatalog("answer has no 'gpus' list")
    page = CatalogPage()
    for index, row in enumerate(rows):
        try:
            gpu = parse_gpu(row, cloud, redact)
        except MalformedCatalog as exc:
            page.skipped.append(f"catalog row {index} ({cloud.lower()}): malformed: {exc}")
            continue
        if gpu is not None:
            page.gpus.append(gpu)
    return page


@dataclass(frozen=True, slots=True)
class WalkPolicy:
    """What the walk may rent: `gpu_types` in order (empty = auto) and the auto filters."""

    gpu_types: tuple[str, ...] = ()
    gpu_count: int = 1
    min_vram_gb: int = 0
    max_price_per_hour: float | None = None
    max_out_of_stock: int = MAX_OUT_OF_STOCK

    @property
    def auto(self) -> bool:
        return not self.gpu_types


@dataclass(frozen=True, slots=True)
class WalkOrder:
    """The types to try, in order, and those among them the catalog reported out of stock."""

    gpus: tuple[CatalogGpu, ...]
    out_of_stock: frozenset[str]  # offer ids
    skipped: tuple[str, ...] = ()


def _key(gpu: CatalogGpu) -> tuple[float, str, str]:
    return (gpu.price_per_gpu, gpu.cloud, gpu.gpu_id)


def walk_order(
    gpus: Iterable[CatalogGpu],
    policy: WalkPolicy,
    *,
    tried: Iterable[str] = (),
    cap: int | None = None,
) -> WalkOrder:
    """The order of the walk over `gpus` under `policy`, leaving out the offer ids `tried`;
    `cap` (default `policy.max_out_of_stock`) bounds the out-of-stock types tried first."""
    done = set(tried)
    cap = policy.max_out_of_stock if cap is None else max(0, cap)
    skipped: list[str] = []
    fits: list[CatalogGpu] = []
    for gpu in gpus:
        oid = offer_id(gpu.cloud, gpu.gpu_id)
        if oid in done:
            continue
        why = _outside(gpu, policy)
        if why:
            skipped.append(f"{oid}: {why}")
            continue
        fits.append(gpu)
    if not policy.auto:
        return _user_order(fits, policy, skipped)
    fits.sort(key=_key)
    chosen: list[CatalogGpu] = []
    extras: set[str] = set()
    seen_in_stock = False
    for gpu in fits:
        oid = offer_id(gpu.cloud, gpu.gpu_id)
        if gpu.in_stock:
            seen_in_stock = True
            chosen.append(gpu)
        elif not seen_in_stock and len(extras) < cap:
            extras.add(oid)
            chosen.append(gpu)
        else:
            skipped.append(f"{oid}: out of stock")
    if not seen_in_stock:  # nothing in stock: nothing is "cheaper than a type in stock"
        skipped.extend(f"{o}: out of stock" for o in sorted(extras))
        chosen, extras = [], set()
    return WalkOrder(tuple(chosen), frozenset(extras), tuple(skipped))


def _user_order(fits: Sequence[CatalogGpu], policy: WalkPolicy, skipped: list[str]) -> WalkOrder:
    chosen: list[CatalogGpu] = []
    for wanted in policy.gpu_types:
        needle = wanted.strip().casefold()
        matches = [g for g in fits if needle in (g.gpu_id.casefold(), g.name.casefold())]
        if not matches:
            skipped.append(f"{wanted}: not in the catalog (or outside the limits)")
        for gpu in sorted(matches, key=lambda g: CLOUDS.index(g.cloud)):
            if gpu not in chosen:
                chosen.append(gpu)
    return WalkOrder(tuple(chosen), frozenset(), tuple(skipped))


def _outside(gpu: CatalogGpu, policy: WalkPolicy) -> str:
    if gpu.max_count < policy.gpu_count:
        return f"at most {gpu.max_count} per pod on {gpu.cloud.lower()} cloud"
    if policy.auto and gpu.memory_gb < policy.min_vram_gb:
        return f"{gpu.memory_gb} GB VRAM < min_vram_gb {policy.min_vram_gb}"
    price = gpu.price_per_gpu * policy.gpu_count
    if policy.max_price_per_hour is not None and price > policy.max_price_per_hour:
        return f"{price:.4f} USD/h > max_price_per_hour {policy.max_price_per_hour:.4f}"
    return ""


def resort(
    remaining: Sequence[Offer],
    fresh: WalkOrder,
    gpu_count: int,
    earlier_out_of_stock: frozenset[str],
) -> list[Offer]:
    """After a type proved unplaceable: the fresh order first, then the types left that it
    no longer gives, except those reported out of stock before (overbrainer's resort). Not
    cut to the length of `remaining`: the walk covers every type the catalog gives (seed
    003), whatever the first pick's length."""
    order = [gpu.offer(gpu_count) for gpu in fresh.gpus]
    ids = {o.offer_id for o in order}
    order += [
        o for o in remaining if o.offer_id not in ids and o.offer_id not in earlier_out_of_stock
    ]
    return order
