"""PromptClient on stream shapes from llama.cpp's native server and on broken answers."""

from __future__ import annotations

import json
from typing import Any

from mvp_tui.prompt.client import PromptClient
from mvp_tui.prompt.events import FaultKind, PromptDone, PromptFault, StreamEvent, TextDelta
from mvp_tui.secrets import REDACTED
from tests.prompt.fake_openai import Canned, fake_openai, sse


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


async def run(client: PromptClient, prompt: str = "hi", max_tokens: int = 8) -> list[StreamEvent]:
    return [e async for e in client.stream(prompt, max_tokens)]


async def test_native_llama_server_stream_with_usage_and_timings() -> None:
    body = sse(
        chunk({"role": "assistant", "content": None}),
        chunk({"content": "Hel"}),
        chunk({"content": "lo"}),
        chunk({}, "stop"),
        {"choices": [], "usage": {"completion_tokens": 3}, "timings": {"predicted_n": 3}},
        "[DONE]",
    )
    async with (
        fake_openai(Canned(200, [b": ping\n\n", *body])) as fake,
        PromptClient(fake.base_url, "m", api_key="test-key-123456") as client,
    ):
        events = await run(client, "hello", 5)
    headers, request = fake.requests[0]
    assert headers["authorization"] == "Bearer test-key-123456"
    assert request["stream"] is True and request["max_tokens"] == 5
    assert request["messages"] == [{"role": "user", "content": "hello"}]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hel", "lo"]
    done = events[-1]
    assert isinstance(done, PromptDone)
    assert done.tokens_generated == 3  # the engine's usage wins over counted chunks
    assert done.final_text == "Hello" and done.finish_reason == "stop"


async def test_a_json_error_answer_gives_the_engines_message_and_code() -> None:
    error = {
        "error": {
            "code": 400,
            "message": "request (652 tokens) exceeds the available context size (256 tokens)",
            "type": "exceed_context_size_error",
        }
    }
    canned = Canned(400, [json.dumps(error).encode()], "application/json")
    async with fake_openai(canned) as fake, PromptClient(fake.base_url, "m") as client:
        (fault,) = await run(client)
    assert isinstance(fault, PromptFault)
    assert fault.fault_kind is FaultKind.ENGINE_REJECTED and fault.http_status == 400
    assert "exceeds the available context size" in fault.error
    assert fault.code == "exceed_context_size_error" and fault.fix is not None


async def test_a_non_json_error_answer_is_an_http_error() -> None:
    canned = Canned(503, [b"<html>\x1b[31mbusy</html>"], "text/html")
    async with fake_openai(canned) as fake, PromptClient(fake.base_url, "m") as client:
        (fault,) = await run(client)
    assert isinstance(fault, PromptFault)
    assert fault.fault_kind is FaultKind.HTTP_ERROR and fault.http_status == 503
    assert "\x1b" not in fault.error and "busy" in fault.error


async def test_an_error_chunk_mid_stream_ends_it_with_the_message() -> None:
    body = sse(chunk({"content": "a"}), {"error": {"message": "slot crashed", "code": 500}})
    async with fake_openai(Canned(200, body)) as fake, PromptClient(fake.base_url, "m") as c:
        events = await run(c)
    fault = events[-1]
    assert isinstance(fault, PromptFault) and fault.fault_kind is FaultKind.ENGINE_REJECTED
    assert "slot crashed" in fault.error and fault.partial_text == "a"


async def test_a_stream_that_stops_without_done_ended_early() -> None:
    body = sse(chunk({"role": "assistant"}), chunk({"content": "a"}), chunk({"content": "b"}))
    async with (
        fake_openai(Canned(200, body, complete=False)) as fake,
        PromptClient(fake.base_url, "m") as client,
    ):
        events = await run(client)
    fault = events[-1]
    assert isinstance(fault, PromptFault) and fault.fault_kind is FaultKind.STREAM_ENDED_EARLY
    assert fault.error.startswith("stream ended early") and fault.partial_text == "ab"


async def test_a_chunk_that_is_not_json_is_a_bad_stream() -> None:
    async with (
        fake_openai(Canned(200, [b"data: {oops\n\n"])) as fake,
        PromptClient(fake.base_url, "m") as client,
    ):
        (fault,) = await run(client)
    assert isinstance(fault, PromptFault) and fault.fault_kind is FaultKind.BAD_STREAM


async def test_errors_never_carry_the_api_key() -> None:
    canned = Canned(401, [b'{"error": {"message": "invalid key test-key-abcdef99"}}'])
    async with (
        fake_openai(canned) as fake,
        PromptClient(fake.base_url, "m", api_key="test-key-abcdef99") as client,
    ):
        (fault,) = await run(client)
    assert isinstance(fault, PromptFault)
    assert "test-key-abcdef99" not in fault.error and REDACTED in fault.error


async def test_every_sse_shape_and_odd_chunk_reads_as_the_general_path_does() -> None:
    """The fast path (one `data: ` line then a blank one, a chunk of the engines' types)
    must agree with the general one on what it does not take: names, comments, multi-line
    data, no space after the colon, a final event without its blank line, odd types."""

    def data(value: dict[str, Any]) -> bytes:
        return json.dumps(value).encode()

    body = [
        b"event: message\ndata: " + data(chunk({"content": "A"})) + b"\n\n",
        b'data: {"choices":[{"delta":\ndata: {"content":"B"}}]}\n\n',  # data on two lines
        b"data:" + data(chunk({"content": "C"})) + b"\n\n",  # no space after the colon
        b"data: " + data(chunk({"content": "D"})) + b"\n: ping\n\n",  # a comment inside
        b"data: " + data({"choices": [{"delta": {"content": 5}}]}) + b"\n\n",  # not text
        b"data: " + data({"choices": [{"delta": ["E"]}]}) + b"\n\n",  # delta not an object
        b"data: " + data({"choices": [{"delta": {"content": "F"}}, 7]}) + b"\n\n",  # 2nd odd
        b"data: " + data({"choices": [{"delta": {"content": "G"}, "finish_reason": 3}]}),
        b"\n\n",
        b"data: " + data({"choices": [], "usage": {"completion_tokens": 4.5}}) + b"\r\n\r\n",
        b"data: " + data({"choices": [], "usage": {"completion_tokens": 9}}) + b"\n\n",
        b"data: [DONE]",  # the last event without its blank line
    ]
    async with (
        fake_openai(Canned(200, body)) as fake,
        PromptClient(fake.base_url, "m") as client,
    ):
        events = await run(client)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["A", "B", "C", "D", "F", "G"]
    done = events[-1]
    assert isinstance(done, PromptDone), done
    assert done.tokens_generated == 9 and done.finish_reason is None


async def test_llama_servers_own_timings_reach_the_answers_end() -> None:
    """The decode rate and prompt time llama-server reports (the host journal's speed line
    takes them over the client's clock, which counts the network too)."""
    timings = {"prompt_n": 9, "prompt_ms": 31.5, "predicted_n": 2, "predicted_ms": 16.0,
               "predicted_per_second": 125.0}
    body = sse(chunk({"content": "a"}), chunk({"content": "b"}, "length"),
               {"choices": [], "usage": {"completion_tokens": 2}, "timings": timings}, "[DONE]")
    async with fake_openai(Canned(200, body)) as fake, PromptClient(fake.base_url, "m") as c:
        done = (await run(c))[-1]
    assert isinstance(done, PromptDone)
    assert done.engine_tokens_per_s == 125.0 and done.engine_prompt_ms == 31.5
    odd = {**timings, "predicted_per_second": "fast"}  # not a number: the general path
    body = sse(chunk({"content": "a"}), {"choices": [], "timings": odd}, "[DONE]")
    async with fake_openai(Canned(200, body)) as fake, PromptClient(fake.base_url, "m") as c:
        done = (await run(c))[-1]
    assert isinstance(done, PromptDone)
    assert done.engine_tokens_per_s is None and done.engine_prompt_ms == 31.5
