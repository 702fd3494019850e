"""Named fault sets for `mvp-tui rehearse --faults NAME[,NAME…]`: what the fault-matrix
suite covers, replayed on the simulated marketplace so a user can watch the app handle it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mvp_tui.rehearsal.vastai_server import FakeVast, Fault

# The simulated marketplace's offers: (GPU, $/h all-in, place); the cheapest is walked first.
OFFERS: tuple[tuple[str, float, str], ...] = (
    ("RTX 3090", 0.22, "Bavaria, DE"),
    ("RTX 4090", 0.35, "Texas, US"),
    ("RTX A6000", 0.41, "Quebec, CA"),
    ("A100 SXM4", 1.10, "Ohio, US"),
)


@dataclass(frozen=True, slots=True)
class FaultSet:
    name: str
    says: str  # what the user will watch happen
    apply: Callable[[FakeVast, list[int]], None]  # (the market, its offer ids cheapest first)


def _sold(fake: FakeVast, offers: list[int]) -> None:
    ask = offers[0]
    msg = f"error 404/3603: no_such_ask Instance type by id {ask} is not available."
    body = {"success": False, "error": "invalid_args", "ask_id": ask, "msg": msg}
    fake.script("create", Fault(status=404, body=body))


def _lost_create(fake: FakeVast, offers: list[int]) -> None:
    fake.script("create", Fault(perform=True, drop=True))


def _slow_loading(fake: FakeVast, offers: list[int]) -> None:
    fake.loading_polls = 6


def _failing_deletes(fake: FakeVast, offers: list[int]) -> None:
    fake.fail_destroy(None, times=2)


def _node_dies(fake: FakeVast, offers: list[int]) -> None:
    fake.die_on_start(offers[0])


FAULT_SETS: dict[str, FaultSet] = {
    f.name: f
    for f in (
        FaultSet("sold", "the cheapest offer is sold when the create arrives: the next is "
                 "tried", _sold),
        FaultSet("lost-create", "the first create's answer is lost: the instance is looked "
                 "up by its label and adopted, never rented twice", _lost_create),
        FaultSet("slow-loading", "instances take several polls to start", _slow_loading),
        FaultSet("failing-deletes", "the first two deletes fail: retried until the "
                 "marketplace confirms", _failing_deletes),
        FaultSet("node-dies", "the cheapest offer's instance dies on start: destroyed "
                 "(confirmed), the next offer tried", _node_dies),
    )
}


def parse_faults(text: str | None) -> list[FaultSet]:
    """`sold,node-dies` → those sets; ValueError naming the unknown name and the known ones."""
    if not text:
        return []
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in FAULT_SETS]
    if unknown:
        raise ValueError(
            f"--faults {text!r}: no fault set {', '.join(map(repr, unknown))}; use one or more "
            f"of: {', '.join(FAULT_SETS)} (comma-separated)"
        )
    return [FAULT_SETS[n] for n in names]


def stock_market(fake: FakeVast) -> list[int]:
    """Put the rehearsal's offers on the market; their ids, cheapest first."""
    ids = [fake.add_offer(gpu_name=gpu, dph_total=price, geolocation=place)
           for gpu, price, place in OFFERS]
    return [i for _, i in sorted(zip((p for _, p, _ in OFFERS), ids, strict=True))]
