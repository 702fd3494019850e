"""The token-progress watchdog on its own: it fires only while a prompt is active and silent."""

from __future__ import annotations

import asyncio

import pytest

from mvp_tui.engine.stall import StallDetected, StallWatch
from mvp_tui.events import EngineEvent
from mvp_tui.prompt.events import FaultKind, PromptDone, PromptFault, PromptStarted, TextDelta


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_silence_during_a_prompt_fires_with_the_prompt_named() -> None:
    seen: list[EngineEvent] = []
    watch = StallWatch(0.2)
    sink = watch.tap(seen.append)
    task = asyncio.ensure_future(watch.watch())
    sink(PromptStarted(prompt_id=7))
    sink(TextDelta(prompt_id=7, text="a"))
    with pytest.raises(StallDetected) as caught:
        await asyncio.wait_for(task, 5)
    assert caught.value.prompt_id == 7 and "stall_secs = 0.2" in str(caught.value)
    assert len(seen) == 2  # the tap forwards every event


async def test_tokens_keep_it_quiet_and_an_ended_prompt_disarms_it() -> None:
    clock = Clock()
    watch = StallWatch(10.0, clock=clock)
    task = asyncio.ensure_future(watch.watch())
    watch.observe(PromptStarted(prompt_id=1))
    for _ in range(5):
        clock.now += 6  # each token comes before the 10 s limit
        watch.observe(TextDelta(prompt_id=1, text="x"))
        await asyncio.sleep(0)
    watch.observe(PromptDone(
        prompt_id=1, final_text="xxxxx", tokens_generated=5, elapsed_ms=30000, ttft_ms=1,
        tokens_per_s=0.2,
    ))
    clock.now += 1000  # long silence, but nothing is active
    watch._progress.set()  # wake the watch so it re-checks at this clock
    for _ in range(5):
        await asyncio.sleep(0)  # yield to the watch task (no time passes)
    assert not task.done()
    task.cancel()


async def test_a_broken_stream_is_remembered_as_the_engine_lost() -> None:
    watch = StallWatch(None)
    watch.observe(PromptStarted(prompt_id=3))
    watch.observe(PromptFault(prompt_id=3, fault_kind=FaultKind.STREAM_ENDED_EARLY, error="cut"))
    assert watch.engine_lost is not None and watch.engine_lost.prompt_id == 3
    rejected = StallWatch(None)
    rejected.observe(PromptFault(prompt_id=4, fault_kind=FaultKind.ENGINE_REJECTED, error="long"))
    assert rejected.engine_lost is None
