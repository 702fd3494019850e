"""GPU memory bandwidth by model name, in GB/s: what decode speed is bounded by, for the
providers that do not publish it per offer (RunPod's catalog; Vast offers carry their own
`gpu_mem_bw`).

Sources (figures as listed there; none measured here):
- peers-2026-12-02.md §2.2 (the project's reference), which takes them from llmfit
  `llmfit-core/src/hardware.rs::gpu_memory_bandwidth_gbps` and vendor datasheets
  (A40 696, A100 80GB PCIe 1935: astroC86/gpu-datasheet; H100 PCIe 2000:
  lijun99/GPU-Resources); RTX 4000 Ada 360 and RTX 5000 Ada 576 are marked unverified there.
- llmfit `hardware.rs` itself for the RTX 50 series (5090 1792, 5080 960, 5070 Ti 896,
  5070 672), H100 SXM/HBM3 3352, H200 4800, A100 40GB 1555, V100 900, L4 300, T4 300.
- NVIDIA's product pages (unverified here, not in the references): H100 NVL 3900,
  B200 8000, RTX PRO 6000 Blackwell 1792, A4500 640, RTX 3090 Ti 1008.

A name matches the longest key whose every word it contains (so "A100 SXM4 80GB" finds the
SXM figure, "A100 40GB" the 40 GB one); an unknown GPU is 0 (the board then says "?").
"""

from __future__ import annotations

import re

# Words that name no model: a vendor or a product line.
_NOISE = frozenset({"nvidia", "geforce", "amd", "radeon", "instinct", "tesla"})

# (words that must all appear, GB/s); the longest match wins.
_TABLE: tuple[tuple[str, float], ...] = (
    ("rtx 3070", 448), ("rtx 3080", 760), ("rtx 3080 ti", 912), ("rtx 3090", 936),
    ("rtx 3090 ti", 1008),
    ("rtx 4070 ti", 504), ("rtx 4080", 717), ("rtx 4090", 1008),
    ("rtx 5070", 672), ("rtx 5070 ti", 896), ("rtx 5080", 960), ("rtx 5090", 1792),
    ("a4000", 448), ("a4500", 640), ("a5000", 768), ("a6000", 768),
    ("rtx 4000 ada", 360), ("rtx 5000 ada", 576), ("rtx 6000 ada", 960),
    ("rtx pro 6000", 1792),
    ("a40", 696), ("l4", 300), ("t4", 300), ("l40", 864), ("l40s", 864), ("v100", 900),
    ("a100", 1935), ("a100 80gb", 1935), ("a100 pcie", 1935), ("a100 40gb", 1555),
    ("a100 sxm", 2039), ("a100 sxm 80gb", 2039),
    ("h100", 2000), ("h100 pcie", 2000), ("h100 sxm", 3352), ("h100 hbm3", 3352),
    ("h100 nvl", 3900), ("h200", 4800), ("b200", 8000),
)
_KEYS = tuple((frozenset(words.split()), len(words.split()), gbps) for words, gbps in _TABLE)


def _words(name: str) -> frozenset[str]:
    # "SXM4" and "SXM5" are the SXM form factor; "80GB" stays one word.
    text = re.sub(r"\bsxm\d\b", "sxm", name.lower().replace("_", " ").replace("-", " "))
    return frozenset(w for w in text.split() if w not in _NOISE)


def bandwidth_gbps(gpu_name: str) -> float:
    """The GPU's memory bandwidth in GB/s, 0.0 when the table does not know it."""
    words = _words(gpu_name)
    best, best_len = 0.0, 0
    for key, length, gbps in _KEYS:
        if length > best_len and key <= words:
            best, best_len = gbps, length
    return best
