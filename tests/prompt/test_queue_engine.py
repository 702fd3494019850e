"""PromptQueue against the real engine: order, faults, cancel, cost, history."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from mvp_tui.events import EngineEvent
from mvp_tui.prompt.client import PromptClient
from mvp_tui.prompt.events import (
    FaultKind,
    PromptCancelled,
    PromptDone,
    PromptFault,
    PromptQueued,
    PromptStarted,
    TextDelta,
)
from mvp_tui.prompt.queue import PendingPrompt, PromptQueue
from tests.prompt.engine import LlamaServer
from tests.prompt.waiting import WaitingSink

pytestmark = pytest.mark.peer("llama-cpp-python server")


def queue_for(server: LlamaServer, sink: WaitingSink, price: float | None = None) -> PromptQueue:
    client = PromptClient(server.base_url, "tiny")
    return PromptQueue(lambda: client, sink, price)


def kinds(events: list[EngineEvent]) -> list[tuple[str, int]]:
    return [(e.kind, getattr(e, "prompt_id", 0)) for e in events if not isinstance(e, TextDelta)]


async def test_a_prompt_is_queued_started_streamed_and_priced(engine: LlamaServer) -> None:
    sink = WaitingSink()
    queue = queue_for(engine, sink, price=0.36)
    try:
        pid = queue.submit("hello", 16)
        done = await sink.end_of(pid)
    finally:
        await queue.aclose()

    assert isinstance(done, PromptDone), done
    assert kinds(sink.events) == [
        ("prompt_queued", pid),
        ("prompt_started", pid),
        ("prompt_done", pid),
    ]
    queued = sink.events[0]
    assert isinstance(queued, PromptQueued) and queued.position == 0 and queued.text_chars == 5
    deltas = [e for e in sink.events if isinstance(e, TextDelta)]
    assert len(deltas) == done.tokens_generated == 16
    assert done.cost_usd == pytest.approx(0.36 * done.elapsed_ms / 3_600_000)
    assert queue.history.entries() == ["hello"]


async def test_two_prompts_queued_run_one_after_the_other(engine: LlamaServer) -> None:
    sink = WaitingSink()
    queue = queue_for(engine, sink)
    try:
        first = queue.submit("one", 40)
        second = queue.submit("two", 8)
        assert [p.prompt_id for p in queue.pending()] == [first, second] or queue.active
        await sink.end_of(second)
    finally:
        await queue.aclose()

    positions = [e.position for e in sink.events if isinstance(e, PromptQueued)]
    assert positions == [0, 1]
    done_first = next(i for i, e in enumerate(sink.events) if isinstance(e, PromptDone))
    # Nothing of the second prompt happens until the first is done.
    assert all(
        getattr(e, "prompt_id", None) != second
        for e in sink.events[:done_first]
        if not isinstance(e, PromptQueued)
    )
    assert kinds(sink.events)[-3:] == [
        ("prompt_done", first),
        ("prompt_started", second),
        ("prompt_done", second),
    ]


async def test_a_too_long_prompt_faults_then_the_next_one_works(engine: LlamaServer) -> None:
    sink = WaitingSink()
    queue = queue_for(engine, sink)
    try:
        long_id = queue.submit("word " * 400, 8)
        next_id = queue.submit("short", 4)
        fault = await sink.end_of(long_id)
        done = await sink.end_of(next_id)
    finally:
        await queue.aclose()

    assert isinstance(fault, PromptFault)
    assert fault.fault_kind is FaultKind.ENGINE_REJECTED and fault.http_status == 400
    assert "maximum context length" in fault.error
    assert isinstance(done, PromptDone) and done.tokens_generated == 4


async def test_cancel_closes_the_active_stream_and_the_next_starts(
    private_engine: Callable[[], LlamaServer],
) -> None:
    server = private_engine()
    sink = WaitingSink()
    queue = queue_for(server, sink)
    try:
        long_id = queue.submit("go on", 1000)
        next_id = queue.submit("then this", 5)
        await sink.first(lambda e: isinstance(e, TextDelta) and e.prompt_id == long_id)
        assert queue.cancel() is True  # Esc: the active one
        cancelled = await sink.end_of(long_id)
        assert await asyncio.to_thread(server.wait_for_count, "Disconnected from client", 1, 30)
        done = await sink.end_of(next_id)
    finally:
        await queue.aclose()

    assert isinstance(cancelled, PromptCancelled) and cancelled.was_active
    streamed = [e for e in sink.of_prompt(long_id) if isinstance(e, TextDelta)]
    assert 1 <= len(streamed) < 1000
    assert cancelled.partial_text == "".join(e.text for e in streamed)
    assert isinstance(done, PromptDone) and done.tokens_generated == 5
    assert not any(isinstance(e, PromptDone) for e in sink.of_prompt(long_id))


async def test_cancelling_a_waiting_prompt_removes_it_from_the_queue(engine: LlamaServer) -> None:
    sink = WaitingSink()
    queue = queue_for(engine, sink)
    try:
        first = queue.submit("one", 30)
        skipped = queue.submit("two", 30)
        third = queue.submit("three", 3)
        assert queue.cancel(skipped) is True
        assert skipped not in [p.prompt_id for p in queue.pending()]
        await sink.end_of(third)
        await queue.drained()
    finally:
        await queue.aclose()

    assert [type(e) for e in sink.of_prompt(skipped)] == [PromptQueued, PromptCancelled]
    cancelled = sink.of_prompt(skipped)[-1]
    assert isinstance(cancelled, PromptCancelled) and not cancelled.was_active
    assert isinstance(sink.of_prompt(first)[-1], PromptDone)
    assert queue.cancel(skipped) is False
    assert queue.pending() == [] and queue.active is None


async def test_pending_lists_waiting_prompts_in_order(engine: LlamaServer) -> None:
    sink = WaitingSink()
    queue = queue_for(engine, sink)
    try:
        ids = [queue.submit(f"p{i}", 4) for i in range(3)]
        # submit() is synchronous: the worker has not taken anything yet.
        assert queue.pending() == [
            PendingPrompt(i, f"p{n}", 4, queue.pending()[0].source) for n, i in enumerate(ids)
        ]
        await sink.first(lambda e: isinstance(e, PromptStarted) and e.prompt_id == ids[0])
        assert queue.active is not None and queue.active.prompt_id == ids[0]
        assert [p.prompt_id for p in queue.pending()] == ids[1:]
        await queue.drained()
    finally:
        await queue.aclose()
    assert [e.prompt_id for e in sink.events if isinstance(e, PromptDone)] == ids
