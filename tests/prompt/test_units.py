"""The prompt area's pure parts: SSE parsing, RPC parsing, history, display, channel records."""

from __future__ import annotations

import asyncio
import json
import ssl
import subprocess
import sys

import pytest

from mvp_tui.datastream.channels import MVP_ORCH_PROMPT
from mvp_tui.prompt.channel import orch_prompt_records
from mvp_tui.prompt.client import PromptClient, shared_ssl_context
from mvp_tui.prompt.display import safe_answer, summary
from mvp_tui.prompt.events import (
    FaultKind,
    PromptCancelled,
    PromptDone,
    PromptFault,
    PromptQueued,
    TextDelta,
)
from mvp_tui.prompt.history import PromptHistory
from mvp_tui.prompt.queue import PromptQueue, prompt_cost
from mvp_tui.prompt.rpc import (
    RpcAddr,
    RpcAddrError,
    RpcRequestError,
    SubmitPrompt,
    encode_line,
    parse_rpc_addr,
    parse_submit_prompt,
    rpc_line,
)
from mvp_tui.prompt.sse import SseEvent, SseParser
from tests.prompt.waiting import WaitingSink


def test_sse_joins_data_lines_skips_comments_and_keeps_a_last_unterminated_event() -> None:
    parser = SseParser()
    source = [": ping", "data: a", "data:b", "", "event: error", "data: {}", "", "", "data: end"]
    events = [e for e in map(parser.feed, source) if e is not None]
    assert events == [SseEvent("message", "a\nb"), SseEvent("error", "{}")]
    assert parser.flush() == SseEvent("message", "end")
    assert parser.flush() is None


def test_rpc_addr_accepts_loopback_only() -> None:
    assert parse_rpc_addr("127.0.0.1:19777") == RpcAddr("127.0.0.1", 19777)
    assert parse_rpc_addr("localhost:0") == RpcAddr("127.0.0.1", 0)
    assert parse_rpc_addr("[::1]:19777") == RpcAddr("::1", 19777)
    with pytest.raises(
        RpcAddrError, match=r"refusing \[prompt\] rpc_addr '0\.0\.0\.0:19777'.*loopback"
    ):
        parse_rpc_addr("0.0.0.0:19777")
    with pytest.raises(RpcAddrError, match=r"MVP_PROMPT_RPC_BIND.*fix: set MVP_PROMPT_RPC_BIND"):
        parse_rpc_addr("203.0.113.7:19777", "MVP_PROMPT_RPC_BIND")
    with pytest.raises(RpcAddrError, match="port 'x' is not a number"):
        parse_rpc_addr("127.0.0.1:x")
    with pytest.raises(RpcAddrError, match="out of range"):
        parse_rpc_addr("127.0.0.1:70000")
    with pytest.raises(RpcAddrError, match="expected host:port"):
        parse_rpc_addr("19777")


def test_submit_prompt_parses_the_seeds_fields_and_names_each_problem() -> None:
    line = b'{"request_id": 7, "prompt_text": "hi", "max_tokens": 0}\n'
    assert parse_submit_prompt(line) == SubmitPrompt(7, "hi", 0)
    assert parse_submit_prompt(line).with_defaults(64) == SubmitPrompt(7, "hi", 64)
    assert parse_submit_prompt(b'{"request_id": 1, "prompt_text": "x"}').max_tokens == 0
    with pytest.raises(RpcRequestError, match="invalid JSON"):
        parse_submit_prompt(b"hello")
    with pytest.raises(RpcRequestError, match="not a JSON object"):
        parse_submit_prompt(b"[1]")
    with pytest.raises(RpcRequestError, match=r"request_id must be an integer.*got nothing"):
        parse_submit_prompt(b'{"prompt_text": "x"}')
    with pytest.raises(RpcRequestError, match="max_tokens must be an integer") as info:
        parse_submit_prompt(b'{"request_id": 4, "prompt_text": "x", "max_tokens": -1}')
    assert info.value.request_id == 4
    with pytest.raises(RpcRequestError, match="request_id"):
        parse_submit_prompt(b'{"request_id": true, "prompt_text": "x"}')


def test_rpc_lines_have_the_seeds_shapes() -> None:
    done = PromptDone(
        prompt_id=3, final_text="ab", tokens_generated=2, elapsed_ms=9, ttft_ms=1, tokens_per_s=5
    )
    assert rpc_line(TextDelta(prompt_id=3, text="ä"), 11) == {
        "type": "text_delta",
        "request_id": 11,
        "text": "ä",
    }
    assert rpc_line(done, 11) == {
        "type": "done",
        "request_id": 11,
        "final_text": "ab",
        "tokens_generated": 2,
        "elapsed_ms": 9,
    }
    fault = PromptFault(prompt_id=3, fault_kind=FaultKind.TIMEOUT, error="slow", fix="wait")
    assert rpc_line(fault, 11) == {"type": "fault", "request_id": 11, "error": "slow; fix: wait"}
    cancelled = rpc_line(PromptCancelled(prompt_id=3, was_active=True), 11)
    assert cancelled is not None and cancelled["type"] == "fault"
    assert rpc_line(PromptQueued(prompt_id=3, text_chars=1, max_tokens=1, position=0), 11) is None
    assert encode_line({"a": "ä"}) == '{"a":"ä"}\n'.encode()


def test_history_walks_up_and_down_and_restores_the_draft() -> None:
    history = PromptHistory(size=3)
    for text in ["a", "b", "b", "  ", "c", "d"]:
        history.add(text)
    assert history.entries() == ["b", "c", "d"]  # bounded, no blanks, no repeats
    assert history.newer() is None
    assert history.older("draft") == "d"
    assert history.older() == "c"
    assert history.older() == "b"
    assert history.older() == "b"  # stays at the oldest
    assert history.newer() == "c"
    assert history.newer() == "d"
    assert history.newer() == "draft"
    assert history.newer() is None


def test_display_strips_escapes_but_keeps_lines_and_never_markup() -> None:
    assert safe_answer("one\x1b[2J\n[bold]two[/bold]\x07") == "one\n[bold]two[/bold]"
    done = PromptDone(
        prompt_id=1,
        final_text="",
        tokens_generated=64,
        elapsed_ms=750,
        ttft_ms=180,
        tokens_per_s=112.4,
        cost_usd=0.0002,
    )
    assert summary(done) == "64 tok · 112 tok/s · TTFT 180 ms · 0.75 s · $0.0002"


def test_prompt_cost_is_price_per_hour_times_elapsed() -> None:
    assert prompt_cost(None, 10_000) is None
    assert prompt_cost(0.36, 10_000) == pytest.approx(0.001)


def test_channel_records_follow_the_seeds_orch_prompt_event() -> None:
    assert MVP_ORCH_PROMPT == "mvp.orch.prompt"
    (delta,) = orch_prompt_records(TextDelta(prompt_id=5, text="héllo"), run_id=1, node_id=2)
    assert delta == {
        "type": "OrchPromptEvent",
        "phase": "node_prompt_event",
        "status": "observed",
        "run_id": 1,
        "node_id": 2,
        "request_id": 5,
        "detail": {"event": "TextDelta", "terminal": False, "text_bytes": 6},
    }
    fault = PromptFault(prompt_id=5, fault_kind=FaultKind.TIMEOUT, error="slow")
    phases = [(r["phase"], r["status"]) for r in orch_prompt_records(fault, run_id=1, node_id=2)]
    assert phases == [("node_prompt_event", "observed"), ("prompt_complete", "failed")]
    json.dumps(orch_prompt_records(fault, run_id=1, node_id=2))  # payloads are plain JSON


def test_events_serialise_with_snake_case_names() -> None:
    event = PromptFault(
        prompt_id=1, fault_kind=FaultKind.ENGINE_REJECTED, error="e", http_status=400
    )
    body = json.loads(event.to_json())
    assert body["event"] == "prompt_fault" and body["fault_kind"] == "engine_rejected"
    assert TextDelta(prompt_id=1, text="x").to_dict()["event"] == "text_delta"


def test_the_prompt_package_never_imports_textual() -> None:
    code = "import sys, mvp_tui.prompt; print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


async def test_clients_made_per_prompt_load_the_ca_bundle_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The run makes a client per prompt (the node of the moment); each loading the CA
    bundle cost ~600 KB of C heap and 5-50 ms before its request went out (issue 40 §4)."""
    shared_ssl_context()
    made: list[object] = []
    real = ssl.create_default_context

    def counted(*args: object, **kwargs: object) -> ssl.SSLContext:
        made.append(args)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ssl, "create_default_context", counted)
    clients = [PromptClient("http://127.0.0.1:9", "m") for _ in range(5)]
    for client in clients:
        await client.aclose()
    assert made == []


async def test_a_failing_client_factory_faults_that_prompt_and_the_queue_goes_on() -> None:
    calls: list[int] = []

    def factory() -> PromptClient:
        calls.append(1)
        raise RuntimeError("no endpoint yet")

    sink = WaitingSink()
    queue = PromptQueue(factory, sink)
    first = queue.submit("a", 4)
    second = queue.submit("b", 4)
    fault = await sink.end_of(first)
    assert isinstance(fault, PromptFault) and fault.fault_kind is FaultKind.CLIENT_ERROR
    assert "RuntimeError: no endpoint yet" in fault.error
    assert isinstance(await sink.end_of(second), PromptFault)
    assert len(calls) == 2
    await queue.aclose()


async def test_closing_the_queue_cancels_what_is_waiting() -> None:
    sink = WaitingSink()
    queue = PromptQueue(lambda: PromptClient("http://127.0.0.1:9", "m"), sink)
    ids = [queue.submit("a", 4), queue.submit("b", 4)]
    await queue.aclose()
    ends = [sink.of_prompt(i)[-1] for i in ids]
    assert all(isinstance(e, PromptCancelled) and not e.was_active for e in ends)
    await asyncio.wait_for(queue.drained(), 5)


async def test_a_paused_queue_holds_its_prompts_for_the_next_node() -> None:
    """A lost node's replacement: prompts queued while no node serves wait, in order, and run
    on the node that serves next (the client factory is asked only then)."""
    endpoints: list[str] = []

    def factory() -> PromptClient:
        endpoints.append("asked")
        raise RuntimeError("the node of the moment answers here")

    sink = WaitingSink()
    queue = PromptQueue(factory, sink)
    queue.pause()
    ids = [queue.submit("a", 4), queue.submit("b", 4)]
    for _ in range(20):  # the worker takes no prompt while paused
        await asyncio.sleep(0)
    assert queue.paused and endpoints == [] and [p.prompt_id for p in queue.pending()] == ids
    queue.resume()
    ends = [await sink.end_of(i) for i in ids]
    assert all(isinstance(e, PromptFault) for e in ends) and len(endpoints) == 2
    await queue.aclose()


async def test_prompts_on_one_node_share_its_client_and_closing_ends_every_one() -> None:
    """The engine made a PromptClient (an httpx pool) per prompt and never closed one: each
    prompt opened a connection of its own. One client per node (URL and model) now; a
    replaced node gets its own; ending prompting closes them all."""
    from mvp_tui.prompt.client import NodeClients

    clients = NodeClients(api_key="sk-test")
    first = clients("http://127.0.0.1:9001", "m")
    assert clients("http://127.0.0.1:9001", "m") is first
    moved = clients("http://127.0.0.1:9002", "m")
    assert moved is not first and len(clients) == 2
    await clients.aclose()
    assert first._http.is_closed and moved._http.is_closed
    assert len(clients) == 0
