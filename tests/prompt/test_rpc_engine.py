"""The seed's JSON-lines prompt RPC, served through the pane's queue, with the real engine."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from mvp_tui.prompt.client import PromptClient
from mvp_tui.prompt.events import (
    PromptCancelled,
    PromptDone,
    PromptRpcListening,
    PromptSource,
    PromptStarted,
)
from mvp_tui.prompt.queue import PromptQueue
from mvp_tui.prompt.rpc import PromptRpcServer, RpcAddr
from tests.prompt.engine import LlamaServer
from tests.prompt.waiting import WaitingSink

pytestmark = pytest.mark.peer("llama-cpp-python server")

DELTA_KEYS = {"type", "request_id", "text"}
DONE_KEYS = {"type", "request_id", "final_text", "tokens_generated", "elapsed_ms"}
FAULT_KEYS = {"type", "request_id", "error"}
TOKEN = "mvp-rpc-token-for-these-tests"


@pytest.fixture
async def served(engine: LlamaServer) -> AsyncIterator[tuple[PromptQueue, RpcAddr, WaitingSink]]:
    sink = WaitingSink()
    client = PromptClient(engine.base_url, "tiny")
    queue = PromptQueue(lambda: client, sink)
    rpc = PromptRpcServer(queue, RpcAddr("127.0.0.1", 0), token=TOKEN, default_max_tokens=6,
                          sink=sink)
    addr = await rpc.start()
    yield queue, addr, sink
    await rpc.aclose()
    await queue.aclose()
    await client.aclose()


async def read_lines_until_end(reader: asyncio.StreamReader) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    while not lines or lines[-1]["type"] == "text_delta":
        raw = await asyncio.wait_for(reader.readline(), 30)
        assert raw.endswith(b"\n"), f"connection ended early after {lines}"
        lines.append(json.loads(raw))
    return lines


def submit(request_id: int, text: str, max_tokens: int) -> bytes:
    line = {"request_id": request_id, "prompt_text": text, "max_tokens": max_tokens,
            "token": TOKEN}
    return json.dumps(line).encode() + b"\n"


async def test_rpc_streams_a_prompt_with_the_seeds_line_shapes(
    served: tuple[PromptQueue, RpcAddr, WaitingSink],
) -> None:
    _, addr, sink = served
    listening = sink.events[0]
    assert isinstance(listening, PromptRpcListening) and listening.port == addr.port != 0
    reader, writer = await asyncio.open_connection(addr.host, addr.port)
    writer.write(submit(41, "hello rpc", 12))
    lines = await read_lines_until_end(reader)
    # The same connection takes a second request; max_tokens 0 means the default (6).
    writer.write(submit(42, "again", 0))
    second = await read_lines_until_end(reader)
    writer.close()

    *deltas, done = lines
    assert len(deltas) == 12
    assert all(set(d) == DELTA_KEYS and d["type"] == "text_delta" for d in deltas)
    assert all(d["request_id"] == 41 for d in deltas)
    assert set(done) == DONE_KEYS and done["type"] == "done" and done["request_id"] == 41
    assert done["final_text"] == "".join(d["text"] for d in deltas)
    assert done["tokens_generated"] == 12 and done["elapsed_ms"] >= 0
    assert second[-1]["type"] == "done" and second[-1]["request_id"] == 42
    assert second[-1]["tokens_generated"] == 6
    # The prompt went through the shared queue, marked as the RPC's.
    assert [e.source for e in sink.events if hasattr(e, "source")] == [PromptSource.RPC] * 2


async def test_rpc_and_pane_share_one_queue(
    served: tuple[PromptQueue, RpcAddr, WaitingSink],
) -> None:
    queue, addr, sink = served
    pane_id = queue.submit("from the pane", 60)
    reader, writer = await asyncio.open_connection(addr.host, addr.port)
    writer.write(submit(5, "from a tool", 4))
    lines = await read_lines_until_end(reader)
    writer.close()

    assert lines[-1]["type"] == "done"
    pane_done = next(
        i for i, e in enumerate(sink.events) if isinstance(e, PromptDone) and e.prompt_id == pane_id
    )
    rpc_started = next(
        i
        for i, e in enumerate(sink.events)
        if isinstance(e, PromptStarted) and e.prompt_id != pane_id
    )
    assert pane_done < rpc_started  # one active prompt at a time across both


async def test_rpc_bad_json_gets_a_fault_line_then_the_connection_closes(
    served: tuple[PromptQueue, RpcAddr, WaitingSink],
) -> None:
    _, addr, _ = served
    reader, writer = await asyncio.open_connection(addr.host, addr.port)
    writer.write(b'{"request_id": 3, "prompt_text": "x", "max_tokens": 4\n')
    fault = json.loads(await asyncio.wait_for(reader.readline(), 30))
    assert set(fault) == FAULT_KEYS and fault["type"] == "fault"
    assert fault["error"].startswith("parse prompt request: invalid JSON")
    assert await asyncio.wait_for(reader.read(), 30) == b""  # closed, as the seed does
    writer.close()


async def test_rpc_names_a_bad_field_and_keeps_the_request_id(
    served: tuple[PromptQueue, RpcAddr, WaitingSink],
) -> None:
    _, addr, _ = served
    reader, writer = await asyncio.open_connection(addr.host, addr.port)
    line = {"request_id": 9, "prompt": "x", "max_tokens": 4, "token": TOKEN}
    writer.write(json.dumps(line).encode() + b"\n")
    fault = json.loads(await asyncio.wait_for(reader.readline(), 30))
    writer.close()
    assert fault["type"] == "fault" and fault["request_id"] == 9
    assert "prompt_text must be a string" in fault["error"]


async def test_rpc_client_leaving_mid_stream_cancels_its_prompt(
    private_engine: Callable[[], LlamaServer],
) -> None:
    server = private_engine()
    sink = WaitingSink()
    async with PromptClient(server.base_url, "tiny") as client:
        queue = PromptQueue(lambda: client, sink)
        async with PromptRpcServer(queue, RpcAddr("127.0.0.1", 0), token=TOKEN) as rpc:
            assert rpc.bound is not None
            reader, writer = await asyncio.open_connection(rpc.bound.host, rpc.bound.port)
            writer.write(submit(1, "long one", 1000))
            first = json.loads(await asyncio.wait_for(reader.readline(), 30))
            assert first["type"] == "text_delta"
            writer.transport.abort()  # gone without a goodbye
            started = next(e for e in sink.events if isinstance(e, PromptStarted))
            end = await sink.end_of(started.prompt_id)
            assert isinstance(end, PromptCancelled) and end.was_active
            assert await asyncio.to_thread(server.wait_for_count, "Disconnected from client", 1, 30)
        await queue.aclose()
