"""PromptClient against the real llama-cpp-python server and the tiny generated model."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

import pytest

from mvp_tui.prompt.client import PromptClient
from mvp_tui.prompt.events import FaultKind, PromptDone, PromptFault, StreamEvent, TextDelta
from tests.prompt.engine import LlamaServer

pytestmark = pytest.mark.peer("llama-cpp-python server")


async def collect(client: PromptClient, prompt: str, max_tokens: int) -> list[StreamEvent]:
    return [event async for event in client.stream(prompt, max_tokens, prompt_id=7)]


async def test_a_prompt_streams_tokens_then_done_with_counts(engine: LlamaServer) -> None:
    async with PromptClient(engine.base_url, "tiny") as client:
        events = await asyncio.wait_for(collect(client, "hello there", 24), 30)

    deltas = [e for e in events if isinstance(e, TextDelta)]
    done = events[-1]
    assert isinstance(done, PromptDone), done
    assert len(deltas) == 24  # the tiny model never stops early: one content chunk per token
    assert all(d.prompt_id == 7 for d in deltas)
    assert done.tokens_generated == 24
    assert done.final_text == "".join(d.text for d in deltas) and done.final_text.strip()
    assert done.finish_reason == "length"
    assert done.ttft_ms is not None and 0 <= done.ttft_ms <= done.elapsed_ms
    assert done.tokens_per_s > 0
    assert done.cost_usd is None


async def test_base_url_may_end_in_v1(engine: LlamaServer) -> None:
    async with PromptClient(f"{engine.base_url}/v1/", "tiny") as client:
        events = await asyncio.wait_for(collect(client, "hi", 3), 30)
    assert isinstance(events[-1], PromptDone) and events[-1].tokens_generated == 3


async def test_a_prompt_longer_than_the_context_faults_with_the_engines_reason(
    engine: LlamaServer,
) -> None:
    async with PromptClient(engine.base_url, "tiny") as client:
        events = await asyncio.wait_for(collect(client, "word " * 400, 8), 30)

    assert len(events) == 1
    fault = events[0]
    assert isinstance(fault, PromptFault), fault
    assert fault.fault_kind is FaultKind.ENGINE_REJECTED
    assert fault.http_status == 400
    assert fault.code == "context_length_exceeded"
    assert "maximum context length is 256 tokens" in fault.error
    assert fault.fix is not None and "shorten the prompt" in fault.fix


async def test_a_refused_connection_faults_with_the_fix() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again below: nothing listens there
    async with PromptClient(f"http://127.0.0.1:{port}", "tiny") as client:
        events = await asyncio.wait_for(collect(client, "hi", 4), 30)

    assert len(events) == 1
    fault = events[0]
    assert isinstance(fault, PromptFault)
    assert fault.fault_kind is FaultKind.CONNECTION_REFUSED
    assert f"127.0.0.1:{port}" in fault.error
    assert fault.fix is not None and "engine is running" in fault.fix


async def test_engine_killed_mid_stream_faults_stream_ended_early(
    private_engine: Callable[[], LlamaServer],
) -> None:
    server = private_engine()
    seen: list[StreamEvent] = []
    async with PromptClient(server.base_url, "tiny") as client:
        async for event in client.stream("tell me", 1000):
            seen.append(event)
            if len(seen) == 1:
                await asyncio.to_thread(server.kill)

    fault = seen[-1]
    assert isinstance(fault, PromptFault), fault
    assert fault.fault_kind is FaultKind.STREAM_ENDED_EARLY
    assert fault.error.startswith("stream ended early")
    deltas = [e for e in seen if isinstance(e, TextDelta)]
    assert 1 <= len(deltas) < 1000
    assert fault.partial_text == "".join(d.text for d in deltas)


async def test_closing_the_stream_disconnects_from_the_engine(
    private_engine: Callable[[], LlamaServer],
) -> None:
    server = private_engine()
    async with PromptClient(server.base_url, "tiny") as client:
        stream = client.stream("tell me", 1000)
        first = await asyncio.wait_for(anext(stream), 30)
        assert isinstance(first, TextDelta)
        await stream.aclose()
        # The server noticed: it logs the disconnect and stops generating.
        assert await asyncio.to_thread(server.wait_for_count, "Disconnected from client", 1, 30)
        events = await asyncio.wait_for(collect(client, "again", 5), 30)
    assert isinstance(events[-1], PromptDone) and events[-1].tokens_generated == 5
