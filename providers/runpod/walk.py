"""What a RunPod create asks for beyond the GPU type: the data centers it may land in.

Seed 003 (`data_center_ids = "auto"`): a type the catalog reports in stock is created with
the data centers where the catalog has it; a type reported out of stock (tried first because
it is cheaper, see catalog.py) is created without a list, since the catalog names none
for it and any list would only narrow a placement that is already unlikely. A network volume
pins the pod to the volume's data center instead (runpod_volumes).
"""

from __future__ import annotations

from collections.abc import Collection

from mvp_tui.providers.base import Offer

# The most data centers sent in one create (the catalog names about 30 in all).
MAX_DATA_CENTERS = 32


def auto_data_centers(offer: Offer, out_of_stock: Collection[str]) -> list[str]:
    """The `dataCenterIds` of a create on `offer`: the catalog's data centers that have its
    type, in the catalog's order; empty (no list sent) for a type reported out of stock."""
    if offer.offer_id in out_of_stock or (offer.stock or "").lower() in ("none", ""):
        return []
    picked = [dc for dc in dict.fromkeys(offer.data_centers) if dc and dc.isprintable()]
    return picked[:MAX_DATA_CENTERS]
