"""Benchmark: the dashboard's own cost per token (issue 23 §6, issue 32).

The same streamed answer read two ways, in turn (the order swapped each pair):
- the prompt client alone: `PromptQueue` to a list, as headless mode gets it, timed from
  submit to the end event;
- the real app: `MvpApp` running in a 160x48 pseudo-terminal with Textual's real driver, the
  queue's events through the app's engine port, each token to the Prompt pane as a coalesced
  notice, into its markdown stream; timed from submit (the clock read in the app's process,
  CLOCK_MONOTONIC, the same clock here) until the answer's last token has been written to the
  terminal: the markdown stream drained and drawn. So that the last token can be told on
  the terminal, the app's side hands the pane one more delta, a word no other token is, just
  before the end event (one token more than the client alone handles, against 400). The app
  answers one prompt before the timed one, as the client alone is warm too (connection,
  lazy imports, first renders). Also printed: when the end event reached the app's process,
  which splits the app's time into reading the stream (the loop shared with rendering) and
  drawing what is left after it.

The headline is the replayed stream (the default): a loopback process streams a recorded
shape as fast as it is read, so the ratio is the app's cost per token, engine aside (target
>= 0.9x). `--engine` streams the real llama-cpp-python server on a generated model instead:
there a slow CPU engine caps both sides, so the ratio mostly shows the engine.

Also printed: the screen's own work within the timed answer (its frames, and any layout of
the whole screen), timed in the app's process from submit until just after the last token's
frame, and the ratio those frames alone would leave were nothing else the app's: the floor
under the headline (an answer needs at least two frames, its question and its end).

With `--profile FILE` the app's side runs under cProfile from the timed submit to
`PROFILED_AFTER_S` after its end event; the stats (pstats) of the last pair go to FILE.

    .venv/bin/python bench/bench_dashboard_tokens.py [--runs 7] [--tokens 400] [--engine]
        [--profile FILE] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.smoke import add_smoke, load_note, verdict  # noqa: E402
from bench.worktree import worktree_env  # noqa: E402
from mvp_tui.events import EngineEvent  # noqa: E402
from mvp_tui.prompt.client import PromptClient  # noqa: E402
from mvp_tui.prompt.events import PromptDone, TextDelta, is_end  # noqa: E402
from mvp_tui.prompt.queue import PromptQueue  # noqa: E402

PROMPT = "benchmark the dashboard"
TARGET = 0.9
COLS, ROWS = 160, 48
LAST = "zqxlast"  # the stream's last token: drawn once, when the stream has drained
PROFILE_ENV = "BENCH_TOKENS_PROFILE"  # the app's side: where its cProfile stats go
PROFILED_AFTER_S = 0.1  # the end event to the profile's end: the last frame drawn
SCREEN_WORK = "screen-work"  # the child's frames and layouts, next to its `started` file


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


def child(url: str, tokens: int, started_file: Path) -> None:
    """The app's side, run inside the pty: the real app, driver and all; once it has settled,
    submit and write the clock; the parent stops its clock on the terminal's bytes."""
    from textual.pilot import Pilot

    from mvp_tui.widgets.prompt import PromptPane
    from tests.tui.apps import make_app

    app = make_app()
    profile_to = os.environ.get(PROFILE_ENV)
    profiler = cProfile.Profile() if profile_to else None

    def profiled() -> None:
        assert profiler is not None and profile_to
        profiler.disable()
        profiler.dump_stats(profile_to + ".part")
        os.replace(profile_to + ".part", profile_to)  # whole, before the parent reads it

    async def settle(pilot: Pilot[object]) -> None:
        for _ in range(3):
            await pilot.pause()
        await pilot.wait_for_scheduled_animations()

    async def drive(pilot: Pilot[object]) -> None:
        pane = app.query_one(PromptPane)
        pane.set_ready("tiny")
        # Settled before the clock starts: the first paint, the transcript shown.
        while not pane.view.display:
            await pilot.pause()
        await settle(pilot)
        http = httpx.AsyncClient(timeout=60)
        client = PromptClient(url, "tiny", http=http)
        timed, started, warm = False, 0.0, asyncio.Event()

        def sink(event: EngineEvent) -> None:
            if isinstance(event, PromptDone) and not timed:
                warm.set()
            elif isinstance(event, PromptDone):  # the marker: drawn once all before it is
                ended = time.monotonic()
                started_file.write_text(f"{started!r} {ended!r} {event.tokens_generated}")
                if profiler is not None:
                    asyncio.get_running_loop().call_later(PROFILED_AFTER_S, profiled)
                for write in WRITE_SCREEN_WORK:
                    write()
                app.port(TextDelta(at=time.time(), prompt_id=event.prompt_id, text=" " + LAST))
            app.port(event)

        queue = PromptQueue(lambda: client, sink)
        # A warm-up prompt first, as the client alone is warm: the connection open, httpx's
        # and the markdown renderer's lazy imports and first calls paid.
        queue.submit(PROMPT, tokens)
        await warm.wait()
        await settle(pilot)
        watch_the_screen(app, started_file.with_name(SCREEN_WORK))
        timed, started = True, time.monotonic()
        if profiler is not None:
            profiler.enable()
        queue.submit(PROMPT, tokens)
        # The parent ends this process once it has seen the last token on the terminal; until
        # then this task holds the queue (and its tasks) alive.
        await asyncio.Event().wait()

    app.run(auto_pilot=drive)  # type: ignore[arg-type]


def watch_the_screen(app: object, to: Path) -> None:
    """Time the screen's frames (compositor renders) and layouts (whole-screen reflows)
    from now until the first frame after the end event (the one that draws the last
    token); written to `to` a moment later. Textual's private methods, wrapped on this
    app's screen only: a bench's instrument, not the app's."""
    from textual.app import App

    assert isinstance(app, App)
    screen, compositor = app.screen, app.screen._compositor
    frames: list[float] = []
    layouts: list[float] = []
    render, reflow = screen._compositor_refresh, compositor.reflow
    counting, ended = True, False  # counted until the first frame after the end event

    def timed_render() -> None:
        nonlocal counting
        begun = time.perf_counter()
        render()
        if counting:
            frames.append(time.perf_counter() - begun)
            counting = not ended

    def timed_reflow(*args: Any, **kwargs: Any) -> Any:
        begun = time.perf_counter()
        try:
            return reflow(*args, **kwargs)
        finally:
            if counting:
                layouts.append(time.perf_counter() - begun)

    def write() -> None:
        to.with_suffix(".part").write_text(json.dumps({"frames": frames, "layouts": layouts}))
        os.replace(to.with_suffix(".part"), to)

    screen._compositor_refresh = timed_render  # type: ignore[method-assign]
    compositor.reflow = timed_reflow  # type: ignore[method-assign]
    def at_the_end() -> None:
        nonlocal ended
        ended = True
        asyncio.get_running_loop().call_later(PROFILED_AFTER_S, write)

    WRITE_SCREEN_WORK.append(at_the_end)


WRITE_SCREEN_WORK: list[Callable[[], object]] = []  # the child: called at the end event
SCREEN: list[dict[str, list[float]]] = []  # per app run: its frames' and layouts' seconds


WARM_UP = [1]  # pairs not counted (none in a smoke run)
ENDED: list[float] = []  # per app run: submit → the end event in the app's process, seconds


PROFILE: list[Path] = []  # --profile: where the last app run's stats go


def capture_miss(output: bytes, started_file: Path) -> None:
    """The marker never reached the terminal (2 runs in ~35: the answer drawn whole, its 400
    words, and the marker not among them even with the escapes stripped): what the terminal
    got, kept in BENCH_TOKENS_MISSES (the temp dir), and whether the app wrote its end event."""
    from tests.faults.pty_dashboard import ANSI

    kept = Path(os.environ.get("BENCH_TOKENS_MISSES", tempfile.gettempdir()))
    path = kept / f"bench-tokens-miss-{os.getpid()}-{time.time_ns()}.out"
    path.write_bytes(output)
    plain = ANSI.sub(b"", output)
    ended = started_file.read_text() if started_file.exists() else "(not written)"
    print(f"the marker {LAST!r} never reached the terminal: {len(output)} bytes written, "
          f"the marker in them without escapes: {LAST.encode() in plain}; the app's end event: "
          f"{ended}; the output: {path}; its last 600 plain bytes: {plain[-600:]!r}",
          file=sys.stderr, flush=True)


def in_app(url: str, tokens: int, tmp: Path) -> float:
    """tok/s with the real app in the loop, drawn to a real pty."""
    from tests.faults.pty_dashboard import PtyDashboard

    started_file = tmp / "started"
    started_file.unlink(missing_ok=True)
    started_file.with_name(SCREEN_WORK).unlink(missing_ok=True)
    env = {"PYTHONPATH": str(REPO), **worktree_env()}
    if PROFILE:
        PROFILE[0].unlink(missing_ok=True)
        env[PROFILE_ENV] = str(PROFILE[0])
    argv = (str(Path(__file__)), "--child", url, str(tokens), str(started_file))
    term = PtyDashboard(env, cols=COLS, rows=ROWS, argv=argv)
    try:
        try:
            term.wait_for(LAST, within=120)
        except AssertionError:
            capture_miss(term.output, started_file)
            raise
        drawn = time.monotonic()
        screen_work = started_file.with_name(SCREEN_WORK)
        # Both written a moment after the end event: the child is not killed before.
        for written in [screen_work, *PROFILE]:
            deadline = drawn + 30
            while not written.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        SCREEN.append(json.loads(screen_work.read_text()))
        screen_work.unlink()
        started, ended, generated = started_file.read_text().split()
        ENDED.append(float(ended) - float(started))
        return int(generated) / (drawn - float(started))
    finally:
        term.kill()


async def paired(url: str, tokens: int, runs: int, tmp: Path) -> tuple[list[float], list[float]]:
    lone: list[float] = []
    app: list[float] = []
    async with httpx.AsyncClient(timeout=60) as http:
        client = PromptClient(url, "tiny", http=http)
        for i in range(runs + WARM_UP[0]):  # a warm-up pair; the order swapped each pair
            if i % 2:
                a = await alone(client, tokens)
                b = await asyncio.to_thread(in_app, url, tokens, tmp)
            else:
                b = await asyncio.to_thread(in_app, url, tokens, tmp)
                a = await alone(client, tokens)
            if i >= WARM_UP[0]:
                lone.append(a)
                app.append(b)
    return lone, app


def report(source: str, tokens: int, lone: list[float], app: list[float], smoke: bool) -> bool:
    ratios = sorted(b / a for a, b in zip(lone, app, strict=True))
    ratio = statistics.median(ratios)
    print(f"stream: {source}, {tokens} tokens, {len(lone)} pairs, order alternating "
          f"({load_note()})")
    print(f"prompt client alone            : {statistics.median(lone):8.0f} tok/s "
          "(submit → end event)")
    print(f"the app, drawn in a {COLS}x{ROWS} pty : {statistics.median(app):8.0f} tok/s "
          "(submit → last token on the terminal)")
    cost_us = (1 / statistics.median(app) - 1 / statistics.median(lone)) * 1e6
    ended_ms = statistics.median(ENDED) * 1000
    drawn_ms = statistics.median(tokens / r for r in app) * 1000
    print(f"the app's own cost: ~{cost_us:.0f} µs a token; in the app, submit → end event "
          f"{ended_ms:.0f} ms, → last token drawn {drawn_ms:.0f} ms (the client alone: "
          f"{statistics.median(tokens / r for r in lone) * 1000:.0f} ms)")
    timed = SCREEN[-len(app):]  # the counted pairs' app runs
    frames_ms = statistics.median(sum(run["frames"]) for run in timed) * 1000
    frames_n = statistics.median(len(run["frames"]) for run in timed)
    layouts_ms = statistics.median(sum(run["layouts"]) for run in timed) * 1000
    layouts_n = statistics.median(len(run["layouts"]) for run in timed)
    alone_ms = statistics.median(tokens / r for r in lone) * 1000
    print(f"the screen's work in the timed answer: {frames_n:.0f} frames, {frames_ms:.1f} ms; "
          f"{layouts_n:.0f} layouts of the whole screen, {layouts_ms:.1f} ms; were they the "
          f"app's only cost: {alone_ms / (alone_ms + frames_ms + layouts_ms):.3f}x")
    ok = ratio >= TARGET
    print(f"dashboard vs client alone: {ratio:.3f}x (pairs {ratios[0]:.3f}–{ratios[-1]:.3f}; "
          f"target >= {TARGET}) {verdict(ok, smoke)}")
    return ok


async def bench_replay(runs: int, tokens: int, tmp: Path, smoke: bool) -> bool:
    serve = Path(__file__).with_name("bench_prompt.py")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(serve), "--serve-replay", str(tokens), stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        port = int(await proc.stdout.readline())
        lone, app = await paired(f"http://127.0.0.1:{port}", tokens, runs, tmp)
    finally:
        proc.kill()
        await proc.wait()
    return report("replayed, as fast as read", tokens, lone, app, smoke)


async def bench_engine(runs: int, tokens: int, tmp: Path, smoke: bool) -> bool:
    from tests.fakes.tiny_gguf import write_tiny_gguf
    from tests.prompt.engine import LlamaServer

    model = write_tiny_gguf(tmp / "bench.gguf", f16=True, embd=256, layers=4, heads=8, ctx=1024)
    server = LlamaServer(model, n_ctx=1024)
    await asyncio.to_thread(server.start)
    try:
        lone, app = await paired(server.base_url, tokens, runs, tmp)
    finally:
        server.stop()
    return report(f"llama-cpp-python server, {model.name}", tokens, lone, app, smoke)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--tokens", type=int, default=400)
    parser.add_argument("--engine", action="store_true", help="the real engine's stream")
    parser.add_argument("--profile", type=Path, help="the app's side's cProfile stats here")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    add_smoke(parser)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), Path(args.child[2]))
        return
    if args.smoke:
        args.runs, args.tokens, WARM_UP[0] = 1, 20, 0
    if args.profile:
        PROFILE.append(args.profile.resolve())
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # the app's bytecode cached, as installed
    with tempfile.TemporaryDirectory(prefix="bench-tokens-") as tmp_dir:
        tmp = Path(tmp_dir)
        run = bench_engine if args.engine else bench_replay
        ok = asyncio.run(run(args.runs, args.tokens, tmp, args.smoke))
    sys.exit(0 if ok or args.smoke else 1)


if __name__ == "__main__":
    main()
