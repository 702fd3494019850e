"""Benchmark: the dashboard's own cost per token (issue 23 §6).

The same streamed answer read two ways, in turn: the prompt client alone (`PromptQueue` to a
list, as headless mode gets it), and with the real app in the loop: `MvpApp` run headless
(`App.run_test()`), the queue's events through the app's engine port, each token to the
Prompt pane as a coalesced notice, into its markdown stream. tok/s is timed from submit to
the end event (alone) or to the Prompt pane having taken it (the app). Prints the paired
median ratio (target >= 0.9x), the token batches the pane took, and the facts the port
handed each owner for one prompt (before this port every event went to every pane).

The stream: by default the real llama-cpp-python server on a generated model (the engine's
own pace); `--replay` streams a recorded shape from a loopback process as fast as it is read
(the ceiling: the app's cost per token, engine aside).

    .venv/bin/python bench/bench_dashboard_tokens.py [--runs 7] [--tokens 400] [--replay]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mvp_tui.events import EngineEvent
from mvp_tui.prompt.client import PromptClient
from mvp_tui.prompt.events import PromptDone, is_end
from mvp_tui.prompt.queue import PromptQueue
from mvp_tui.widgets.prompt import PromptPane
from tests.fakes.tiny_gguf import write_tiny_gguf
from tests.prompt.engine import LlamaServer
from tests.tui.apps import make_app

PROMPT = "benchmark the dashboard"
TARGET = 0.9
PANES = 5  # before the port: every event to each of the five panes (and the summary rebuilt)


async def alone(client: PromptClient, tokens: int) -> float:
    """tok/s of the client and queue alone: events to a list."""
    events: list[EngineEvent] = []
    ended = asyncio.Event()

    def sink(event: EngineEvent) -> None:
        events.append(event)
        if is_end(event):
            ended.set()

    queue = PromptQueue(lambda: client, sink)
    start = time.perf_counter()
    queue.submit(PROMPT, tokens)
    await asyncio.wait_for(ended.wait(), 120)
    elapsed = time.perf_counter() - start
    await queue.aclose()
    done = events[-1]
    assert isinstance(done, PromptDone), done
    return done.tokens_generated / elapsed


async def in_app(client: PromptClient, tokens: int, figures: dict[str, int]) -> float:
    """tok/s with the real app in the loop: events through its port to the Prompt pane."""
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(PromptPane)
        pane.set_ready("tiny")
        # Settled before the clock starts: the first paint, the answer's markdown mounted.
        while not pane.query("#prompt-markdown"):
            await pilot.pause()
        for _ in range(3):
            await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        taken = len(pane.rates)
        generated: list[int] = []

        shown = asyncio.Event()

        def sink(event: EngineEvent) -> None:
            app.port(event)
            if isinstance(event, PromptDone):
                generated.append(event.tokens_generated)
                # Queued behind the pane's facts: set once the pane has taken the end.
                pane.call_later(shown.set)

        queue = PromptQueue(lambda: client, sink)
        start = time.perf_counter()
        queue.submit(PROMPT, tokens)
        await asyncio.wait_for(shown.wait(), 120)
        assert len(pane.rates) == taken + 1  # the pane has the end: every token is in it
        elapsed = time.perf_counter() - start
        await queue.aclose()
        figures["batches"] = pane.token_batches
        figures.update({f"to {k}": v for k, v in app.port.routed.items()})
        app._exit_cleared = True
    return generated[0] / elapsed


async def paired(
    client: PromptClient, tokens: int, runs: int
) -> tuple[list[float], list[float], dict[str, int]]:
    lone: list[float] = []
    app: list[float] = []
    figures: dict[str, int] = {}
    for i in range(runs + 1):  # one warm-up pair; pairs run back to back, in turn
        if i % 2:
            a, b = await alone(client, tokens), await in_app(client, tokens, figures)
        else:
            b, a = await in_app(client, tokens, figures), await alone(client, tokens)
        if i:
            lone.append(a)
            app.append(b)
    return lone, app, figures


def report(source: str, tokens: int, lone: list[float], app: list[float],
           figures: dict[str, int]) -> bool:
    ratio = statistics.median(b / a for a, b in zip(lone, app, strict=True))
    print(f"stream: {source}, {tokens} tokens, {len(lone)} pairs (medians)")
    print(f"prompt client alone : {statistics.median(lone):8.0f} tok/s")
    print(f"with the app        : {statistics.median(app):8.0f} tok/s")
    events = tokens + 3  # queued, started, the deltas, done
    routed = {k: v for k, v in figures.items() if k.startswith("to ")}
    batches = figures.get("batches", 0)
    print(f"token batches the pane took (last run): {batches} for {tokens} tokens")
    print(f"facts routed (last run): {routed}; before the port: {events} events x {PANES} panes "
          f"= {events * PANES} deliveries, and {events} status-bar rebuilds")
    ok = ratio >= TARGET
    mark = "ok" if ok else "MISSED"
    print(f"dashboard vs client alone: {ratio:.3f}x (target >= {TARGET}) {mark}")
    return ok


async def bench_engine(runs: int, tokens: int, model: Path) -> bool:
    server = LlamaServer(model, n_ctx=1024)
    await asyncio.to_thread(server.start)
    try:
        async with httpx.AsyncClient(timeout=60) as http:
            client = PromptClient(server.base_url, "tiny", http=http)
            lone, app, figures = await paired(client, tokens, runs)
    finally:
        server.stop()
    return report(f"llama-cpp-python server, {model.name}", tokens, lone, app, figures)


async def bench_replay(runs: int, tokens: int) -> bool:
    serve = Path(__file__).with_name("bench_prompt.py")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(serve), "--serve-replay", str(tokens), stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        port = int(await proc.stdout.readline())
        async with httpx.AsyncClient(timeout=60) as http:
            client = PromptClient(f"http://127.0.0.1:{port}", "tiny", http=http)
            lone, app, figures = await paired(client, tokens, runs)
    finally:
        proc.kill()
        await proc.wait()
    return report("replayed, as fast as read", tokens, lone, app, figures)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--tokens", type=int, default=400)
    parser.add_argument("--replay", action="store_true", help="a replayed stream, no engine")
    args = parser.parse_args()
    if args.replay:
        ok = asyncio.run(bench_replay(args.runs, args.tokens))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            model = write_tiny_gguf(
                Path(tmp) / "bench.gguf", f16=True, embd=256, layers=4, heads=8, ctx=1024
            )
            ok = asyncio.run(bench_engine(args.runs, args.tokens, model))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
