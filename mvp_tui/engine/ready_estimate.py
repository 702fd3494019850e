"""Time to ready, predicted per offer: the image pull, the model's download and its load.

The pull is `[image] size_gb` over the offer's download bandwidth, unless the host journal
shows this host ran this image lately (then its cache has it); the model comes over the same
link; the load is the file read into VRAM plus the engine's start. Rough by nature: it ranks
offers by the wait they will make the user pay, it promises nothing. Once this user's own runs
served the model on that GPU model (or on that very host, with the image cached), their median
replaces the formula (`learned`; lease/learned.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

LOAD_BYTES_PER_S = 1.5e9  # disk to VRAM, a conservative NVMe figure
ENGINE_START_S = 5.0  # llama-server's own start, before it reads weights
BOOT_S = 20.0  # the container's start and sshd, on a host that has the image


# Not frozen: the board makes one per offer (10,000 a refresh), and a frozen dataclass sets
# each field through object.__setattr__, five times slower. Never changed once made.
@dataclass(slots=True)
class ReadyEstimate:
    pull_s: float  # 0 when the host has the image
    model_s: float
    load_s: float
    cached_image: bool
    learned_s: float | None = None  # the median of this user's own runs, when there are some
    runs: int = 0  # how many runs that median is of

    @property
    def total_s(self) -> float:
        if self.learned_s is not None:
            return self.learned_s
        return BOOT_S + self.pull_s + self.model_s + self.load_s

    @property
    def cell(self) -> str:
        return clock_text(self.total_s)

    def as_json(self) -> dict[str, object]:
        return {"seconds": round(self.total_s, 1), "pull_s": round(self.pull_s, 1),
                "model_s": round(self.model_s, 1), "load_s": round(self.load_s, 1),
                "image_cached": self.cached_image,
                "basis": "history" if self.learned_s is not None else "formula",
                "measured_runs": self.runs}


def learned_ready(seconds: float, runs: int, *, cached_image: bool) -> ReadyEstimate:
    """The estimate from this user's history: the median time to serving of `runs` runs."""
    return ReadyEstimate(0.0, 0.0, 0.0, cached_image, learned_s=seconds, runs=runs)


ReadyFormula = Callable[[float, bool], ReadyEstimate | None]


def ready_formula(image_gb: float, model_bytes: int) -> ReadyFormula:
    """The estimate for one image and model, by the offer's download Mbit/s and whether its
    host has the image; None when the offer publishes no bandwidth (nothing to divide by).
    What does not depend on the offer is worked out once (10,000 offers a refresh)."""
    image_bits = image_gb * 8e9
    model_bits = model_bytes * 8.0
    load = ENGINE_START_S + model_bytes / LOAD_BYTES_PER_S

    def estimate(down_mbps: float, cached_image: bool) -> ReadyEstimate | None:
        if down_mbps <= 0:
            return None
        bits_per_s = down_mbps * 1e6
        pull = 0.0 if cached_image else image_bits / bits_per_s
        return ReadyEstimate(pull, model_bits / bits_per_s, load, cached_image)

    return estimate


def clock_text(seconds: float) -> str:
    """`0:45`, `2:41`, `1:05:00`: minutes and seconds, hours when it takes that long."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
