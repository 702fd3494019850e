"""A served model measured under load: N concurrent streams of a fixed prompt set against an
OpenAI-compatible endpoint, for `mvp-tui bench`.

Each level runs `concurrency` workers for `duration_s`; a worker streams one prompt after
another (`PromptClient`, the dashboard's own client) until the time is up, and the request
in flight then finishes (its tokens count; the level's wall time ends with the last one).
Per level: the aggregate output tok/s (every stream's tokens over the level's wall time:
what the GPU gives under that load, what the caller prices $/Mtok at), the median stream's
rate, TTFT p50/p95 and the requests that failed. No Textual, no printing: `progress` is told.
"""

from __future__ import annotations

import asyncio
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import httpx

from mvp_tui.prompt.client import PromptClient
from mvp_tui.prompt.events import PromptDone, PromptFault

# Fixed, so two benches of one model compare: short questions that want a long answer (the
# decode, not the prompt, is measured), each worker starting at its own.
PROMPTS = (
    "Explain how a GPU differs from a CPU, step by step.",
    "Write a short story about a lighthouse keeper and a storm.",
    "List twenty animals and one fact about each.",
    "Describe how to bake bread, from flour to the first slice.",
    "What happens, in order, when you type a web address into a browser?",
    "Write a poem about the sea in twelve lines.",
    "Explain recursion to a child, with three examples.",
    "Summarise the history of the bicycle.",
)
TICK_S = 0.5  # how often progress is told
# A stream that failed this many times in a row stops (a refused key, an engine gone): the
# level then ends instead of spinning on errors.
MAX_FAULTS_IN_A_ROW = 3


@dataclass(frozen=True, slots=True)
class Progress:
    """Where a level is: its streams, seconds run of the planned, requests and tokens."""

    concurrency: int
    elapsed_s: float
    duration_s: float
    requests: int
    tokens: int


@dataclass(slots=True)
class _LevelTally:
    tokens: int = 0
    requests: int = 0
    errors: int = 0
    ttft_ms: list[float] = field(default_factory=list)
    stream_rates: list[float] = field(default_factory=list)
    first_error: str = ""


@dataclass(frozen=True, slots=True)
class LevelResult:
    """One level's figures."""

    concurrency: int
    requests: int  # finished, failed or not
    errors: int
    tokens: int
    wall_s: float
    aggregate_tok_s: float
    per_stream_tok_s: float  # the median request's decode rate (its client's view)
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    first_error: str = ""  # the first failure's one-line reason

    def as_json(self) -> dict[str, object]:
        return {
            "concurrency": self.concurrency, "requests": self.requests, "errors": self.errors,
            "tokens": self.tokens, "wall_s": round(self.wall_s, 3),
            "aggregate_tok_s": round(self.aggregate_tok_s, 2),
            "per_stream_tok_s": round(self.per_stream_tok_s, 2),
            "ttft_p50_ms": _rounded(self.ttft_p50_ms), "ttft_p95_ms": _rounded(self.ttft_p95_ms),
            "first_error": self.first_error,
        }


def _rounded(value: float | None) -> float | None:
    return round(value, 1) if value is not None else None


def percentile(values: Sequence[float], q: float) -> float | None:
    """The `q` quantile (0..1) by linear interpolation between the closest ranks; None of
    nothing."""
    if not values:
        return None
    ordered = sorted(values)
    rank = q * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def parse_levels(text: str) -> list[int]:
    """`1,4,8` as levels; ValueError naming what is wrong."""
    levels: list[int] = []
    for part in text.split(","):
        word = part.strip()
        if not word.isdigit() or not 1 <= int(word) <= 256:
            raise ValueError(f"{part.strip()!r} is not a number of streams from 1 to 256")
        if int(word) not in levels:
            levels.append(int(word))
    if not levels:
        raise ValueError("no level given")
    return levels


async def run_level(
    client: PromptClient,
    concurrency: int,
    duration_s: float,
    *,
    max_tokens: int,
    progress: Callable[[Progress], None] = lambda p: None,
    clock: Callable[[], float] = time.perf_counter,
) -> LevelResult:
    """`concurrency` streams for `duration_s`; the figures of what they got."""
    tally = _LevelTally()
    start = clock()
    deadline = start + duration_s

    async def worker(index: int) -> None:
        turn = index
        faults = 0
        while clock() < deadline and faults < MAX_FAULTS_IN_A_ROW:
            prompt = PROMPTS[turn % len(PROMPTS)]
            turn += concurrency
            # temperature 0 and a seed: the same prompt gets the same answer's length
            async for event in client.stream(prompt, max_tokens, prompt_id=turn,
                                             temperature=0.0, seed=1):
                if isinstance(event, PromptDone):
                    faults = 0
                    tally.requests += 1
                    tally.tokens += event.tokens_generated
                    if event.ttft_ms is not None:
                        tally.ttft_ms.append(float(event.ttft_ms))
                    if event.tokens_per_s > 0:
                        tally.stream_rates.append(event.tokens_per_s)
                elif isinstance(event, PromptFault):
                    faults += 1
                    tally.requests += 1
                    tally.errors += 1
                    tally.first_error = tally.first_error or event.error

    async def ticker() -> None:
        while True:
            progress(Progress(concurrency, clock() - start, duration_s, tally.requests,
                              tally.tokens))
            await asyncio.sleep(TICK_S)

    tick = asyncio.create_task(ticker())
    try:
        await asyncio.gather(*(worker(i) for i in range(concurrency)))
    finally:
        tick.cancel()
    wall = max(1e-9, clock() - start)
    progress(Progress(concurrency, wall, duration_s, tally.requests, tally.tokens))
    return LevelResult(
        concurrency=concurrency, requests=tally.requests, errors=tally.errors,
        tokens=tally.tokens, wall_s=wall, aggregate_tok_s=tally.tokens / wall,
        per_stream_tok_s=statistics.median(tally.stream_rates) if tally.stream_rates else 0.0,
        ttft_p50_ms=percentile(tally.ttft_ms, 0.50), ttft_p95_ms=percentile(tally.ttft_ms, 0.95),
        first_error=tally.first_error,
    )


def http_for(concurrency: int) -> httpx.AsyncClient:
    """One pool for every stream of a bench: a connection per stream, no proxy (the endpoint
    is on loopback), a long read (a loaded engine queues a stream before its first token)."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(30.0, connect=5.0, read=300.0), trust_env=False,
        limits=httpx.Limits(max_connections=concurrency + 2,
                            max_keepalive_connections=concurrency + 2),
    )
