"""GPU offload, proven from the engine's own log: the flags llama-server gets on a node with
GPUs, what its load log says it did, and whether that is what was asked.

On a node with GPUs the single-node llama-server gets `-ngl 999` (every layer: builds before
`-ngl all` take only numbers) when the fit says the model fits the node's VRAM
(`MVP_VRAM_NEED_MIB`, the app's `model_fit.ModelNeed`), else `--fit on` (llama.cpp places what
fits, since about b7500). A build without `--fit` (its `--help` does not name it) gets
`-ngl 999` either way: passing it an unknown flag would end the engine, and a model too big
then fails to load, which is the host's failure like any other. `-lv 4` too: the load lines
are llama.cpp's info level, which the 2026 builds print only at verbosity 4; a build whose
`--help` names no `-lv` (before llama.cpp's 2024 logging rework) prints them by default and
would refuse the flag.

The log says `load_tensors: offloaded 33/33 layers to GPU`, then one `model buffer size` line
per device (`CUDA0 model buffer size = 4403.50 MiB`, `CPU_Mapped model buffer size = …`;
before 2025, `llm_load_tensors:` and `CUDA0 buffer size`). A CPU-only build prints
"offloaded 33/33" too, with only host buffers: so no GPU buffer fails the check as surely as
fewer layers than asked. A node without GPUs gets none of this (0/N there is fine).
"""

from __future__ import annotations

import re
import subprocess
import threading
from dataclasses import dataclass
from typing import Any

from mvp_tui.node.engine import READY_HINT
from mvp_tui.node_protocol import is_gpu_buffer

ALL_LAYERS = "999"
LOAD_LOG_VERBOSITY = ("-lv", "4")
HELP_TIMEOUT_S = 30.0
# How long the check waits for the log reader to catch up once /health answers (the load
# lines come before the port opens, but another thread forwards them).
LOG_GRACE_S = 10.0

_OFFLOADED = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")
# `load_tensors:   RPC0[127.0.0.1:50052] model buffer size = 12.3 MiB` (one per device);
# the 2024 form `llm_load_tensors:      CUDA0 buffer size =  5049.71 MiB`.
_BUFFER_LINE = re.compile(r"(\S+?)(?:\[([^\]\s]+)\])? model buffer size =\s*([0-9.]+) MiB")
_OLD_BUFFER_LINE = re.compile(r"llm_load_tensors:\s+(\S+) buffer size =\s*([0-9.]+) MiB")


def parse_buffer_line(text: str) -> tuple[str, float] | None:
    """(device, MiB) from a model buffer log line; the device of an RPC buffer is its
    endpoint ("127.0.0.1:50052"), any other keeps its name ("CUDA0", "CPU_Mapped")."""
    match = _BUFFER_LINE.search(text)
    if match is not None:
        name, endpoint, mib = match.groups()
        return (endpoint if endpoint and name.startswith("RPC") else name), float(mib)
    old = _OLD_BUFFER_LINE.search(text)
    return (old.group(1), float(old.group(2))) if old is not None else None


@dataclass(frozen=True)
class OffloadPlan:
    """What llama-server is asked for on this node, and why, in words."""

    flags: tuple[str, ...]
    asked: str  # node_protocol.OFFLOAD_ASKED: "all" | "fit"
    why: str


def offload_plan(gpus: list[dict[str, Any]], need_mib: int, server: str) -> OffloadPlan | None:
    """The flags for a node with `gpus` (None without GPUs: the engine's defaults stay)."""
    if not gpus:
        return None
    vram = sum(int(g.get("memory_mib") or 0) for g in gpus)
    verbose = LOAD_LOG_VERBOSITY if has_verbosity_flag(server) else ()
    every = ("-ngl", ALL_LAYERS, *verbose)
    if need_mib and need_mib <= vram:
        return OffloadPlan(every, "all", f"the fit: {need_mib:,} MiB needed, {vram:,} MiB VRAM")
    if has_fit_flag(server):
        why = "the fit is unknown" if not need_mib else f"{need_mib:,} MiB needed > {vram:,} MiB"
        return OffloadPlan(("--fit", "on", *verbose), "fit", why + ": --fit on")
    return OffloadPlan(every, "all", "this llama-server has no --fit: every layer asked")


def _help_text(server: str) -> bytes | None:
    """This llama-server's `--help` (None when it cannot be run)."""
    try:
        done = subprocess.run(
            [server, "--help"], capture_output=True, timeout=HELP_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout + done.stderr


def has_fit_flag(server: str) -> bool:
    """Whether this llama-server knows `--fit` (its `--help` names it); False when it cannot
    say (an unknown flag would end the engine; -ngl is known to every build)."""
    text = _help_text(server)
    return text is not None and b"--fit " in text


def has_verbosity_flag(server: str) -> bool:
    """Whether this llama-server knows `-lv`: False only when its `--help` was read and names
    no `--verbosity` (an older build: it prints the load lines anyway). A help that cannot
    be read keeps `-lv 4`: without it a current build's log would prove nothing."""
    text = _help_text(server)
    return text is None or b"--verbosity" in text or b"-lv," in text


class OffloadLog:
    """The load lines as the engine's log reader forwards them (another thread)."""

    def __init__(self) -> None:
        self.layers: int | None = None
        self.total: int | None = None
        self.buffers: dict[str, float] = {}
        self.loaded = False  # the engine said it loaded: every load line was read before
        self._seen = threading.Condition()

    def feed(self, text: str) -> None:
        match = _OFFLOADED.search(text)
        buffer = parse_buffer_line(text) if match is None else None
        loaded = match is None and buffer is None and READY_HINT.search(text) is not None
        if match is None and buffer is None and not loaded:
            return
        with self._seen:
            if loaded:
                self.loaded = True
            elif match is not None:
                self.layers, self.total = int(match.group(1)), int(match.group(2))
            elif buffer is not None:
                device, mib = buffer
                self.buffers[device] = self.buffers.get(device, 0.0) + mib
            self._seen.notify_all()

    def wait(self, timeout: float) -> None:
        """Until the engine's "model loaded" (or listening) line was read, or `timeout`."""
        with self._seen:
            self._seen.wait_for(lambda: self.loaded, timeout)

    @property
    def gpu_buffers(self) -> dict[str, float]:
        return {d: mib for d, mib in self.buffers.items() if is_gpu_buffer(d)}


def offload_problem(plan: OffloadPlan, log: OffloadLog) -> str:
    """Why the engine's log does not prove the offload asked ("" when it does)."""
    if log.layers is None or log.total is None:
        return ("the engine's log never said how many layers it offloaded (no "
                "'offloaded N/M layers to GPU' line): its offload cannot be proven")
    done = f"{log.layers}/{log.total} layers offloaded to GPU"
    if not log.gpu_buffers:
        host = ", ".join(f"{d} {mib:,.0f} MiB" for d, mib in log.buffers.items()) or "none"
        return (f"{done}, but the engine's log names no CUDA device (model buffers: {host}): "
                "this llama-server runs on the CPU (a build without CUDA, or its CUDA "
                "backend did not load)")
    if plan.asked == "all" and log.layers < log.total:
        return f"only {done}, {log.total} asked ({plan.why})"
    if plan.asked == "fit" and log.layers == 0:
        return f"{done}: --fit on put none on the GPU ({plan.why})"
    return ""
