"""Whether the model fits an offer's VRAM: the weights plus the KV cache at the run's context,
plus a margin, against what each node's GPUs hold.

Pure numbers: `model_need.py` reads the model's size and header (a local file or the hub);
the board, the lease confirm and `offers --json` show the verdict. With several nodes the
model is split by layers over them, so each node needs its share plus its own margin.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from mvp_tui.engine.gguf_shape import GgufShape
from mvp_tui.providers.base import Offer

GIB = 1024**3
# What llama.cpp needs besides weights and cache: the CUDA context and the compute buffers.
# About half a GiB on one GPU, growing a little with the model (measured figures vary by
# build, so this errs high): 0.5 GiB + 5% of the node's share.
MARGIN_FIXED = GIB // 2
MARGIN_FRACTION = 0.05
# llama-server's context when `[model] max_context` is unset (`-c` not passed).
ENGINE_DEFAULT_CONTEXT = 4096


class Fit(enum.Enum):
    """The board's `fit` cell."""

    FITS = "✓"
    TIGHT = "~"  # weights and cache fit, the margin does not: it may fail as it loads
    NO = "✗"
    UNKNOWN = "?"  # the model's size could not be read


@dataclass(frozen=True, slots=True)
class ModelNeed:
    """The VRAM one run needs, per node, with what it is made of."""

    model_bytes: int
    kv_bytes: int  # the whole model's, at `context`, for every slot
    context: int
    nodes: int = 1
    source: str = ""  # where the figures came from (a path or the hub's URL), for detail
    # The engine's slots (requests served at once): llama-server gives each its own cache of
    # `context` tokens, so the cache is counted once per slot.
    slots: int = 1

    @property
    def kv_slot_mib(self) -> int:
        """One slot's KV cache per node, in MiB rounded up (the node adds slots by it)."""
        per_slot = self.kv_bytes / max(1, self.slots) / max(1, self.nodes)
        return math.ceil(per_slot / (1024 * 1024))

    @property
    def base_bytes(self) -> int:
        """One node's share of the weights and the cache (split by layers)."""
        return math.ceil((self.model_bytes + self.kv_bytes) / max(1, self.nodes))

    @property
    def margin_bytes(self) -> int:
        return MARGIN_FIXED + int(self.base_bytes * MARGIN_FRACTION)

    @property
    def per_node_bytes(self) -> int:
        return self.base_bytes + self.margin_bytes

    @property
    def per_node_mib(self) -> int:
        """What a node needs, in MiB rounded up (the node compares it with its own GPUs)."""
        return math.ceil(self.per_node_bytes / (1024 * 1024))

    @property
    def per_node_gb(self) -> int:
        """What a node needs, in whole GB (GiB, as the board's VRAM column), rounded up."""
        return math.ceil(self.per_node_bytes / GIB)

    def verdict(self, offer: Offer) -> FitVerdict:
        vram = int(offer.num_gpus * offer.gpu_ram_mib * 1024 * 1024)
        if vram <= 0:
            # No GPU (this machine, a CPU node): llama.cpp serves from system memory.
            if offer.ram_mib <= 0:
                return FitVerdict(Fit.UNKNOWN, self.per_node_gb, self.nodes)
            vram = int(offer.ram_mib * 1024 * 1024)
        if vram >= self.per_node_bytes:
            fit = Fit.FITS
        elif vram >= self.base_bytes:
            fit = Fit.TIGHT
        else:
            fit = Fit.NO
        return FitVerdict(fit, self.per_node_gb, self.nodes)

    def describe(self) -> str:
        """`needs 6 GB per node: 4.7 GB model + 0.5 GB KV at 4096 tokens + 0.7 GB margin`."""
        share = f"per node ({self.nodes} nodes)" if self.nodes > 1 else "per node"
        nodes = max(1, self.nodes)
        slots = f" × {self.slots} slots" if self.slots > 1 else ""
        return (
            f"needs {self.per_node_gb} GB {share}: {self.model_bytes / nodes / GIB:.1f} GB "
            f"model + {self.kv_bytes / nodes / GIB:.1f} GB KV cache at {self.context:,} "
            f"tokens{slots} + {self.margin_bytes / GIB:.1f} GB margin"
        )


@dataclass(frozen=True, slots=True)
class FitVerdict:
    fit: Fit
    needs_gb: int = 0
    nodes: int = 1

    @property
    def cell(self) -> str:
        """`✓`, `~`, `✗ needs 24 GB`, `?`: the board's cell."""
        if self.fit is Fit.NO:
            return f"{Fit.NO.value} needs {self.needs_gb} GB"
        return str(self.fit.value)

    @property
    def unfit(self) -> bool:
        return self.fit is Fit.NO

    def as_json(self) -> dict[str, object]:
        return {"fit": self.fit.name.lower(), "needs_gb": self.needs_gb, "nodes": self.nodes}


UNKNOWN = FitVerdict(Fit.UNKNOWN)


def need_from(shape: GgufShape, model_bytes: int, *, context: int | None, nodes: int,
              source: str = "", slots: int = 1) -> ModelNeed:
    """The need at `context` tokens (None: the engine's default, capped by the model's own)
    in each of `slots` slots."""
    ctx = context or min(ENGINE_DEFAULT_CONTEXT, shape.context_length or ENGINE_DEFAULT_CONTEXT)
    slots = max(1, slots)
    return ModelNeed(model_bytes, shape.kv_bytes(ctx) * slots, ctx, max(1, nodes), source, slots)


def fit_slots(parallel: int | None) -> int:
    """The slots the fit counts: `[model] parallel` when set; unset, one (the least a node
    runs: it adds slots, up to 4, while its own memory holds them: mvp_tui/node/slots.py)."""
    return parallel or 1
