"""Decode tok/s and $ per million tokens per offer: predicted from the GPU's memory bandwidth
until this user's own runs measured it.

Each generated token reads every weight once plus the KV cache, so decode is bounded by
bandwidth ÷ (model bytes + KV bytes at the run's context); llama.cpp reaches a share of that
bound that depends on the GPU's class. Consumer and workstation (GDDR) cards: 0.75, from the
2026 builds' batch-1 decode of 8B Q4 models (peers-2026-12-07.md §3.2: RTX 6000 Ada 960 GB/s,
llama 8B Q4_0 → 168.9 tok/s, 0.82 of the bound; RTX 3090 936 GB/s, granite 8B Q4_K_M → 127.0,
0.73), the value that puts both within 10 % (the May-2024 builds reached 0.57–0.80, median
0.62). Datacenter HBM cards: 0.34, still the 2024 figure (A100 SXM 2039 GB/s → 133 tok/s,
H100 PCIe 2000 → 144; peers-2026-12-02.md §2.2): no 2025–26 measurement of them was found.
A user's own runs replace both (lease/learned.py). $/1M tokens = 277.8 × $/h ÷ tok/s (10⁶
tokens ÷ 3600 s). Pure numbers.

A tiny model's bound is absurd (a 1.5 MB file on a 3090: 390,000 tok/s): each streamed token
also costs the server its sampling and its SSE event, whatever the model. Native llama-server
streamed a tiny model at 3,465-4,030 tok/s from its own port on the development machine
(docs/performance.md, bench/bench_gate.py); the prediction never exceeds that ceiling.
"""

from __future__ import annotations

from dataclasses import dataclass

from mvp_tui.providers.base import Offer

USD_PER_MTOK_FACTOR = 1e6 / 3600  # 277.8: $/h over tok/s gives $ per million tokens
# Share of the bandwidth bound llama.cpp reaches (see above: 2026 builds on GDDR cards, the
# 2024 figure on HBM ones).
EFFICIENCY_CONSUMER = 0.75
EFFICIENCY_DATACENTER = 0.34
# The most tokens a second llama-server streams, whatever the model (see above).
STREAM_CEILING_TOK_S = 4000.0
# HBM datacenter parts: the bound overpredicts them most at batch 1.
_DATACENTER = ("a100", "a800", "h100", "h800", "h200", "gh200", "b100", "b200", "mi300",
               "mi250")


def efficiency(gpu_name: str) -> float:
    """The share of the bandwidth bound llama.cpp's decode reaches on this GPU's class."""
    name = gpu_name.lower()
    return EFFICIENCY_DATACENTER if any(k in name for k in _DATACENTER) else EFFICIENCY_CONSUMER


# Not frozen: the board makes one per offer (10,000 a refresh), and a frozen dataclass sets
# each field through object.__setattr__, five times slower. Never changed once made.
@dataclass(slots=True)
class DecodeSpeed:
    """One offer's decode rate and what a million tokens cost there."""

    tok_per_s: float
    usd_per_mtok: float | None
    measured: bool  # from this user's own runs (the board shows no `~`)
    runs: int = 0  # how many measured answers the figure is the median of
    ttft_ms: float | None = None  # measured time to first token (the prompt's processing)
    concurrency: int = 1  # the streams the figure is for (N: their aggregate tok/s)
    one_stream: DecodeSpeed | None = None  # the one-stream figure, when this one is not it
    loaded: DecodeSpeed | None = None  # the measured figure under load (`mvp-tui bench`)

    @property
    def tok_cell(self) -> str:
        """`~112` predicted, `112` measured."""
        return f"{'' if self.measured else '~'}{self.tok_per_s:,.0f}"

    @property
    def mtok_cell(self) -> str:
        if self.usd_per_mtok is None:
            return "?"
        value = self.usd_per_mtok
        text = f"{value:.2f}" if value < 100 else f"{value:,.0f}"
        return f"{'' if self.measured else '~'}{text}"

    def figures_json(self) -> dict[str, object]:
        mtok = self.usd_per_mtok
        return {"tok_per_s": round(self.tok_per_s, 1),
                "usd_per_mtok": round(mtok, 4) if mtok is not None else None,
                "measured": self.measured, "measured_runs": self.runs,
                "ttft_ms": round(self.ttft_ms, 1) if self.ttft_ms is not None else None}

    def as_json(self) -> dict[str, object]:
        """The figure at `concurrency` (the board's), the one-stream figure and the loaded
        one (`{"concurrency": N, ...}`, None when no bench measured one)."""
        one = self.one_stream if self.one_stream is not None else self
        loaded = self.loaded
        return {**self.figures_json(), "concurrency": self.concurrency,
                "one_stream": one.figures_json(),
                "loaded": ({"concurrency": loaded.concurrency, **loaded.figures_json()}
                           if loaded is not None else None)}


def predict_tok_per_s(offer: Offer, bytes_per_token: int) -> float | None:
    """bandwidth ÷ bytes read per token × the class's efficiency; None when the offer has no
    known bandwidth or the model's size is unknown. Layers split over several GPUs are read
    one GPU after another, so one GPU's bandwidth bounds the whole; and no model streams
    faster than the server's own ceiling."""
    if offer.mem_bw_gbps <= 0 or bytes_per_token <= 0:
        return None
    bound = efficiency(offer.gpu_name) * offer.mem_bw_gbps * 1e9 / bytes_per_token
    return min(bound, STREAM_CEILING_TOK_S)
