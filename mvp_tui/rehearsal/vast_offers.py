"""The fake Vast.ai's marketplace: a realistic offer row, and the bundles search (Vast's
filter operators, multi-key sort, the default page)."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

from mvp_tui.rehearsal.http_fake import Reply
from mvp_tui.rehearsal.vast_replies import error_reply


def default_offer(offer_id: int) -> dict[str, Any]:
    """A full bundles row with realistic values (field names from Vast's bundles search answer)."""
    now = time.time()
    return {
        "id": offer_id,
        "ask_contract_id": offer_id,
        "bundle_id": offer_id * 10,
        "bundled_results": 1,
        "machine_id": 40000 + offer_id % 10000,
        "host_id": 50000 + offer_id % 10000,
        "num_gpus": 1,
        "gpu_name": "RTX 4090",
        "gpu_arch": "nvidia",
        "gpu_ram": 24564,
        "gpu_total_ram": 24564,
        "gpu_frac": 1.0,
        "gpu_mem_bw": 908.1,
        "gpu_display_active": False,
        "compute_cap": 890,
        "cuda_max_good": 12.8,
        "driver_version": "570.124.04",
        "cpu_name": "AMD EPYC 7543 32-Core Processor",
        "cpu_arch": "amd64",
        "cpu_cores": 64,
        "cpu_cores_effective": 16.0,
        "cpu_ghz": 3.7,
        "cpu_ram": 128785,
        "disk_space": 512.0,
        "disk_bw": 3500.0,
        "disk_name": "Samsung SSD 980 PRO 2TB",
        "pci_gen": 4.0,
        "pcie_bw": 24.6,
        "bw_nvlink": 0.0,
        "inet_down": 812.3,
        "inet_up": 640.1,
        "inet_down_cost": 0.003,
        "inet_up_cost": 0.003,
        "internet_down_cost_per_tb": 3.0,
        "internet_up_cost_per_tb": 3.0,
        "direct_port_count": 100,
        "dph_base": 0.33,
        "dph_total": 0.3521,
        "discounted_dph_total": 0.3521,
        "min_bid": 0.15,
        "storage_cost": 0.15,
        "storage_total_cost": 0.0104,
        "dlperf": 58.2,
        "dlperf_per_dphtotal": 165.3,
        "flops_per_dphtotal": 234.1,
        "total_flops": 82.4,
        "score": 210.4,
        "reliability": 0.995,
        "reliability2": 0.995,
        "verification": "verified",
        "verified": True,
        "rentable": True,
        "rented": False,
        "is_bid": False,
        "external": False,
        "datacenter": False,
        "hosting_type": 0,
        "static_ip": True,
        "public_ipaddr": "127.0.0.1",
        "geolocation": "Texas, US",
        "geolocode": 840,
        "duration": 2592000.0,
        "start_date": now - 86400,
        "end_date": now + 2592000,
        "os_version": "22.04",
        "ubuntu_version": "22.04",
        "vms_enabled": False,
        "has_avx": 1,
        "webpage": None,
        "logo": "/static/logos/vastai_small2.png",
    }


def _gt(v: Any, w: Any) -> bool:
    return v is not None and bool(v > w)


def _gte(v: Any, w: Any) -> bool:
    return v is not None and bool(v >= w)


def _lt(v: Any, w: Any) -> bool:
    return v is not None and bool(v < w)


def _lte(v: Any, w: Any) -> bool:
    return v is not None and bool(v <= w)


FILTER_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": lambda v, w: bool(v == w),
    "neq": lambda v, w: bool(v != w),
    "gt": _gt,
    "gte": _gte,
    "lt": _lt,
    "lte": _lte,
    "in": lambda v, w: v in w,
    "notin": lambda v, w: v not in w,
    "nin": lambda v, w: v not in w,
}


def coerce(value: Any, want: Any) -> Any:
    """The CLI sends numbers as strings (`dph<1` → `{"lt": "1"}`); the server compares
    them as numbers. Lists (for in/notin) are coerced element-wise."""
    if isinstance(want, list):
        return [coerce(value, w) for w in want]
    if isinstance(want, str) and isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return float(want)
        except ValueError:
            return want
    if isinstance(want, str) and isinstance(value, bool) and want.lower() in ("true", "false"):
        return want.lower() == "true"
    return want


def matches(value: Any, ops: Any) -> bool:
    """Apply one Vast filter (`{"gte": 4, "lte": 8}`) to a value; an unknown op fails."""
    if not isinstance(ops, dict):
        return bool(value == coerce(value, ops))
    for op, raw_want in ops.items():
        if op == "eq" and raw_want in ("any", "*", "?"):
            continue
        want = coerce(value, raw_want)
        check = FILTER_OPS.get(op)
        try:
            if check is None or not check(value, want):
                return False
        except TypeError:
            return False
    return True


def sort_rows(rows: list[dict[str, Any]], order: list[tuple[str, bool]]) -> list[dict[str, Any]]:
    """Stable multi-key sort; `None` sorts last either way."""
    for column, descending in reversed(order):
        present = [r for r in rows if r.get(column) is not None]
        missing = [r for r in rows if r.get(column) is None]
        present.sort(key=lambda r, c=column: r[c], reverse=descending)  # type: ignore[misc]
        rows = present + missing
    return rows


# Storage Vast prices into `dph_total` when a search sends no `allocated_storage` (the docs'
# default; the CLI always sends its own, 5 GiB unless --storage). A row's stored `dph_total`
# is its price at this much storage.
DEFAULT_ALLOCATED_GB = 8.0
HOURS_PER_MONTH = 730  # `storage_cost` is $/GB/month; Vast bills storage per hour


def priced(row: dict[str, Any], storage_gb: float) -> dict[str, Any]:
    """`row` with its prices at `storage_gb` of storage (reference/vastai.md §2: `dph_total`
    is all-in, GPU plus storage at `allocated_storage`; `storage_cost` $/GB/month)."""
    cost = float(row.get("storage_cost") or 0.0)
    delta = cost * (storage_gb - DEFAULT_ALLOCATED_GB) / HOURS_PER_MONTH
    out = dict(row)
    for column in ("dph_total", "discounted_dph_total"):
        if isinstance(out.get(column), int | float):
            out[column] = round(float(out[column]) + delta, 6)
    out["storage_total_cost"] = round(cost * storage_gb / HOURS_PER_MONTH, 6)
    return out


def search_offers(
    offers: dict[int, dict[str, Any]], query: Any, ignored: frozenset[str] = frozenset()
) -> Reply:
    """POST /bundles/ over `offers`: priced at the query's `allocated_storage`, every filter
    applied (on the prices as answered) but those on `ignored` columns, sorted, one page."""
    if not isinstance(query, dict):
        return error_reply(400, "invalid_request", "Invalid json body")
    storage = query.get("allocated_storage", DEFAULT_ALLOCATED_GB)
    try:
        storage_gb = float(storage)
    except (TypeError, ValueError):
        return error_reply(400, "invalid_request", "allocated_storage must be a number")
    rows = [priced(o, storage_gb) for o in offers.values()]
    reserved = {"order", "type", "limit", "allocated_storage", "disable_bundling", "extra_ids"}
    for column, ops in query.items():
        if column in reserved or column in ignored:
            continue
        rows = [r for r in rows if column not in r or matches(r[column], ops)]
    order = query.get("order") or [["score", "desc"]]
    keys = [
        (str(o[0]), len(o) > 1 and str(o[1]).lower() == "desc")
        for o in order
        if isinstance(o, list) and o
    ]
    rows = sort_rows(rows, keys)
    limit = query.get("limit")
    # Without a limit the server answers a small page (gpuhunt saw 64).
    rows = rows[:limit] if isinstance(limit, int) and limit > 0 else rows[:64]
    return Reply(200, {"offers": copy.deepcopy(rows)})
