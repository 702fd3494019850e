"""Benchmark: what PromptClient + PromptQueue cost over a raw httpx SSE read.

Starts the real llama-cpp-python server on a generated model, then alternates the same
streamed chat request read two ways: a bare httpx loop (parse `data:` lines, count content
chunks) and a prompt submitted to `PromptQueue` (events to a sink, as the dashboard gets them).
Prints median tok/s (end to end, from send to [DONE]) and median TTFT for both, and checks
the targets: queue tok/s >= 0.95x raw, TTFT overhead < 20 ms. On a busy 2-core machine the
engine figures are noisy, so it also replays a recorded-shape stream from a loopback process
as fast as it can be read: the client's own ceiling and CPU cost per token, engine aside.

    .venv/bin/python bench/bench_prompt.py [--runs 9] [--max-tokens 400] [--replay-tokens 3000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.smoke import add_smoke
from mvp_tui.events import EngineEvent
from mvp_tui.prompt.client import PromptClient
from mvp_tui.prompt.events import PromptDone, TextDelta, is_end
from mvp_tui.prompt.queue import PromptQueue
from tests.fakes.tiny_gguf import write_tiny_gguf
from tests.prompt.engine import LlamaServer

PROMPT = "benchmark the stream"
TOK_S_TARGET = 0.95
TTFT_OVERHEAD_TARGET_MS = 20.0
CEILING_TARGET = 0.98


@dataclass(frozen=True)
class Run:
    tokens: int
    ttft_s: float
    total_s: float

    @property
    def tok_s(self) -> float:
        return self.tokens / self.total_s


async def raw_run(http: httpx.AsyncClient, url: str, max_tokens: int) -> Run:
    """The floor: one streamed request read with nothing but httpx and json."""
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": max_tokens,
        "stream": True,
    }
    tokens, first = 0, None
    start = time.perf_counter()
    async with http.stream("POST", url, json=body) as response:
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data == "[DONE]":
                break
            delta = json.loads(data)["choices"][0]["delta"]
            if delta.get("content"):
                tokens += 1
                if first is None:
                    first = time.perf_counter()
    end = time.perf_counter()
    assert first is not None
    return Run(tokens, first - start, end - start)


async def queue_run(queue: PromptQueue, events: list[EngineEvent], max_tokens: int) -> Run:
    """The same request through the queue, timed from submit() to its end event."""
    ended = asyncio.Event()
    first: list[float] = []

    def listener(event: EngineEvent) -> None:
        if type(event) is TextDelta:  # the harness's own cost per token kept small
            if not first:
                first.append(time.perf_counter())
        elif is_end(event):
            ended.set()

    events.clear()
    start = time.perf_counter()
    queue.submit(PROMPT, max_tokens, listener=listener)
    await asyncio.wait_for(ended.wait(), 120)
    end = time.perf_counter()
    done = events[-1]
    assert isinstance(done, PromptDone), done
    return Run(done.tokens_generated, first[0] - start, end - start)


async def bench(runs: int, max_tokens: int, model: Path) -> int:
    server = LlamaServer(model, n_ctx=1024)
    await asyncio.to_thread(server.start)
    try:
        async with httpx.AsyncClient(timeout=60) as http:
            client = PromptClient(server.base_url, "tiny", http=http)
            events: list[EngineEvent] = []
            queue = PromptQueue(lambda: client, events.append)
            raw: list[Run] = []
            queued: list[Run] = []
            for i in range(runs + 2):  # two warm-up rounds; pairs run back to back, in turn
                if i % 2:
                    r = await raw_run(http, client.url, max_tokens)
                    q = await queue_run(queue, events, max_tokens)
                else:
                    q = await queue_run(queue, events, max_tokens)
                    r = await raw_run(http, client.url, max_tokens)
                if i >= 2:
                    raw.append(r)
                    queued.append(q)
            await queue.aclose()
    finally:
        server.stop()

    raw_tok_s = statistics.median(r.tok_s for r in raw)
    queue_tok_s = statistics.median(q.tok_s for q in queued)
    raw_ttft = statistics.median(r.ttft_s for r in raw) * 1000
    queue_ttft = statistics.median(q.ttft_s for q in queued) * 1000
    # Each pair ran under the same load, so the median of per-pair ratios is the fair figure.
    ratio = statistics.median(q.tok_s / r.tok_s for q, r in zip(queued, raw, strict=True))
    overhead = statistics.median(
        (q.ttft_s - r.ttft_s) * 1000 for q, r in zip(queued, raw, strict=True)
    )
    print(f"engine: llama-cpp-python server, model {model.name}")
    print(f"runs: {runs} x {max_tokens} tokens each way (medians)")
    print(f"raw httpx SSE        : {raw_tok_s:8.1f} tok/s   TTFT {raw_ttft:6.1f} ms")
    print(f"PromptClient+Queue   : {queue_tok_s:8.1f} tok/s   TTFT {queue_ttft:6.1f} ms")
    ok_rate = ratio >= TOK_S_TARGET
    ok_ttft = overhead < TTFT_OVERHEAD_TARGET_MS
    print(f"tok/s ratio (paired) : {ratio:.3f}x (target >= {TOK_S_TARGET}) {_mark(ok_rate)}")
    print(
        f"TTFT overhead (paired): {overhead:+.1f} ms (target < {TTFT_OVERHEAD_TARGET_MS:.0f} ms) "
        f"{_mark(ok_ttft)}"
    )
    return 0 if ok_rate and ok_ttft else 1


def _replay_body(tokens: int) -> list[bytes]:
    """llama-cpp-python's chunk shapes: role, one chunk per token, finish, [DONE]."""

    def chunk(delta: dict[str, str], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        body = {"id": "chatcmpl-bench", "model": "tiny", "object": "chat.completion.chunk"}
        return f"data: {json.dumps({**body, 'choices': [choice]})}\r\n\r\n".encode()

    parts = [chunk({"role": "assistant"}), *(chunk({"content": " word"}) for _ in range(tokens))]
    return [*parts, chunk({}, "length"), b"data: [DONE]\r\n\r\n"]


async def serve_replay(tokens: int) -> None:
    """A stand-in engine (run in its own process) that streams as fast as it is read."""
    body = [f"{len(b):x}\r\n".encode() + b + b"\r\n" for b in _replay_body(tokens)]
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    )

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                request = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            length = next(
                (int(v) for k, _, v in (ln.partition(b":") for ln in request.split(b"\r\n"))
                 if k.lower() == b"content-length"),
                0,
            )
            await reader.readexactly(length)
            writer.write(head)
            for part in body:
                writer.write(part)
                await writer.drain()
            writer.write(b"0\r\n\r\n")
            await writer.drain()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


async def bench_replay(runs: int, tokens: int) -> None:
    """Client ceiling: raw vs queue reading the same replayed stream, with CPU per token."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--serve-replay", str(tokens), stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        port = int(await proc.stdout.readline())
        async with httpx.AsyncClient(timeout=60) as http:
            client = PromptClient(f"http://127.0.0.1:{port}", "tiny", http=http)
            events: list[EngineEvent] = []
            queue = PromptQueue(lambda: client, events.append)
            raw: list[tuple[Run, float]] = []
            queued: list[tuple[Run, float]] = []
            for i in range(runs + 1):
                cpu = time.process_time()
                r = await raw_run(http, client.url, tokens)
                raw_cpu = time.process_time() - cpu
                cpu = time.process_time()
                q = await queue_run(queue, events, tokens)
                queue_cpu = time.process_time() - cpu
                if i:
                    raw.append((r, raw_cpu))
                    queued.append((q, queue_cpu))
            await queue.aclose()
    finally:
        proc.kill()
        await proc.wait()
    for name, rows in (("raw httpx SSE", raw), ("PromptClient+Queue", queued)):
        rate = statistics.median(r.tok_s for r, _ in rows)
        us = statistics.median(c for _, c in rows) / tokens * 1e6
        print(f"{name:<21}: {rate:8.0f} tok/s   client CPU {us:5.1f} us/token")
    ratio = statistics.median(q.tok_s / r.tok_s for (q, _), (r, _) in zip(queued, raw, strict=True))
    mark = _mark(ratio >= CEILING_TARGET)
    print(f"ceiling vs raw: {ratio:4.2f}x (target ≥ {CEILING_TARGET:.2f}x) {mark}")


def _mark(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--max-tokens", type=int, default=400)
    parser.add_argument("--replay-tokens", type=int, default=3000)
    parser.add_argument("--serve-replay", type=int, help=argparse.SUPPRESS)
    parser.add_argument(
        "--replay-only", action="store_true", help="only the replayed stream (no engine)"
    )
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.runs, args.max_tokens, args.replay_tokens = 1, 16, 50
    if args.serve_replay:
        asyncio.run(serve_replay(args.serve_replay))
        return
    if args.replay_only:
        _replay(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        model = write_tiny_gguf(
            Path(tmp) / "bench.gguf", f16=True, embd=256, layers=4, heads=8, ctx=1024
        )
        status = asyncio.run(bench(args.runs, args.max_tokens, model))
    _replay(args)
    sys.exit(0 if args.smoke else status)


def _replay(args: argparse.Namespace) -> None:
    print(f"\nreplayed stream, no engine: {args.replay_tokens} tokens, {args.runs} runs (medians)")
    asyncio.run(bench_replay(args.runs, args.replay_tokens))


if __name__ == "__main__":
    main()
